// Lightning attention token mixer (Ring-linear-2.0, MiniMax-M1 / Text-01), per head h:
//   q, k, v = split(act(x·W_qkvᵀ))          act: SiLU (MiniMax, Ring's linear_silu) or none
//   q, k    = rope(qk_norm(q, k))            per-head RMSNorm and partial NeoX RoPE: Ring only
//   S_t     = λ_h·S_{t−1} + k_t v_tᵀ,  o_t = scale·S_tᵀ q_t     (kernels::Family::kLightning)
//   h      += W_o·(group_rmsnorm(o)·w ⊙ σ(x·W_gᵀ))
// λ_h = e^{−s_{l,h}} is fixed per layer and head (ModelConfig::Lightning::slopes).
//
// PIC: an entry holds the body's T (log-scalar: L·log λ per head) and S(body|0) built from a
// standalone prefill at canonical positions. With RoPE inside the layer (Ring) the cached
// state's keys carry the phase of those positions: composing the body at position p (its
// first token, canonically at `seam`) re-rotates S(body|0) by Δ = p − seam before
// S ← T·S + R(Δ)·S(body|0) (SPEC §2; exact: T is a scalar, it commutes with R).
#pragma once

#include <memory>
#include <vector>

#include "core/tensor.h"
#include "model/config.h"
#include "model/mixer.h"

namespace hypic {

struct LightningWeights {
  Tensor qkv;     // [3·D, H], rows [q (all heads) | k | v], D = heads·head_dim
  Tensor q_norm;  // [head_dim] F32 (empty without qk_norm)
  Tensor k_norm;  // [head_dim] F32
  Tensor gate;    // [D, H] output gate projection
  Tensor norm;    // [D] F32 group RMSNorm weight (as is)
  Tensor out;     // [H, D]
};

// Decoder layer `layer` (its decay depends on the depth).
std::unique_ptr<TokenMixer> make_lightning(const ModelConfig& c, int layer, LightningWeights w);
// Its type: state kLinear; reads ModelConfig::lightning and rope_theta.
const TokenMixerType& lightning_type();
// The per-token log decay −s_{l,h} of decoder layer `layer`: [heads].
std::vector<float> lightning_layer_decay(const ModelConfig& c, int layer);

}  // namespace hypic
