// Vanilla linear attention (Katharopoulos et al., 2020): S_t = S_{t−1} + k_t v_tᵀ,
// o_t = scale·S_tᵀ q_t. A_t = I, so T_C = I (TransitionForm::kIdentity) and
// S(C|S₀) = S₀ + S(C|0): here, and only here, naive addition is exact.
//
// Normaliser (o_t / (q_tᵀ z_t), z_t = z_{t−1} + k_t): the caller appends one column of ones
// to v, so dv counts it. The state's last column is then z (it composes additively like the
// rest: its transition is I too) and the output's last column is scale·q_tᵀ z_t, the
// denominator; the division (and any epsilon) is the caller's.
// The kernels are the shared decay engine (decay_chunk.h) without gates.
#include "core/status.h"
#include "kernels/decay_chunk.h"
#include "kernels/la_families.h"

namespace hypic::kernels {
namespace {

class LaLinear final : public DecayAttention {
 public:
  explicit LaLinear(const LaDims& d) : DecayAttention(d, DecayGate::kNone) {}
  Family family() const override { return Family::kLinear; }

 protected:
  DecayGateView gate(const LaInputs& in) const override {
    HYPIC_CHECK(in.g == nullptr && in.lightning_log_decay == nullptr,
                "vanilla linear attention has no gates");
    return {};
  }
};

}  // namespace

std::unique_ptr<LinearAttention> make_la_linear(const LaDims& d) {
  return std::make_unique<LaLinear>(d);
}

}  // namespace hypic::kernels
