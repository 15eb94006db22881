// Sparse MoE block: softmax router (fp32), top-k, optional renormalisation, routed experts
// grouped by expert so each runs one GEMM over its tokens, plus a sigmoid-gated shared expert.
#include <algorithm>
#include <numeric>

#include "core/parallel.h"
#include "core/profile.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "model/model.h"

namespace hypic {

void Model::moe_layer(const MoeWeights& w, const float* x, int64_t L, float* h) const {
  HYPIC_PROFILE_SCOPE("moe_layer");
  const int64_t H = cfg_.hidden_size, E = w.router.dim(0);
  const int k = cfg_.num_experts_per_tok;
  // Routing: probs [L, E] -> top-k experts and weights per token.
  std::vector<float> probs(static_cast<size_t>(L * E));
  kernels::linear(x, L, w.router, probs.data());
  std::vector<int> top(static_cast<size_t>(L * k));
  std::vector<float> topw(static_cast<size_t>(L * k));
  parallel_for(L, [&](int64_t t) {
    float* p = probs.data() + t * E;
    kernels::softmax(p, E);
    std::vector<int> idx(static_cast<size_t>(E));
    std::iota(idx.begin(), idx.end(), 0);
    // Highest probability first; ties to the lower index (torch.topk's order on CPU).
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                      [&](int a, int b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    float sum = 0;
    for (int j = 0; j < k; ++j) sum += p[idx[size_t(j)]];
    for (int j = 0; j < k; ++j) {
      top[size_t(t * k + j)] = idx[size_t(j)];
      topw[size_t(t * k + j)] = cfg_.norm_topk_prob ? p[idx[size_t(j)]] / sum : p[idx[size_t(j)]];
    }
  });
  // Group (token, weight) by expert.
  std::vector<std::vector<std::pair<int64_t, float>>> by_expert(static_cast<size_t>(E));
  for (int64_t t = 0; t < L; ++t)
    for (int j = 0; j < k; ++j)
      by_expert[size_t(top[size_t(t * k + j)])].push_back({t, topw[size_t(t * k + j)]});

  Tensor out = Tensor::zeros_f32({L, H});  // routed sum, added to h at the end
  Tensor xe, ye;
  for (int64_t e = 0; e < E; ++e) {
    const auto& rows = by_expert[size_t(e)];
    if (rows.empty()) continue;
    const int64_t n = int64_t(rows.size());
    xe = Tensor::zeros_f32({n, H});
    ye = Tensor::zeros_f32({n, H});
    for (int64_t r = 0; r < n; ++r)
      std::copy(x + rows[size_t(r)].first * H, x + (rows[size_t(r)].first + 1) * H,
                xe.f32() + r * H);
    mlp_layer(w.experts[size_t(e)], xe.f32(), n, ye.f32());
    for (int64_t r = 0; r < n; ++r)
      kernels::axpy(rows[size_t(r)].second, ye.f32() + r * H, out.f32() + rows[size_t(r)].first * H, H);
  }
  if (w.has_shared) {
    Tensor sh = Tensor::zeros_f32({L, H});
    mlp_layer(w.shared, x, L, sh.f32());
    std::vector<float> gate(static_cast<size_t>(L));
    kernels::linear(x, L, w.shared_gate, gate.data());
    for (int64_t t = 0; t < L; ++t)
      kernels::axpy(kernels::sigmoid(gate[size_t(t)]), sh.f32() + t * H, out.f32() + t * H, H);
  }
  const float* o = out.f32();
  for (int64_t i = 0; i < L * H; ++i) h[i] += o[i];
}

}  // namespace hypic
