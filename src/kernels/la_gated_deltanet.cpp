// Gated DeltaNet (Yang et al., 2024; Qwen3-Next, Qwen3.5): A_t = e^{g_t}(I − β_t k_t k_tᵀ),
// decay first: S′ = e^{g_t}·S;  S_t = S′ + β_t k_t (v_t − S′ᵀk_t)ᵀ;  o_t = scale·S_tᵀ q_t.
// g: [L, nv] log decays (g = −exp(A_log)·softplus(a + dt_bias)), beta: [L, nv].
// T_C is dense per value head. With RoPE on the keys the transition is exactly re-rotatable
// (S′ = R·S, T′ = R·T·Rᵀ; transition.h), because the gate is a scalar.
// The kernels are the ones the model runs (gdn_prefill / gdn_step, gated_delta.h), both on
// the delta-rule engine (delta_chunk.h) with scalar gates.
#include "kernels/delta_chunk.h"
#include "kernels/la_families.h"

namespace hypic::kernels {
namespace {

class LaGatedDeltaNet final : public DeltaRuleAttention {
 public:
  explicit LaGatedDeltaNet(const LaDims& d) : DeltaRuleAttention(d, delta_chunk::Gate::kScalar) {}
  Family family() const override { return Family::kGatedDeltaNet; }
};

}  // namespace

std::unique_ptr<LinearAttention> make_la_gated_deltanet(const LaDims& d) {
  return std::make_unique<LaGatedDeltaNet>(d);
}

}  // namespace hypic::kernels
