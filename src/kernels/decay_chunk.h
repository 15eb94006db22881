// The shared chunked engine of the decay families (vanilla linear attention, RetNet / simple
// GLA, Lightning, Mamba2 SSD, GLA): every one of them is, per value head,
//     S_t = D_t·S_{t−1} + k_t v_tᵀ,    o_t = scale·S_tᵀ q_t,
// with D_t = I, e^{g_t}·I or Diag(e^{g_t}) — a transition that is scalar or diagonal, so
//     T_C = Σ g (a log scalar or a log vector)  and  S(C|0) = the prefill end state from 0,
// and the transition build needs no augmented state (SPEC §2): it is the prefill without
// outputs plus a sum of gates.
//
// Chunk of n ≤ 64 tokens, G = within-chunk cumulative log decay (accumulated in double),
// G_C its last row:
//     O = scale·[(Q ⊙ e^{G})·S + ((Q·Kᵀ) ⊙ D)·V],   D_ij = e^{G_i − G_j} (i ≥ j), 0 above
//     S ← e^{G_C}·S + (K ⊙ e^{G_C − G})ᵀ·V
// (per channel for GLA). Every exponent is ≤ 0; e^{G_i}·e^{−G_j} is never formed.
// Implementation notes and the parallel layout: decay_chunk.cpp.
#pragma once

#include <cstdint>

#include "kernels/linear_attn.h"

namespace hypic::kernels {

// How D_t is given.
enum class DecayGate {
  kNone,    // D_t = I                                    (vanilla linear attention)
  kScalar,  // D_t = e^{g_t}·I;      g at g[t·tok_ld + h]  (RetNet, simple GLA, Lightning, Mamba2)
  kVector,  // D_t = Diag(e^{g_t});  g at g[t·tok_ld + h·dk + i]   (GLA)
};

// The gates of one call. tok_ld = 0 repeats one gate row for every token (Lightning's
// fixed per-head decay: g = the [nv] log decays). Gates must be finite and ≤ 0.
struct DecayGateView {
  DecayGate kind = DecayGate::kNone;
  const float* g = nullptr;
  int64_t tok_ld = 0;
};

TransitionForm decay_transition_form(DecayGate kind);

namespace decay_chunk {

constexpr int kChunk = 64;  // tokens per chunk
constexpr int kSub = 16;    // GLA sub-chunk (intra-chunk term, see decay_chunk.cpp)

// One sequence of L ≥ 0 tokens from the incoming `state` [nv, dk, dv] (updated in place).
// q == nullptr: no outputs (out unused) — the transition build's path: the state update
// only, ≈ 1/3 of the time of a prefill.
// Else out: [L, nv, dv]. Parallel over ranges of value heads (decay_chunk.cpp).
void prefill(const LaDims& d, int L, const float* q, const float* k, const float* v,
             const DecayGateView& g, float scale, float* state, float* out);

// One token for each of B sequences: row b of q, k, v, g belongs to sequence b;
// states[b]: [nv, dk, dv] updated; out: [B, nv, dv]. Parallel over (sequence, head).
void step(const LaDims& d, int B, const float* q, const float* k, const float* v,
          const DecayGateView& g, float scale, float* const* states, float* out);

// (T_C, S(C|0)) of an L-token segment: T in the gate's form (identity, log scalar [nv] or
// log vector [nv, dk], the sums of g accumulated in double); s0: [nv, dk, dv] written.
void build(const LaDims& d, int L, const float* k, const float* v, const DecayGateView& g,
           Transition* T, float* s0);

// Arithmetic of prefill for throughput reports (2 FLOPs per multiply-add, triangles counted
// as triangles, elementwise work excluded). Per chunk of n tokens and value head:
//   Q·Kᵀ lower  n(n+1)/2·2dk,  (Q⊙e^G)·S  2n·dk·dv,  A·V lower  n(n+1)/2·2dv,
//   (K⊙e^{G_C−G})ᵀ·V  2n·dk·dv;  without outputs only the last term.
double prefill_flops(const LaDims& d, int L, bool outputs);

}  // namespace decay_chunk

// LinearAttention for a decay family: the three entry points run the engine above; a family
// (one la_<family>.cpp each) supplies its identity, its gate kind and how to read its gates
// from LaInputs (validating them).
class DecayAttention : public LinearAttention {
 public:
  TransitionForm transition_form() const final { return decay_transition_form(kind_); }
  void prefill(const LaInputs& in, float* state, float* out) const final;
  void step(const LaInputs& in, float* const* states, float* out) const final;
  void build_transition(const LaInputs& in, Transition* T, float* s0) const final;
  double prefill_flops(int L) const final;  // decay_chunk::prefill_flops with outputs

 protected:
  DecayAttention(const LaDims& d, DecayGate kind) : LinearAttention(d), kind_(kind) {}
  // The gate view of `in` (rows = tokens, or sequences for step).
  virtual DecayGateView gate(const LaInputs& in) const = 0;

 private:
  DecayGate kind_;
};

}  // namespace hypic::kernels
