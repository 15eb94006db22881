// Gated DeltaNet (Qwen3-Next, Qwen3.5): the gated delta rule, chunked prefill and batched
// decode step. fp32 throughout. Matches transformers' torch_chunk_gated_delta_rule /
// torch_recurrent_gated_delta_rule (qwen3_next) to fp32 rounding.
//
// Per value head h (reading key head h / (nv / nk)), state S ∈ ℝ^{dk×dv}, decay first:
//     S′ = e^{g_t}·S_{t−1};   S_t = S′ + β_t k_t (v_t − S′ᵀk_t)ᵀ;   o_t = S_tᵀ q_t.
// The caller passes q and k already L2-normalised and q already multiplied by dk^{−1/2}.
// (HF applies both *inside* its kernels: l2norm when use_qk_l2norm_in_kernel=True, which the
// Qwen3-Next layer passes, then `query * k_head_dim**-0.5` after the l2norm and before the
// chunking / recurrence — so the scale multiplies q, never the output. Here that happens
// in the caller, before these functions.)
#pragma once

#include <cstdint>

namespace hypic::kernels {

struct GdnDims {
  int nk, nv, dk, dv;  // nv % nk == 0; value head h reads key head h / (nv / nk)
};

// One sequence, L >= 1 tokens, fp32, row-major:
//   q, k: [L, nk, dk]   v: [L, nv, dv]   g (log decay, <= 0), beta: [L, nv]
//   (g == nullptr: no decay, g = 0 — plain DeltaNet)
//   state: [nv, dk, dv] in/out (the incoming state; zero for a fresh sequence)
//   out: [L, nv, dv]
// Chunked (WY/UT form, chunk 64; SPEC §2; the engine is delta_chunk.h), parallel over heads.
// Any L >= 1 (a tail chunk shorter than 64 is exactly the zero-padded chunk).
void gdn_prefill(const GdnDims& d, int L, const float* q, const float* k, const float* v,
                 const float* g, const float* beta, float* state, float* out);

// Single decode step for a batch of B independent sequences (continuous batching):
//   q, k: [B, nk, dk]   v: [B, nv, dv]   g (or null), beta: [B, nv]   states[b]: [nv, dk, dv]
//   out: [B, nv, dv]
void gdn_step(const GdnDims& d, int B, const float* q, const float* k, const float* v,
              const float* g, const float* beta, float* const* states, float* out);

// The arithmetic gdn_prefill needs for L tokens (for throughput reports), counting 2 FLOPs
// per multiply-add of the chunked algorithm, with each triangular product counted only
// over its triangle (what the kernel computes); elementwise work (exp, scaling) excluded.
// Per chunk of n tokens and per value head:
//   K·Kᵀ strictly lower  n(n−1)/2·2dk     Q·Kᵀ lower  n(n+1)/2·2dk
//   (I+M)^{-1}            Σ_i Σ_{j<i} 2(j+1)  ≈ n³/3
//   Tm·[βe^G K | βV]      n(n+1)/2·2(dk+dv)
//   W·S, (Q⊙e^G)·S, (K⊙e^{G_C−G})ᵀ·V_new   3 · 2·n·dk·dv
//   A_qk·V_new lower      n(n+1)/2·2dv
double gdn_prefill_flops(const GdnDims& d, int L);

// The transition build of SPEC §2 for an L-token segment (L >= 0), one augmented chunked
// pass (delta_chunk.h) over the state [S | T] from [0 | I]:
//   T: [nv, dk, dk] (T[h][i][j] row-major; per value head), s0: [nv, dk, dv] = S(C|0), with
//   S(C|S₀) = T·S₀ + S(C|0) for every incoming state S₀.
// With q and out non-null the same pass also writes the outputs of a prefill of the segment
// from zero state (out: [L, nv, dv]): a cold segment needs both, and sharing the pass
// costs a fraction of a prefill (the T columns of steps 4 and 6) instead of a whole second
// one. q may be null (then out is ignored).
void gdn_build_transition(const GdnDims& d, int L, const float* q, const float* k,
                          const float* v, const float* g, const float* beta, float* T,
                          float* s0, float* out = nullptr);

}  // namespace hypic::kernels
