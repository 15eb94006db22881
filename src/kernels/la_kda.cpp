// KDA, Kimi Delta Attention (Kimi-Linear): a gated delta rule with per-channel decay,
//     A_t = (I − β_t k_t k_tᵀ)·Diag(e^{g_t}),  decay first:
//     S′ = Diag(e^{g_t})·S;  S_t = S′ + β_t k_t (v_t − S′ᵀk_t)ᵀ;  o_t = scale·S_tᵀ q_t,
// g: [L, nv, dk] log decays per channel (g = −exp(A_log_h)·softplus(f_b(f_a(x)) + dt_bias)),
// beta: [L, nv]; q, k L2-normalised by the caller (scale dk^{−1/2}, as FLA's chunk_kda).
// T_C is dense per value head. Per-channel gates do not commute with a rotation, so RoPE
// re-rotation is not exact here (transition.h; Kimi-Linear uses no RoPE in KDA layers).
// The chunked kernel is the delta-rule engine (delta_chunk.h) with per-channel gates.
#include "kernels/delta_chunk.h"
#include "kernels/la_families.h"

namespace hypic::kernels {
namespace {

class LaKda final : public DeltaRuleAttention {
 public:
  explicit LaKda(const LaDims& d) : DeltaRuleAttention(d, delta_chunk::Gate::kChannel) {}
  Family family() const override { return Family::kKda; }
};

}  // namespace

std::unique_ptr<LinearAttention> make_la_kda(const LaDims& d) {
  return std::make_unique<LaKda>(d);
}

}  // namespace hypic::kernels
