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
//   state: [nv, dk, dv] in/out (the incoming state; zero for a fresh sequence)
//   out: [L, nv, dv]
// Chunked (WY/UT form, chunk 64; SPEC §2), parallel over heads. Any L >= 1 (a tail chunk
// shorter than 64 is exactly the zero-padded chunk).
void gdn_prefill(const GdnDims& d, int L, const float* q, const float* k, const float* v,
                 const float* g, const float* beta, float* state, float* out);

// Single decode step for a batch of B independent sequences (continuous batching):
//   q, k: [B, nk, dk]   v: [B, nv, dv]   g, beta: [B, nv]   states[b]: [nv, dk, dv] in/out
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

// ---------------------------------------------------------------------------------------
// Internal chunk machinery, exposed for the other delta-rule families and for tests.
// Not a stable API.
namespace gdn_detail {

constexpr int kChunk = 64;

// One head's token sequence, as strided rows (row t of X at X + t * X_ld).
struct HeadSeq {
  int L = 0;
  const float* q = nullptr;  int64_t q_ld = 0;     // [L, dk]; nullptr: no outputs
  const float* k = nullptr;  int64_t k_ld = 0;     // [L, dk]
  const float* v = nullptr;  int64_t v_ld = 0;     // [L, v_cols]; value columns
  int v_cols = 0;                                  //   [v_cols, width) are zero
  const float* g = nullptr;  int64_t g_ld = 0;     // [L] scalar log decay per token
  const float* beta = nullptr; int64_t beta_ld = 0;  // [L]
  float* out = nullptr;      int64_t out_ld = 0;   // [L, width]; written iff q != nullptr
};

// Per-thread scratch for run_head_chunks / run_group_chunks; grows on demand, reused
// across calls (gdn_prefill keeps one per thread, thread_local).
struct ChunkScratch {
  float* buf = nullptr;
  int64_t cap = 0;  // floats
  ~ChunkScratch();
  void ensure(int dk, int width);
  static int64_t floats_needed(int dk, int width);
};

// Processes one head's whole sequence chunk by chunk (SPEC §2 steps 1–6), updating
// state [dk, width] (row-major, ld = width) in place; values are `width` wide with only the
// first v_cols columns stored. This is the reusable core:
//   * GDN prefill: width = dv = v_cols.
//   * The augmented pass (T_C and S(C|0) together): width = dv + dk, state initialised to
//     [0 | I], v_cols = dv, q = nullptr. Since S_t = A_t·S_{t−1} + β_t k_t v_tᵀ with
//     A_t = e^{g_t}(I − β_t k_t k_tᵀ) acting on the rows, the result is [S(C|0) | T_C]
//     (row = key index), and S(C|S₀) = T_C·S₀ + S(C|0).
//   * KDA (per-channel gates) needs G per channel in the two pairwise-decay products and in
//     the row scalings; those are isolated in the gate stage of the implementation.
void run_head_chunks(int dk, int width, const HeadSeq& s, float* state, ChunkScratch& ws);

// The same for nh heads that share q and k (the value heads of one key head, GQA-style):
// K·Kᵀ and Q·Kᵀ are computed once per chunk for the group. seqs[i] must have identical
// L, q, q_ld, k, k_ld; states[i] is head i's [dk, width] state.
void run_group_chunks(int dk, int width, int nh, const HeadSeq* seqs, float* const* states,
                      ChunkScratch& ws);

// Small row-major fp32 GEMM used by the chunk machinery:
//   C[M×N] = alpha · op(A)·B + beta · C      (beta == 0: C is not read)
// op(A) = A [M×K] (lda) or, when trans_a, A stored as [K×M] (lda).
// tri = kALower: A is lower triangular incl. diagonal; K-loops stop at the row block's
//       last row, so A's entries above the diagonal inside a 6-row block are read and must
//       be 0 (beyond that they are never read).
// tri = kCLower: only C's lower triangle incl. diagonal (j <= i) is computed / written,
//       (in 16-column granularity more may be written; never read what you did not ask).
enum class Tri { kNone, kALower, kCLower };
void small_gemm(int M, int N, int K, float alpha, const float* A, int64_t lda, bool trans_a,
                const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                Tri tri = Tri::kNone);

// Which code path small_gemm / the kernels use. kAuto picks AVX-512 when the CPU has it.
// Tests force kGeneric to cover the baseline (AVX2 / scalar) path.
enum class Isa { kAuto, kGeneric, kAvx512 };
void set_isa(Isa isa);
Isa active_isa();  // kGeneric or kAvx512

}  // namespace gdn_detail
}  // namespace hypic::kernels
