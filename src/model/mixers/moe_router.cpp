// MoE routing of one token (moe_router.h). The softmax / no-group / no-bias / factor-1 path
// performs exactly the float operations of the Qwen router it replaced (kernels::softmax,
// one comparator, one division per weight), so Qwen outputs are unchanged bit for bit.
#include "model/mixers/moe_router.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/elementwise.h"

namespace hypic {
namespace {

Status router_error(const std::string& m) { return invalid_argument("MoE router: " + m); }

// Sum of the two largest values of v[0, n), n >= 2.
float top2_sum(const float* v, int64_t n) {
  float a = -std::numeric_limits<float>::infinity(), b = a;
  for (int64_t i = 0; i < n; ++i) {
    if (v[i] > a) {
      b = a;
      a = v[i];
    } else if (v[i] > b) {
      b = v[i];
    }
  }
  return a + b;
}

// Orders indices by descending value, ties to the lower index: a strict total order, so a
// top-k under it does not depend on the order of the candidates.
struct HigherFirst {
  const float* v;
  bool operator()(int a, int b) const { return v[a] > v[b] || (v[a] == v[b] && a < b); }
};

}  // namespace

Status MoeRouter::validate(int64_t num_experts) const {
  const int64_t E = num_experts;
  if (top_k < 1 || top_k > E)
    return router_error("top_k (" + std::to_string(top_k) + ") must be in [1, " +
                        std::to_string(E) + "] (the number of experts)");
  if (n_group < 1 || E % n_group != 0)
    return router_error("n_group (" + std::to_string(n_group) + ") must divide the " +
                        std::to_string(E) + " experts");
  if (n_group > 1 && E / n_group < 2)
    return router_error("n_group (" + std::to_string(n_group) + ") leaves groups of " +
                        std::to_string(E / n_group) +
                        " expert; a group's score sums its two best experts");
  if (topk_group < 1 || topk_group > n_group)
    return router_error("topk_group (" + std::to_string(topk_group) + ") must be in [1, " +
                        std::to_string(n_group) + "] (n_group)");
  const int64_t eligible = int64_t(topk_group) * (E / n_group);
  if (top_k > eligible)
    return router_error("top_k (" + std::to_string(top_k) + ") exceeds the " +
                        std::to_string(eligible) + " experts of the topk_group (" +
                        std::to_string(topk_group) + ") selected groups");
  if (!std::isfinite(routed_scaling_factor) || routed_scaling_factor <= 0)
    return router_error("routed_scaling_factor (" + std::to_string(routed_scaling_factor) +
                        ") must be a positive number");
  if (!selection_bias.empty() &&
      (selection_bias.dtype() != DType::kF32 || selection_bias.shape() != Shape{E}))
    return router_error("the selection bias (e_score_correction_bias) must be F32 of shape [" +
                        std::to_string(E) + "], not " + dtype_name(selection_bias.dtype()) +
                        " " + shape_str(selection_bias.shape()));
  return Status::ok();
}

void route_token(const MoeRouter& r, float* scores, int64_t E, int* experts, float* weights) {
  const int k = r.top_k;
  switch (r.scoring) {
    case RouterScoring::kSoftmax: kernels::softmax(scores, E); break;
    case RouterScoring::kSigmoid:
      for (int64_t e = 0; e < E; ++e) scores[e] = kernels::sigmoid(scores[e]);
      break;
  }
  // choice [E]: the scores, or scores + bias when the router has one.
  std::vector<float> biased;
  const float* choice = scores;
  if (!r.selection_bias.empty()) {
    const float* bias = r.selection_bias.f32();
    biased.resize(size_t(E));
    for (int64_t e = 0; e < E; ++e) biased[size_t(e)] = scores[e] + bias[e];
    choice = biased.data();
  }
  // Candidates: every expert, or those of the topk_group best groups.
  std::vector<int> idx;
  if (r.n_group > 1) {
    const int64_t G = E / r.n_group;
    std::vector<float> group_score(size_t(r.n_group));
    for (int g = 0; g < r.n_group; ++g) group_score[size_t(g)] = top2_sum(choice + g * G, G);
    std::vector<int> groups(size_t(r.n_group));
    std::iota(groups.begin(), groups.end(), 0);
    std::partial_sort(groups.begin(), groups.begin() + r.topk_group, groups.end(),
                      HigherFirst{group_score.data()});
    for (int j = 0; j < r.topk_group; ++j)
      for (int64_t i = 0; i < G; ++i) idx.push_back(int(groups[size_t(j)] * G + i));
  } else {
    idx.resize(size_t(E));
    std::iota(idx.begin(), idx.end(), 0);
  }
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), HigherFirst{choice});
  float sum = 0;
  for (int j = 0; j < k; ++j) sum += scores[idx[size_t(j)]];
  if (r.norm_topk_prob) {
    switch (r.scoring) {
      case RouterScoring::kSoftmax: break;  // the sum of k softmax scores is never 0
      case RouterScoring::kSigmoid: sum += 1e-20f; break;
    }
  }
  for (int j = 0; j < k; ++j) {
    const float s = scores[idx[size_t(j)]];
    experts[j] = idx[size_t(j)];
    weights[j] = r.norm_topk_prob ? s / sum : s;
    if (r.routed_scaling_factor != 1.0f) weights[j] *= r.routed_scaling_factor;
  }
}

}  // namespace hypic
