#include "model/mixers/swiglu.h"

#include "core/parallel.h"
#include "core/profile.h"
#include "core/workspace.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "model/slots.h"

namespace hypic {

void swiglu_forward(const MlpWeights& w, const float* x, int64_t L, float* h) {
  HYPIC_PROFILE_SCOPE("mlp");
  const int64_t I = w.down.dim(1);
  Workspace& ws = Workspace::local();
  Tensor gu = ws.f32(slot::kMlpGateUp, {L, 2 * I});
  kernels::linear(x, L, w.gate_up, gu.f32());
  Tensor act = ws.f32(slot::kMlpAct, {L, I});
  parallel_for(L, [&](int64_t t) {
    kernels::swiglu(gu.f32() + t * 2 * I, gu.f32() + t * 2 * I + I, act.f32() + t * I, I, w.limit);
  });
  kernels::linear(act.f32(), L, w.down, h, /*accumulate=*/true);
}

double swiglu_flops(const MlpWeights& w, int64_t L) {
  const double H = double(w.gate_up.dim(1));
  return 2.0 * L * H * double(w.gate_up.dim(0)) + 2.0 * L * H * double(w.down.dim(1));
}

namespace {

class SwiGlu final : public ChannelMixer {
 public:
  explicit SwiGlu(MlpWeights w) : w_(std::move(w)) {}
  ChannelMixerKind kind() const override { return ChannelMixerKind::kSwiGlu; }
  void forward(const float* x, int64_t L, float* h) const override { swiglu_forward(w_, x, L, h); }
  double flops(int64_t L) const override { return swiglu_flops(w_, L); }

 private:
  MlpWeights w_;
};

}  // namespace

std::unique_ptr<ChannelMixer> make_swiglu(MlpWeights w) {
  return std::make_unique<SwiGlu>(std::move(w));
}

}  // namespace hypic
