// Gated DeltaNet (Yang et al., 2024; Qwen3-Next, Qwen3.5): A_t = e^{g_t}(I − β_t k_t k_tᵀ),
// decay first: S′ = e^{g_t}·S;  S_t = S′ + β_t k_t (v_t − S′ᵀk_t)ᵀ;  o_t = scale·S_tᵀ q_t.
// g: [L, nv] log decays (g = −exp(A_log)·softplus(a + dt_bias)), beta: [L, nv].
// T_C is dense per value head. With RoPE on the keys the transition is exactly re-rotatable
// (S′ = R·S, T′ = R·T·Rᵀ; transition.h), because the gate is a scalar.
// The kernels are the delta-rule engine (delta_chunk.h) with scalar gates; the model's Gated
// DeltaNet layers (model/mixers/gated_deltanet.cpp) run this object. fp32 throughout; matches
// transformers' torch_chunk_gated_delta_rule / torch_recurrent_gated_delta_rule (qwen3_next)
// to fp32 rounding. The caller passes q and k already L2-normalised and q already multiplied
// by dk^{−1/2}, with scale 1: HF applies both inside its kernels (l2norm when
// use_qk_l2norm_in_kernel=True, which the Qwen3-Next layer passes, then
// `query * k_head_dim**-0.5` before the chunking / recurrence), so the scale multiplies q,
// never the output.
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
