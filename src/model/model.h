// A loaded Qwen3-Next / Qwen3.5 hybrid model and its forward pass on the CPU.
//
// Threading: a Model is immutable after load; forward() may run concurrently on different
// SeqStates (each call uses both cores through OpenMP / oneDNN).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/config.h"
#include "model/state.h"
#include "model/weights.h"

namespace hypic {

struct LoadOptions {
  // Matrix weights: kF32 (exact, matches the reference to fp32 rounding) or kBF16 (AVX512-BF16
  // / AMX GEMMs, half the memory traffic). Vectors (norms, gates) stay fp32 either way.
  DType compute = DType::kBF16;
  bool progress = true;  // log loading progress for large checkpoints
};

enum class LogitsFor { kLast, kAll, kNone };

class Model {
 public:
  static Result<std::unique_ptr<Model>> load(const std::string& dir, const LoadOptions& opt);

  const ModelConfig& config() const { return cfg_; }
  DType compute_type() const { return compute_; }
  const std::string& dir() const { return dir_; }

  // A fresh (empty) sequence state with KV room for `capacity` tokens (grows on demand).
  SeqState new_state(int64_t capacity = 256) const;

  // Runs `tokens` ([L], L >= 1) at positions state.pos … state.pos + L − 1, updating the
  // state. logits: [1, V] (kLast), [L, V] (kAll) or untouched (kNone).
  // Errors: token id out of range, position beyond max_position_embeddings.
  Status forward(SeqState& state, const std::vector<int32_t>& tokens, LogitsFor which,
                 std::vector<float>* logits) const;

  // Floating-point operations of a forward over L new tokens after `past` tokens, counting
  // matrix products (2 per multiply-add; MoE counts the routed top-k + shared experts),
  // attention score/value products and the chunked delta rule. For throughput reports.
  double forward_flops(int64_t L, int64_t past, bool logits_last_only = true) const;

  const ModelWeights& weights() const { return w_; }

 private:
  Model() = default;
  void gdn_layer(const LayerWeights& lw, LinearState& st, const float* x, int64_t L,
                 float* h) const;
  void attn_layer(const LayerWeights& lw, KvCache& kv, int64_t pos, const float* x, int64_t L,
                  float* h) const;
  void mlp_layer(const MlpWeights& w, const float* x, int64_t L, float* h) const;
  void moe_layer(const MoeWeights& w, const float* x, int64_t L, float* h) const;
  void grow_kv(SeqState& s, int64_t need) const;

  ModelConfig cfg_;
  DType compute_ = DType::kF32;
  std::string dir_;
  ModelWeights w_;
  std::shared_ptr<void> rope_;  // kernels::Rope
};

}  // namespace hypic
