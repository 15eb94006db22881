// Random-weight checkpoints in the real Hugging Face format (config.json + sharded
// safetensors + index) at the real widths of known models with fewer layers, for
// benchmarks at realistic sizes without downloading anything.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace hypic {

// Known shapes: "qwen3.5-35b-a3b", "qwen3-next-80b-a3b", "qwen3.5-27b", and "qwen3.5-h1024"
// (not a released model: the Qwen3.5 dense layout at hidden 1024, for small machines).
std::vector<std::string> synthetic_shapes();

// Writes <out_dir>/config.json, model-0000K-of-0000N.safetensors (one shard per layer plus
// one for embeddings/head) and model.safetensors.index.json. Weights are bf16, uniform with
// std 0.02 (norm weights near their neutral values); layers follow the model's pattern
// (3 linear : 1 full). Logs progress per shard.
Status write_synthetic_checkpoint(const std::string& shape, int layers, const std::string& out_dir,
                                  uint64_t seed = 1);

}  // namespace hypic
