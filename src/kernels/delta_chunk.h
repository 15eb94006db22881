// The shared engine of the delta-rule families (DeltaNet, Gated DeltaNet, KDA). Per value
// head h (reading key head h / (nv / nk)), state S ∈ ℝ^{dk×dv}, decay first (SPEC §2):
//     S′ = D_t·S_{t−1};   S_t = S′ + β_t k_t (v_t − S′ᵀk_t)ᵀ;   o_t = S_tᵀ q_t
// so A_t = (I − β_t k_t k_tᵀ)·D_t with
//     D_t = I             DeltaNet        (gate kNone)
//     D_t = e^{g_t}·I     Gated DeltaNet  (gate kScalar, g: [L, nv])
//     D_t = Diag(e^{g_t}) KDA             (gate kChannel, g: [L, nv, dk])
// (for the scalar gate e^{g}(I − βkkᵀ) = (I − βkkᵀ)e^{g}: one formula for all three).
//
// Chunked form (WY / UT, chunk 64), G = within-chunk cumulative log gate (per channel for
// KDA), accumulated in double:
//   1. M_ij = β_i Σ_d k_{i,d} k_{j,d} e^{G_{i,d}−G_{j,d}} (i > j);  A_qk likewise with q_i, i ≥ j
//   2. Tm = (I + M)⁻¹                3. W = Tm·(β ⊙ e^{G} ⊙ K),  U = Tm·(β ⊙ V)
//   4. V_new = U − W·S               5. O = (Q ⊙ e^{G})·S + A_qk·V_new
//   6. S ← Diag(e^{G_C})·S + (K ⊙ e^{G_C − G})ᵀ·V_new
// No factor e^{±G} that can overflow is ever formed: scalar gates take e^{G_i−G_j} pairwise;
// per-channel gates split the pair through a point r with j < r ≤ i (both factors ≤ 1), see
// delta_chunk.cpp.
//
// The augmented pass (T_C and S(C|0) together, SPEC §2): the same recurrence on the state
// [S | T] of width dv + dk from [0 | I] with values [v | 0] ends at [S(C|0) | T_C], because
// A_t acts on the rows (the key index). Hence S(C|S₀) = T_C·S₀ + S(C|0).
#pragma once

#include <cstdint>

#include "kernels/linear_attn.h"

namespace hypic::kernels::delta_chunk {

constexpr int kChunk = 64;  // tokens per chunk
constexpr int kSub = 16;    // per-channel gates: diagonal sub-block of the pairwise terms

enum class Gate { kNone, kScalar, kChannel };

// One sequence (or, for step(), a batch: L = B rows, one per sequence), fp32, row-major:
//   q, k: [L, nk, dk] (q may be null where no outputs are wanted)   v: [L, nv, dv]
//   g: null (kNone), [L, nv] (kScalar) or [L, nv, dk] (kChannel), log gates ≤ 0
//   beta: [L, nv]
struct Problem {
  int nk = 1, nv = 1, dk = 0, dv = 0;
  int L = 0;
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  const float* g = nullptr;
  const float* beta = nullptr;
  Gate gate = Gate::kScalar;
};

// Chunked prefill from the incoming state [nv, dk, dv] (updated in place); out: [L, nv, dv].
// Parallel over key-head groups (scalar gates: the value heads of a key head share K·Kᵀ and
// Q·Kᵀ) or value heads.
void prefill(const Problem& p, float* state, float* out);

// One token for each of B = p.L sequences: row b of every input belongs to sequence b,
// states[b]: [nv, dk, dv] updated; out: [B, nv, dv]. Parallel over (sequence, head).
void step(const Problem& p, float* const* states, float* out);

// The transition build of an L-token segment by the augmented pass:
//   T: [nv, dk, dk], T[h][i][j] row-major, S(C|S₀) = T·S₀ + S(C|0);   s0: [nv, dk, dv] = S(C|0).
// If p.q and out are both non-null, the same pass also writes the outputs of a prefill of the
// segment from zero state (out: [L, nv, dv]) — what a cold segment needs besides (T, S).
// L = 0 gives T = I, s0 = 0.
void build_transition(const Problem& p, float* T, float* s0, float* out = nullptr);

// The arithmetic prefill needs for L tokens (for throughput reports), counting 2 FLOPs per
// multiply-add of the chunked algorithm, with each triangular product counted only over its
// triangle (what the kernel computes); elementwise work (exp, scaling — and for per-channel
// gates the pairwise e^{G_i−G_j} factors) excluded, so the count is the same for every gate.
// Per chunk of n tokens and per value head:
//   K·Kᵀ strictly lower  n(n−1)/2·2dk     Q·Kᵀ lower  n(n+1)/2·2dk
//   (I+M)^{-1}            Σ_i Σ_{j<i} 2(j+1)  ≈ n³/3
//   Tm·[βe^G K | βV]      n(n+1)/2·2(dk+dv)
//   W·S, (Q⊙e^G)·S, (K⊙e^{G_C−G})ᵀ·V_new   3 · 2·n·dk·dv
//   A_qk·V_new lower      n(n+1)/2·2dv
double prefill_flops(const LaDims& d, int L);

// ---------------------------------------------------------------------------------------
// The per-head machinery, for tests and for callers with their own layout. Not a stable API.

// One head's token sequence, as strided rows (row t of X at X + t * X_ld).
struct HeadSeq {
  int L = 0;
  const float* q = nullptr;  int64_t q_ld = 0;     // [L, dk]; nullptr: no outputs
  const float* k = nullptr;  int64_t k_ld = 0;     // [L, dk]
  const float* v = nullptr;  int64_t v_ld = 0;     // [L, v_cols]; value columns
  int v_cols = 0;                                  //   [v_cols, width) are zero
  Gate gate = Gate::kScalar;
  const float* g = nullptr;  int64_t g_ld = 0;     // [L] (kScalar) or [L, dk] (kChannel)
  const float* beta = nullptr; int64_t beta_ld = 0;  // [L]
  float* out = nullptr;      int64_t out_ld = 0;   // [L, v_cols]; written iff q != nullptr
};

// Per-thread scratch for run_group_chunks; grows on demand, reused across calls.
struct ChunkScratch {
  float* buf = nullptr;
  int64_t cap = 0;  // floats
  ~ChunkScratch();
  void ensure(int dk, int width, bool channel_gates);
  static int64_t floats_needed(int dk, int width, bool channel_gates);
};

// Processes nh heads' whole sequences chunk by chunk, updating each state [dk, width]
// (row-major, ld = width) in place; values are `width` wide with only the first v_cols
// columns stored, outputs are the first v_cols columns. The heads must share L, q and k
// (the value heads of one key head): K·Kᵀ and Q·Kᵀ are then computed once per chunk.
//   prefill: width = dv = v_cols;  augmented pass: width = dv + dk, state [0 | I], v_cols = dv.
void run_group_chunks(int dk, int width, int nh, const HeadSeq* seqs, float* const* states,
                      ChunkScratch& ws);
void run_head_chunks(int dk, int width, const HeadSeq& s, float* state, ChunkScratch& ws);

}  // namespace hypic::kernels::delta_chunk

namespace hypic::kernels {

// The LinearAttention of the delta-rule families (la_deltanet.cpp, la_gated_deltanet.cpp,
// la_kda.cpp differ only in the gate): T in dense form [nv, dk, dk], built by the augmented
// pass. Inputs as linear_attn.h; beta is required, g must be null for kNone, [L, nv] for
// kScalar, [L, nv, dk] for kChannel. Outputs are multiplied by in.scale (skipped when 1).
class DeltaRuleAttention : public LinearAttention {
 public:
  TransitionForm transition_form() const override { return TransitionForm::kDense; }
  void prefill(const LaInputs& in, float* state, float* out) const override;
  void step(const LaInputs& in, float* const* states, float* out) const override;
  void build_transition(const LaInputs& in, Transition* T, float* s0) const override;
  // One pass for both (out null: the transition alone).
  void build_transition_with_outputs(const LaInputs& in, Transition* T, float* s0,
                                     float* out) const override;
  bool fused_build() const override { return true; }
  double prefill_flops(int L) const override;  // delta_chunk::prefill_flops

 protected:
  DeltaRuleAttention(const LaDims& d, delta_chunk::Gate gate) : LinearAttention(d), gate_(gate) {}
  delta_chunk::Problem problem(const LaInputs& in) const;
  delta_chunk::Gate gate_;
};

}  // namespace hypic::kernels
