// RetNet (Sun et al., 2023, retention) and simple GLA: S_t = e^{g_t}·S_{t−1} + k_t v_tᵀ,
// o_t = scale·S_tᵀ q_t, one log decay per token and value head, g: [L, nv], g ≤ 0.
// T_C = e^{Σg}·I, kept as the log scalar Σg per head (TransitionForm::kLogScalar).
//   RetNet: g_{t,h} = log(1 − 2^{−5−h}) for every t (torchscale's fixed per-head decay; the
//           caller fills the rows).  Simple GLA: g_t = logsigmoid(W_g x_t)/16 (the caller's).
// RoPE-style rotations of q and k (RetNet's xPos) commute with the scalar decay: a cached
// state is re-rotated with rerotate_state and T is unchanged (transition.h).
// The kernels are the shared decay engine (decay_chunk.h) with scalar gates.
#include "core/status.h"
#include "kernels/decay_chunk.h"
#include "kernels/la_families.h"

namespace hypic::kernels {
namespace {

class LaRetNet final : public DecayAttention {
 public:
  explicit LaRetNet(const LaDims& d) : DecayAttention(d, DecayGate::kScalar) {}
  Family family() const override { return Family::kRetNet; }

 protected:
  DecayGateView gate(const LaInputs& in) const override {
    HYPIC_CHECK(in.g != nullptr, "RetNet / simple GLA needs g: [L, nv] log decays");
    return {DecayGate::kScalar, in.g, int64_t(d_.nv)};
  }
};

}  // namespace

std::unique_ptr<LinearAttention> make_la_retnet(const LaDims& d) {
  return std::make_unique<LaRetNet>(d);
}

}  // namespace hypic::kernels
