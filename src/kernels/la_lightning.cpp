// Lightning attention (Qin et al., 2024; MiniMax-M1, Ring-linear-2.0):
// S_t = λ_h·S_{t−1} + k_t v_tᵀ, o_t = scale·S_tᵀ q_t with λ_h = e^{−s_{l,h}} fixed per layer
// and head (la_lightning.h). The kernel reads LaInputs::lightning_log_decay ([nv], −s_{l,h})
// when g is null — one gate row for all tokens, nothing per token is materialised — and
// g: [L, nv] when given (the general scalar-decay form).
// T_C = λ^L·I, kept as the log scalar L·log λ per head (TransitionForm::kLogScalar).
// Partial RoPE on q and k (Ring-linear) commutes with the scalar decay: a cached state is
// re-rotated with rerotate_state and T is unchanged (transition.h).
// The kernels are the shared decay engine (decay_chunk.h) with scalar gates.
#include "kernels/la_lightning.h"

#include <cmath>

#include "core/status.h"
#include "kernels/decay_chunk.h"
#include "kernels/la_families.h"

namespace hypic::kernels {

std::vector<double> alibi_slopes(int num_heads) {
  HYPIC_CHECK(num_heads >= 1);
  int p = 1;
  while (2 * p <= num_heads) p *= 2;
  std::vector<double> s(static_cast<size_t>(num_heads));
  for (int h = 0; h < p; ++h) s[size_t(h)] = std::exp2(-8.0 * (h + 1) / p);
  for (int i = 0; i < num_heads - p; ++i) s[size_t(p + i)] = std::exp2(-8.0 * (2 * i + 1) / (2 * p));
  return s;
}

std::vector<float> lightning_log_decay(int num_heads, int layer, int num_layers,
                                       int layer_offset) {
  const std::vector<double> slope = alibi_slopes(num_heads);
  const double l = double(layer - layer_offset);
  const double factor = 1.0 - (num_layers > 1 ? l / (num_layers - 1) : 0.0) + 1e-5;
  std::vector<float> g(static_cast<size_t>(num_heads));
  for (int h = 0; h < num_heads; ++h) g[size_t(h)] = float(-slope[size_t(h)] * factor);
  return g;
}

std::vector<float> minimax_log_decay(int num_heads, int layer, int num_layers) {
  HYPIC_CHECK(num_heads >= 1 && num_layers >= 1);
  const double base = 1.0 / std::exp2(8.0 / num_heads);
  const double factor = 1.0 - double(layer) / (double(num_layers) - 1.0 + 1e-5) + 1e-5;
  std::vector<float> g(static_cast<size_t>(num_heads));
  for (int h = 0; h < num_heads; ++h) g[size_t(h)] = float(-std::pow(base, h + 1) * factor);
  return g;
}

namespace {

class LaLightning final : public DecayAttention {
 public:
  explicit LaLightning(const LaDims& d) : DecayAttention(d, DecayGate::kScalar) {}
  Family family() const override { return Family::kLightning; }

 protected:
  DecayGateView gate(const LaInputs& in) const override {
    if (in.g) return {DecayGate::kScalar, in.g, int64_t(d_.nv)};
    HYPIC_CHECK(in.lightning_log_decay != nullptr,
                "Lightning needs lightning_log_decay ([nv], see lightning_log_decay()) or g");
    return {DecayGate::kScalar, in.lightning_log_decay, 0};
  }
};

}  // namespace

std::unique_ptr<LinearAttention> make_la_lightning(const LaDims& d) {
  return std::make_unique<LaLightning>(d);
}

}  // namespace hypic::kernels
