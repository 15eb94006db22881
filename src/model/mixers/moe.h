// Sparse MoE channel mixer: softmax router (fp32), top-k, optional renormalisation, SwiGLU
// experts, optional sigmoid-gated shared expert (Qwen3-Next, Qwen3.5-MoE).
#pragma once

#include <memory>
#include <vector>

#include "core/tensor.h"
#include "model/config.h"
#include "model/mixers/swiglu.h"

namespace hypic {

struct MoeWeights {
  Tensor router;                    // [E, H] F32 (routing decisions stay exact)
  std::vector<MlpWeights> experts;  // E
  bool has_shared = false;
  MlpWeights shared;
  Tensor shared_gate;               // [1, H] F32
};

std::unique_ptr<ChannelMixer> make_moe(const ModelConfig& c, MoeWeights w);

}  // namespace hypic
