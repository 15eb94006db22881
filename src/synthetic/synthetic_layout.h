// A synthetic checkpoint as data: the config.json to write and the tensors of each shard,
// described per family in synthetic_<family>.cpp — or, for a family that lives in one file
// outside src/, by a builder it gives register_synthetic_shape().
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "core/tensor.h"
#include "synthetic/synthetic.h"

namespace hypic::synthetic {

struct TensorSpec {
  std::string name;
  Shape shape;
  float mean = 0.0f, sd = 0.02f;  // uniform with this mean and standard deviation
};

struct Layout {
  nlohmann::json config;
  std::vector<TensorSpec> globals;              // embeddings, final norm, head: the last shard
  std::vector<std::vector<TensorSpec>> layers;  // one shard per decoder layer
};

using Builder = std::function<Result<Layout>(const SyntheticOptions&)>;

// Each family file adds its shapes (name → builder).
void add_qwen_shapes(std::map<std::string, Builder>* m);
void add_lightning_shapes(std::map<std::string, Builder>* m);
void add_kda_shapes(std::map<std::string, Builder>* m);

// The experts a layout gets: opt.experts when set (checked ≥ top_k), else the model's.
Result<int64_t> expert_count(const SyntheticOptions& opt, int64_t real, int64_t top_k);

}  // namespace hypic::synthetic

namespace hypic {

// Adds shape `name` (listed by synthetic_shapes(), written by write_synthetic_checkpoint()).
// Error when the name is taken.
Status register_synthetic_shape(const std::string& name, synthetic::Builder build);

}  // namespace hypic
