// GLA (Yang et al., 2024, gated linear attention): S_t = Diag(e^{g_t})·S_{t−1} + k_t v_tᵀ,
// o_t = scale·S_tᵀ q_t, a log gate per token, value head and key channel: g: [L, nv, dk],
// g ≤ 0 (in the model g = logsigmoid(low-rank x)/16 — the caller's business).
// T_C = Diag(e^{Σg}), kept as the log vector Σg per head and channel
// (TransitionForm::kLogVector). A diagonal transition does not commute with RoPE: there is
// no exact re-rotation, and rerotate_transition refuses this form.
// The kernels are the shared decay engine (decay_chunk.h) with per-channel gates; its
// intra-chunk term is computed in sub-chunks without ever forming e^{G_i}·e^{−G_j}.
#include "core/status.h"
#include "kernels/decay_chunk.h"
#include "kernels/la_families.h"

namespace hypic::kernels {
namespace {

class LaGla final : public DecayAttention {
 public:
  explicit LaGla(const LaDims& d) : DecayAttention(d, DecayGate::kVector) {}
  Family family() const override { return Family::kGla; }

 protected:
  DecayGateView gate(const LaInputs& in) const override {
    HYPIC_CHECK(in.g != nullptr, "GLA needs g: [L, nv, dk] per-channel log gates");
    return {DecayGate::kVector, in.g, int64_t(d_.nv) * d_.dk};
  }
};

}  // namespace

std::unique_ptr<LinearAttention> make_la_gla(const LaDims& d) {
  return std::make_unique<LaGla>(d);
}

}  // namespace hypic::kernels
