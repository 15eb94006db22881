// Dense SwiGLU channel mixer: h += down(silu(gate(x)) ⊙ up(x)). Also the expert of MoE.
#pragma once

#include <memory>

#include "core/tensor.h"
#include "model/mixer.h"

namespace hypic {

struct MlpWeights {
  Tensor gate_up;  // [2·I, H]: rows [gate | up]
  Tensor down;     // [H, I]
  float limit = 0;  // > 0: min(silu(gate), limit) · clamp(up, −limit, limit); 0: none
};

// h [L, H] += SwiGLU(x [L, H]) with weights w (workspace slots of the calling thread).
void swiglu_forward(const MlpWeights& w, const float* x, int64_t L, float* h);
double swiglu_flops(const MlpWeights& w, int64_t L);

std::unique_ptr<ChannelMixer> make_swiglu(MlpWeights w);

}  // namespace hypic
