// Mamba2 SSD (Dao & Gu, 2024) as a scalar-decay family: S_t = e^{g_t}·S_{t−1} + k_t v_tᵀ,
// o_t = scale·S_tᵀ q_t with k = B, q = C, v = Δ·x, g = Δ·A, scale = 1 (la_mamba2.h builds
// v and g from the raw quantities). g: [L, nv].
// T_C = e^{A_h ΣΔ}·I, kept as the log scalar per head (TransitionForm::kLogScalar).
// The D-skip and the z-gate are outside the state and stay with the caller; the causal
// conv on xBC before it needs the conv warm-up of SPEC §2 on reuse (kernels/conv1d.h).
// The kernels are the shared decay engine (decay_chunk.h) with scalar gates.
#include "kernels/la_mamba2.h"

#include <algorithm>
#include <cmath>

#include "core/status.h"
#include "kernels/decay_chunk.h"
#include "kernels/elementwise.h"
#include "kernels/la_families.h"

namespace hypic::kernels {

void mamba2_kernel_inputs(int L, int nheads, int headdim, const float* x, const float* dt,
                          const float* dt_bias, const float* A_log, float* v, float* g,
                          float* delta, float dt_min, float dt_max) {
  for (int64_t t = 0; t < L; ++t)
    for (int h = 0; h < nheads; ++h) {
      const int64_t i = t * nheads + h;
      const float dlt = std::clamp(softplus(dt[i] + dt_bias[h]), dt_min, dt_max);
      const float A = -std::exp(A_log[h]);
      g[i] = dlt * A;
      if (delta) delta[i] = dlt;
      const float* xr = x + i * headdim;
      float* vr = v + i * headdim;
      for (int j = 0; j < headdim; ++j) vr[j] = dlt * xr[j];
    }
}

namespace {

class LaMamba2 final : public DecayAttention {
 public:
  explicit LaMamba2(const LaDims& d) : DecayAttention(d, DecayGate::kScalar) {}
  Family family() const override { return Family::kMamba2; }

 protected:
  DecayGateView gate(const LaInputs& in) const override {
    HYPIC_CHECK(in.g != nullptr, "Mamba2 needs g = Δ·A: [L, nv] (see mamba2_kernel_inputs)");
    return {DecayGate::kScalar, in.g, int64_t(d_.nv)};
  }
};

}  // namespace

std::unique_ptr<LinearAttention> make_la_mamba2(const LaDims& d) {
  return std::make_unique<LaMamba2>(d);
}

}  // namespace hypic::kernels
