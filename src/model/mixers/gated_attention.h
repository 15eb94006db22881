// Gated full attention token mixer (Qwen3-Next, Qwen3.5):
//   h += o_proj(attn(rope(qnorm(q)), rope(knorm(k)), v) ⊙ σ(gate)).
#pragma once

#include <memory>

#include "core/tensor.h"
#include "model/config.h"
#include "model/mixer.h"

namespace hypic {

struct AttnWeights {
  Tensor qkv;     // [nh·2·hd + 2·nkv·hd, H]: rows [per head (query hd | gate hd) | k | v]
  Tensor q_norm;  // [hd] F32, zero-centred
  Tensor k_norm;  // [hd] F32, zero-centred
  Tensor o_proj;  // [H, nh·hd]
};

std::unique_ptr<TokenMixer> make_gated_attention(const ModelConfig& c, AttnWeights w);
// Its type: state kFull; reads num_attention_heads / num_key_value_heads / head_dim, the RoPE
// fields and attention_bias.
const TokenMixerType& gated_attention_type();

}  // namespace hypic
