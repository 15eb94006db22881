// The linear-attention kernel library: one implementation per family, one interface
// (SPEC §2). Each family provides chunked prefill from an incoming state, a batched decode
// step, and the transition build (T_C, S(C|0)) for a segment in one augmented pass.
// Composition and re-rotation are family-independent (kernels/transition.h).
//
// Shapes (one sequence, fp32, row-major); value head h reads key head h / (nv / nk):
//   q, k:  [L, nk, dk]     (already normalised / scaled the way the family's model does)
//   v:     [L, nv, dv]
//   g:     log decay, ≤ 0: [L, nv] for scalar-gated families, [L, nv, dk] for per-channel
//          (GLA, KDA); null where the family has no per-token gate
//   beta:  [L, nv] for delta-rule families, else null
//   state: [nv, dk, dv] (the normaliser of vanilla linear attention, when enabled, is one
//          extra value column: the caller appends a column of ones to v, so dv counts it)
//   out:   [L, nv, dv], o_t = scale · S_tᵀ q_t (read after the update)
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernels/transition.h"

namespace hypic::kernels {

enum class Family {
  kLinear,         // vanilla: A_t = I
  kRetNet,         // RetNet / simple GLA: A_t = e^{g_t}·I, g per head (RetNet: constant)
  kLightning,      // MiniMax-M1 / Ring-linear: A_t = λ_h·I, λ_h = e^{−s_{l,h}} fixed per layer/head
  kMamba2,         // SSD: A_t = e^{Δ_t·A_h}·I; k = B, q = C, v = Δ·x
  kGla,            // GLA: A_t = Diag(e^{g_t}), per channel
  kDeltaNet,       // A_t = I − β_t k_t k_tᵀ
  kGatedDeltaNet,  // A_t = e^{g_t}(I − β_t k_t k_tᵀ)   (Qwen3-Next, Qwen3.5)
  kKda,            // A_t = (I − β_t k_t k_tᵀ)·Diag(e^{g_t})   (Kimi-Linear)
};
const char* family_name(Family f);
bool parse_family(const std::string& s, Family* f);
std::vector<Family> all_families();

struct LaDims {
  int nk = 1, nv = 1, dk = 0, dv = 0;
};

// One sequence's per-token inputs (see the shapes above). For kLightning, g may be null and
// `lightning_log_decay` ([nv], −s_{l,h}) gives the constant per-head decay.
struct LaInputs {
  int L = 0;
  const float* q = nullptr;
  const float* k = nullptr;
  const float* v = nullptr;
  const float* g = nullptr;
  const float* beta = nullptr;
  const float* lightning_log_decay = nullptr;
  float scale = 1.0f;  // output scale applied to S_tᵀ q_t
};

class LinearAttention {
 public:
  virtual ~LinearAttention() = default;
  virtual Family family() const = 0;
  virtual TransitionForm transition_form() const = 0;
  const LaDims& dims() const { return d_; }

  // Chunked (chunk 64) over in.L tokens from the incoming `state`, which is updated in place;
  // writes out: [L, nv, dv]. Parallel over heads.
  virtual void prefill(const LaInputs& in, float* state, float* out) const = 0;
  // One token for each of B sequences: in.L == B, row b of every input belongs to sequence b,
  // states[b]: [nv, dk, dv] updated; out: [B, nv, dv].
  virtual void step(const LaInputs& in, float* const* states, float* out) const = 0;
  // (T_C, S(C|0)) for the segment in.L tokens (q unused): s0: [nv, dk, dv] written.
  virtual void build_transition(const LaInputs& in, Transition* T, float* s0) const = 0;
  // The same and the outputs of a zero-state prefill of the segment (out: [L, nv, dv]): what
  // a cold segment needs. Families whose engine shares the pass (the delta rule:
  // fused_build() true) do both at a fraction of a second prefill; the others run prefill,
  // then build_transition.
  virtual void build_transition_with_outputs(const LaInputs& in, Transition* T, float* s0,
                                             float* out) const;
  virtual bool fused_build() const { return false; }
  // The arithmetic of prefill over L tokens, for throughput reports: 2 FLOPs per
  // multiply-add of the family's chunked algorithm, each triangular product counted over its
  // triangle only (what the kernel computes), elementwise work (exp, scaling) excluded.
  virtual double prefill_flops(int L) const = 0;

 protected:
  explicit LinearAttention(const LaDims& d) : d_(d) {}
  LaDims d_;
};

std::unique_ptr<LinearAttention> make_linear_attention(Family f, const LaDims& d);

}  // namespace hypic::kernels
