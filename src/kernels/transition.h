// Segment transition operators of linear-attention layers (SPEC §2).
//
// Every family here updates a per-value-head state S ∈ ℝ^{dk×dv} as
//     S_t = A_t · S_{t−1} + k̃_t v_tᵀ,
// where A_t ∈ ℝ^{dk×dk} acts on the key dimension and depends only on token t's own
// quantities. For a segment C = t_1 … t_L,
//     S(C | S₀) = T_C · S₀ + S(C | 0),   T_C = A_{t_L} ⋯ A_{t_1},   T_{C₁C₂} = T_{C₂} · T_{C₁}.
// A Transition holds T_C for all nv value heads in its structural form, so nothing is stored
// or multiplied that need not be:
//   kIdentity   vanilla linear attention          (no data)
//   kLogScalar  RetNet, simple GLA, Lightning,    data [nv]       T = e^{t}·I
//               Mamba2
//   kLogVector  GLA                               data [nv, dk]   T = Diag(e^{t})
//   kDense      DeltaNet, Gated DeltaNet, KDA     data [nv, dk, dk] (row-major, T[i][j])
// Logs are kept as logs: a long segment's decay underflows fp32 long before its log does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hypic::kernels {

enum class TransitionForm { kIdentity, kLogScalar, kLogVector, kDense };
const char* transition_form_name(TransitionForm f);

struct Transition {
  TransitionForm form = TransitionForm::kIdentity;
  int nv = 0, dk = 0;
  std::vector<float> data;  // see the table above

  // The identity of a form (zero logs, or I for dense), the neutral element of chain().
  static Transition identity(TransitionForm form, int nv, int dk);
  size_t bytes() const { return data.size() * sizeof(float); }
};

// state: [nv, dk, dv]. S ← T·S (per value head).
void transition_apply(const Transition& T, int dv, float* state);
// state ← T·state + s0, the composition step of a cached segment; s0: [nv, dk, dv].
void transition_compose(const Transition& T, int dv, const float* s0, float* state);
// T_{C₁C₂} = T_{C₂}·T_{C₁} ("first" then "second"); both of the same form and sizes.
Transition transition_chain(const Transition& first, const Transition& second);

// RoPE on the key dimension (state re-rotation, SPEC §2 "two patches"): a segment cached with
// keys rotated for base position p₀ and reused at p₁ = p₀ + Δ. R(Δ) rotates the first `rot`
// key dims in NeoX pairs (j, j + rot/2) with frequencies theta^(−2j/rot).
//   state ← R(Δ)·state                              (every family; exact for scalar decays)
//   T ← R(Δ)·T·R(Δ)ᵀ for kDense (scalar-gated delta rule: exact); scalar forms unchanged;
//   kLogVector (per-channel gates) + RoPE has no exact patch and is rejected (returns false).
void rerotate_state(int nv, int dk, int dv, int rot, float theta, int64_t delta, float* state);
bool rerotate_transition(int rot, float theta, int64_t delta, Transition* T);

}  // namespace hypic::kernels
