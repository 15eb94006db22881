// Multi-head latent attention token mixer (DeepSeek-V3's MLA as Kimi-Linear and Ling-3.0 use
// it), per head h of nh:
//   q_h         = [q_nope (dn) | q_rope (dr)]           q_proj x, or q_b·rmsnorm(q_a x)
//   c, k_rope   = rmsnorm(kv_a x)[:kv_lora], (kv_a x)[kv_lora:]   one latent per token
//   k_h, v_h    = [W_UK_h·c | k_rope],  W_UV_h·c          (kv_b_proj, per head [k_nope | v])
//   o_h         = softmax(qk_head^−½ · q_h·k_hᵀ) v_h        causal
//   h          += o_proj(o ⊙ σ(g_proj x)_h)                 (the head gate: Ling-3.0)
// with RoPE (Ling-3.0: interleaved pairs, rope_theta) on q_rope and k_rope at their positions,
// none for Kimi-Linear (NoPE).
//
// The cache and the segment entries hold the compressed latent: row "ckv" = [c | k_rope]
// (kv_lora + dr floats per token, for every head together), not expanded K/V. Two ways to
// attend over it (same result, different cost; set_mla_path, HYPIC_MLA):
//   expanded  K, V computed per head from the cache rows once per pass, then ordinary
//             attention: cheap per (query, key) pair — the prefill path
//   absorbed  q'_h = [q_nope·W_UK_h | q_rope] attends the latent rows directly (one kv head
//             of kv_lora + dr, values its first kv_lora dims), o_h = (Σ p·c)·W_UV_hᵀ: no
//             expansion of past tokens — the decode path
// PIC: a body's entry is its "ckv" rows with k_rope un-rotated; composing places them at their
// true positions, rotating k_rope there (Ling) — the latent itself has no position.
#pragma once

#include <memory>

#include "core/tensor.h"
#include "model/config.h"
#include "model/mixer.h"

namespace hypic {

struct MlaWeights {
  // One GEMM for the input projections: rows [q (nh·(dn + dr), or q_lora when q is low rank) |
  // kv_a (kv_lora + dr) | head gate (nh, or none)].
  Tensor in_proj;
  Tensor q_a_norm;   // [q_lora] F32 (low-rank q only), used as is
  Tensor q_b;        // [nh·(dn + dr), q_lora] (low-rank q only)
  Tensor kv_a_norm;  // [kv_lora] F32, used as is
  Tensor kv_b;       // [nh·(dn + dv), kv_lora]: per head rows [k_nope (dn) | v (dv)]
  Tensor w_uk;       // [nh, dn, kv_lora] F32, kv_b's k_nope rows (absorbed path)
  Tensor w_uv_t;     // [nh, kv_lora, dv] F32, kv_b's v rows transposed (absorbed path)
  Tensor o_proj;     // [H, nh·dv]
};

// Splits kv_b into w_uk and w_uv_t (the loader calls it after filling kv_b).
void mla_absorb_weights(const ModelConfig& c, MlaWeights* w);

std::unique_ptr<TokenMixer> make_mla(const ModelConfig& c, MlaWeights w);
// Its type: state kFull; reads num_attention_heads, ModelConfig::mla, rope_theta.
const TokenMixerType& mla_type();

// Which attention path MLA layers take (process-wide; tests and benchmarks compare them).
// kAuto: expanded for pieces of several tokens, absorbed for single tokens and decode
// batches. The environment variable HYPIC_MLA=expanded|absorbed|auto sets the default.
enum class MlaPath { kAuto, kExpanded, kAbsorbed };
void set_mla_path(MlaPath p);
MlaPath mla_path();

}  // namespace hypic
