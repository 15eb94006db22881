// KDA, Kimi Delta Attention token mixer (Kimi-Linear, Ling-3.0), per head h of dk = dv:
//   q, k, v = silu(conv(x·W_qᵀ | x·W_kᵀ | x·W_vᵀ))      short causal conv, kernel K
//   q, k    L2-normalised, q ×= dk^−½
//   g_t     = −exp(A_log_h)·softplus(f_t + dt_bias)  per channel, f = W_f x (Kimi: low rank
//             f_b·f_a·x); Ling-3.0's safe gate: g_t = lower·σ(exp(A_log_h)·(f_t + dt_bias))
//   β_t     = σ(W_b x)
//   S_t     = (I − β_t k_t k_tᵀ)·Diag(e^{g_t})·S_{t−1} + β_t k_t v_tᵀ,   o_t = S_tᵀ q_t
//             (kernels::Family::kKda, decay first)
//   h      += W_o·(rmsnorm_h(o)·w ⊙ σ(W_g x))             (Kimi: W_g low rank g_b·g_a)
// PIC: the dense KDA transition, S(body|0), and the conv tail / warm-up (conv_delta.h).
#pragma once

#include <memory>

#include "core/tensor.h"
#include "model/config.h"
#include "model/mixer.h"

namespace hypic {

// D = heads·head_dim. The input projections run as one GEMM: in_proj rows
// [q (D) | k (D) | v (D) | forget gate input (Fr) | output gate input (Gr) | b (heads)], where a
// gate given in low rank (Kimi: f_a, g_a of rank r) has Fr = r and its up-projection in f_up
// [D, r] (g_up), and a full-rank gate (Ling: f_proj, g_proj) has Fr = D and no up-projection.
struct KdaWeights {
  Tensor in_proj;  // [3·D + Fr + Gr + heads, H]
  int64_t f_rows = 0, g_rows = 0;  // Fr, Gr
  Tensor f_up;     // [D, Fr] or empty
  Tensor g_up;     // [D, Gr] or empty
  Tensor conv_w;   // [K, 3·D] F32 (transposed torch weight)
  Tensor decay;    // [heads] F32: exp(A_log)
  Tensor dt_bias;  // [D] F32
  Tensor norm_w;   // [head_dim] F32, used as is
  Tensor o_proj;   // [H, D]
};

std::unique_ptr<TokenMixer> make_kda(const ModelConfig& c, KdaWeights w);
// Its type: state kLinear; reads the linear_* sizes, kda_safe_gate, kda_lower_bound.
const TokenMixerType& kda_type();

}  // namespace hypic
