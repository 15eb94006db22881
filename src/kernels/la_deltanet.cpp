// DeltaNet (Schlag et al., 2021; Yang et al., 2024): A_t = I − β_t k_t k_tᵀ,
//     S_t = S_{t−1} + β_t k_t (v_t − S_{t−1}ᵀk_t)ᵀ,   o_t = scale·S_tᵀ q_t,
// q, k L2-normalised by the caller, beta = sigmoid(W_b x): [L, nv]; no gate (g null).
// It is Gated DeltaNet with g = 0: the same delta-rule engine (delta_chunk.h), gate kNone.
// T_C is dense per value head.
#include "kernels/delta_chunk.h"
#include "kernels/la_families.h"

namespace hypic::kernels {
namespace {

class LaDeltaNet final : public DeltaRuleAttention {
 public:
  explicit LaDeltaNet(const LaDims& d) : DeltaRuleAttention(d, delta_chunk::Gate::kNone) {}
  Family family() const override { return Family::kDeltaNet; }
};

}  // namespace

std::unique_ptr<LinearAttention> make_la_deltanet(const LaDims& d) {
  return std::make_unique<LaDeltaNet>(d);
}

}  // namespace hypic::kernels
