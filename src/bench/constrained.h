// hypic bench constrained: what constrained decoding (engine/token_constraint.h) costs.
//
//   mask: along a tool call written in the model's vocabulary, the time of a full mask
//         (the vocabulary trie walked with the grammar state) and of checking one token, per
//         position, over the model's whole vocabulary;
//   decode: greedy and sampled decode of `tokens` tokens from one prompt, free and under a
//         tool-call grammar, interleaved `reps` times: ms per token of each and the ratio,
//         and how many tokens needed the full mask (the rest took the fast paths).
// One JSON document (with the CPU's model name and the flags that choose kernels).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/status.h"

namespace hypic::bench {

struct ConstrainedBenchOptions {
  std::string model;
  DType dtype = DType::kBF16;
  int tokens = 64;       // decoded per run, >= 1
  int prompt_tokens = 64;
  int reps = 3;          // interleaved free / constrained pairs, >= 1
  uint32_t seed = 1;
};

Result<nlohmann::json> run_constrained_bench(const ConstrainedBenchOptions& o);

}  // namespace hypic::bench
