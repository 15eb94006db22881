// Random-weight checkpoints in the real Hugging Face format (config.json + sharded
// safetensors + index) at the real widths of known models with fewer layers, for
// benchmarks at realistic sizes without downloading anything.
#pragma once

#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace hypic {

// Known shapes: "qwen3.5-35b-a3b", "qwen3-next-80b-a3b", "qwen3.5-27b", "qwen3.5-h1024" (not a
// released model: the Qwen3.5 dense layout at hidden 1024, for small machines),
// "ring-mini-linear-2.0", "ring-flash-linear-2.0", "minimax-m1", "kimi-linear-48b-a3b",
// "ling-3.0-flash".
std::vector<std::string> synthetic_shapes();

struct SyntheticOptions {
  int layers = 4;
  // > 0: this many routed experts instead of the model's (each at its real width; the
  // routing's top-k is kept, so a token's work is unchanged and only the bytes shrink — for
  // MiniMax-M1, whose 32 experts of 3 × 6144 × 9216 are 10.9 GB per layer in bf16).
  int experts = 0;
  uint64_t seed = 1;
  // kQ8 / kQ4: the matrices are written quantized, as `hypic quantize` stores them
  // (checkpoint/stored_quant.h), for models whose bf16 form does not fit the disk.
  DType dtype = DType::kBF16;
};

// Writes <out_dir>/config.json, model-0000K-of-0000N.safetensors (one shard per layer plus
// one for embeddings/head) and model.safetensors.index.json. Weights are bf16, uniform with
// std 0.02 (norm weights near their neutral values); layers follow the model's pattern at
// this depth (Qwen: 3 linear : 1 full; Ring: its layer_group_size, capped at the depth;
// MiniMax-M1: 7 Lightning : 1 softmax, the last layer softmax when the depth is below 8;
// Kimi-Linear: 3 KDA : 1 MLA; Ling-3.0: 5 KDA : 1 MLA, the group capped at the depth).
// Quantized (opt.dtype): which tensors are matrices is what the loader says of a probe model
// of the same shape (at most 8 layers, top-k experts) written first into <out_dir>.probe
// and removed; each matrix is drawn in bf16 and quantized before it is written. Logs
// progress per shard.
Status write_synthetic_checkpoint(const std::string& shape, const SyntheticOptions& opt,
                                  const std::string& out_dir);

}  // namespace hypic
