// Full softmax attention token mixers (causal GQA, partial NeoX RoPE):
//   gated (Qwen3-Next, Qwen3.5): h += o_proj(attn(rope(qnorm(q)), rope(knorm(k)), v) ⊙ σ(gate))
//   plain (Ring-linear, MiniMax): h += o_proj(attn(rope(qnorm(q)), rope(knorm(k)), v)), the
//                                 q/k norms only where ModelConfig::attn_qk_norm
#pragma once

#include <memory>

#include "core/tensor.h"
#include "model/config.h"
#include "model/mixer.h"

namespace hypic {

struct AttnWeights {
  // gated: [nh·2·hd + 2·nkv·hd, H], rows [per head (query hd | gate hd) | k | v];
  // plain: [nh·hd + 2·nkv·hd, H], rows [q | k | v].
  Tensor qkv;
  Tensor q_norm;  // [hd] F32 (empty without q/k norms)
  Tensor k_norm;  // [hd] F32
  Tensor o_proj;  // [H, nh·hd]
};

// `type` is gated_attention_type() or attention_type().
std::unique_ptr<TokenMixer> make_attention(const ModelConfig& c, const TokenMixerType& type,
                                           AttnWeights w);
inline std::unique_ptr<TokenMixer> make_gated_attention(const ModelConfig& c, AttnWeights w);
// The types: state kFull; they read num_attention_heads / num_key_value_heads / head_dim, the
// RoPE fields, attention_bias and (plain) attn_qk_norm.
const TokenMixerType& gated_attention_type();
const TokenMixerType& attention_type();

inline std::unique_ptr<TokenMixer> make_gated_attention(const ModelConfig& c, AttnWeights w) {
  return make_attention(c, gated_attention_type(), std::move(w));
}

}  // namespace hypic
