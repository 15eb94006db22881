// Sparse MoE block: fp32 router logits routed per token by the MoeRouter, routed experts
// grouped by expert so each runs one GEMM over its tokens, plus an optional shared expert
// (sigmoid-gated or not).
#include "model/mixers/moe.h"

#include <algorithm>

#include "core/parallel.h"
#include "core/profile.h"
#include "core/workspace.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "model/slots.h"

namespace hypic {
namespace {

class Moe final : public ChannelMixer {
 public:
  explicit Moe(MoeWeights w) : w_(std::move(w)), k_(w_.routing.top_k) {}
  ChannelMixerKind kind() const override { return ChannelMixerKind::kMoe; }
  void forward(const float* x, int64_t L, float* h) const override;
  double flops(int64_t L) const override {
    double f = 2.0 * L * double(w_.router.dim(1)) * double(w_.router.dim(0));
    f += k_ * swiglu_flops(w_.experts[0], L);
    if (w_.has_shared) f += swiglu_flops(w_.shared, L);
    return f;
  }

 private:
  MoeWeights w_;
  int k_;
};

void Moe::forward(const float* x, int64_t L, float* h) const {
  HYPIC_PROFILE_SCOPE("moe_layer");
  const MoeWeights& w = w_;
  const int64_t H = w.router.dim(1), E = w.router.dim(0);
  const int k = k_;
  // Routing: logits [L, E] (overwritten with the scores) -> top-k experts and weights per token.
  Workspace& ws = Workspace::local();
  Tensor probs_t = ws.f32(slot::kMoeProbs, {L, E});
  float* probs = probs_t.f32();
  {
    HYPIC_PROFILE_SCOPE("moe_router");
    kernels::linear(x, L, w.router, probs);
  }
  std::vector<int> top(static_cast<size_t>(L * k));
  std::vector<float> topw(static_cast<size_t>(L * k));
  parallel_for(L, [&](int64_t t) {
    route_token(w.routing, probs + t * E, E, top.data() + t * k, topw.data() + t * k);
  });
  // Group (token, weight) by expert.
  std::vector<std::vector<std::pair<int64_t, float>>> by_expert(static_cast<size_t>(E));
  for (int64_t t = 0; t < L; ++t)
    for (int j = 0; j < k; ++j)
      by_expert[size_t(top[size_t(t * k + j)])].push_back({t, topw[size_t(t * k + j)]});

  // Experts run concurrently, one per thread (their GEMMs single-threaded inside the
  // parallel region), largest first. Each writes its weighted rows to Y[t·k + j]; the sum
  // over j then runs in a fixed order, so results do not depend on the schedule.
  std::vector<int64_t> order;
  for (int64_t e = 0; e < E; ++e)
    if (!by_expert[size_t(e)].empty()) order.push_back(e);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return by_expert[size_t(a)].size() > by_expert[size_t(b)].size();
  });
  Tensor Y = ws.f32(slot::kMoeY, {L * k, H});
  parallel_for(int64_t(order.size()), [&](int64_t oi) {
    const int64_t e = order[size_t(oi)];
    const auto& rows = by_expert[size_t(e)];
    const int64_t n = int64_t(rows.size());
    Workspace& tws = Workspace::local();
    Tensor xe = tws.f32(slot::kMoeX, {n, H});
    Tensor ye = tws.f32(slot::kMoeExpertOut, {n, H});
    std::fill(ye.f32(), ye.f32() + n * H, 0.0f);  // swiglu_forward accumulates
    for (int64_t r = 0; r < n; ++r)
      std::copy(x + rows[size_t(r)].first * H, x + (rows[size_t(r)].first + 1) * H,
                xe.f32() + r * H);
    swiglu_forward(w.experts[size_t(e)], xe.f32(), n, ye.f32());
    for (int64_t r = 0; r < n; ++r) {
      const int64_t t = rows[size_t(r)].first;
      int j = 0;
      while (top[size_t(t * k + j)] != int(e)) ++j;
      float* dst = Y.f32() + (t * k + j) * H;
      const float wgt = rows[size_t(r)].second;
      const float* src = ye.f32() + r * H;
      for (int64_t c = 0; c < H; ++c) dst[c] = wgt * src[c];
    }
  });
  Tensor out = ws.f32(slot::kMoeOut, {L, H});  // routed sum, added to h at the end
  parallel_for(L, [&](int64_t t) {
    float* o = out.f32() + t * H;
    std::copy(Y.f32() + t * k * H, Y.f32() + (t * k + 1) * H, o);
    for (int j = 1; j < k; ++j) kernels::axpy(1.0f, Y.f32() + (t * k + j) * H, o, H);
  });
  if (w.has_shared) {
    HYPIC_PROFILE_SCOPE("moe_shared");
    Tensor sh = ws.f32(slot::kMoeShared, {L, H});
    std::fill(sh.f32(), sh.f32() + L * H, 0.0f);
    swiglu_forward(w.shared, x, L, sh.f32());
    std::vector<float> gate(static_cast<size_t>(L));
    if (!w.shared_gate.empty()) kernels::linear(x, L, w.shared_gate, gate.data());
    for (int64_t t = 0; t < L; ++t) {
      const float g = w.shared_gate.empty() ? 1.0f : kernels::sigmoid(gate[size_t(t)]);
      kernels::axpy(g, sh.f32() + t * H, out.f32() + t * H, H);
    }
  }
  const float* o = out.f32();
  for (int64_t i = 0; i < L * H; ++i) h[i] += o[i];
}

}  // namespace

std::unique_ptr<ChannelMixer> make_moe(MoeWeights w) {
  const Status st = w.routing.validate(w.router.dim(0));
  HYPIC_CHECK(st.is_ok(), st.message());
  return std::make_unique<Moe>(std::move(w));
}

}  // namespace hypic
