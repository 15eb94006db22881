// Conv-state warm-up (SPEC §2, the second position patch): a causal depthwise short
// convolution (kernel K, SiLU after it) feeding a linear-attention layer — Qwen3-Next /
// Qwen3.5 on q, k, v; Mamba2 on xBC; KDA. Only the first K−1 tokens of a segment see the
// tokens before it through the convolution. So a segment C is split into
//     P = its first min(K−1, L) tokens      R = the rest,
// and its cached entry keeps (T_R, S(R|0)) — exact whatever precedes C, because R's conv
// outputs only read C's own inputs — plus what P needs to be recomputed: P's pre-conv inputs
// and gates, and C's last K−1 pre-conv inputs (the conv tail the next token needs).
// On reuse after a prefix with state S_p and conv tail c_p: P's conv outputs are recomputed
// with c_p, P's |P| tokens run through the recurrence from S_p, then S ← T_R·S + S(R|0), and
// the conv state becomes C's tail. This equals running C directly after the prefix (one layer,
// given its inputs). When a seam window of w ≥ K−1 tokens is recomputed anyway (SPEC §3),
// the seam covers P and this is not needed.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/linear_attn.h"
#include "kernels/transition.h"

namespace hypic::kernels {

// Maps n tokens' conv outputs y: [n, C] (SiLU applied) to the layer's q, k: [n, nk, dk] and
// v: [n, nv, dv] — channel split, normalisation, scaling: the model's business. g holds the
// same n tokens' gate rows as given to the layer (null when it has none), for families whose
// kernel inputs depend on them (Mamba2: v = Δ·x).
using ConvToQkv =
    std::function<void(const float* y, int n, const float* g, float* q, float* k, float* v)>;

// One "conv + linear attention" layer. Not owned; must outlive the calls.
struct ConvLaLayer {
  const LinearAttention* la = nullptr;
  int K = 4;                        // conv kernel width
  int64_t C = 0;                    // conv channels
  const float* conv_wt = nullptr;   // [K, C] (conv1d.h layout)
  ConvToQkv to_qkv;
  float scale = 1.0f;                          // LaInputs::scale
  const float* lightning_log_decay = nullptr;  // LaInputs::lightning_log_decay
};

// The cached part of a segment for one such layer.
struct ConvSegmentEntry {
  int L = 0;                      // segment tokens
  int P = 0;                      // warm-up tokens, min(K − 1, L)
  std::vector<float> x_head;      // [P, C] pre-conv inputs of P
  std::vector<float> g_head;      // [P, gate width] gates of P (empty: none)
  std::vector<float> beta_head;   // [P, nv] (empty: none)
  std::vector<float> tail;        // [min(K − 1, L), C] the segment's last pre-conv inputs
  Transition T_rest;              // T_R (identity when L ≤ K − 1)
  std::vector<float> s_rest;      // S(R|0): [nv, dk, dv]
  size_t bytes() const;
};

// Builds the entry of an L-token segment (L >= 1) from its pre-conv inputs x: [L, C] and its
// per-token gates g, beta (shapes as LaInputs; null where the family has none).
ConvSegmentEntry conv_segment_build(const ConvLaLayer& layer, int L, const float* x,
                                    const float* g, const float* beta);

// Continues a sequence at (state: [nv, dk, dv], conv_state: [K−1, C]) with the cached
// segment; both are updated to what running the segment directly would give. head_out
// (optional): [P, nv, dv], the outputs of the recomputed tokens P.
void conv_segment_compose(const ConvLaLayer& layer, const ConvSegmentEntry& e, float* state,
                          float* conv_state, float* head_out = nullptr);

// The direct computation (the reference of the above, and the plain path): the convolution
// of x: [L, C] from conv_state, then the chunked prefill from state; both updated.
// out (optional): [L, nv, dv].
void conv_la_prefill(const ConvLaLayer& layer, int L, const float* x, const float* g,
                     const float* beta, float* state, float* conv_state, float* out = nullptr);

}  // namespace hypic::kernels
