// Sparse MoE channel mixer: an fp32 router (logits [E] per token), the routing its
// MoeRouter describes (moe_router.h: softmax or sigmoid scores, an optional selection bias,
// optional group-limited choice, top-k, optional renormalisation and scaling), SwiGLU
// experts, an optional shared expert (sigmoid-gated: Qwen; added as is: Bailing). An
// architecture's router variant is a MoeRouter it fills in load_layer; Qwen3-Next /
// Qwen3.5-MoE: softmax, top-k, their norm_topk_prob; Ring-linear: sigmoid, bias, groups.
#pragma once

#include <memory>
#include <vector>

#include "core/tensor.h"
#include "model/mixers/moe_router.h"
#include "model/mixers/swiglu.h"

namespace hypic {

struct MoeWeights {
  Tensor router;                    // [E, H] F32 (routing decisions stay exact)
  MoeRouter routing;                // validated against E by the loader
  std::vector<MlpWeights> experts;  // E
  bool has_shared = false;
  MlpWeights shared;
  Tensor shared_gate;               // [1, H] F32; empty: the shared expert is not gated
};

// w.routing must have passed validate(E) (checked: a failure is a programmer error).
std::unique_ptr<ChannelMixer> make_moe(MoeWeights w);

}  // namespace hypic
