// route_token (model/mixers/moe_router.h) against a plain reference written here (double
// precision, one expert picked at a time), over random logits and every router variant; exact
// ties; the Qwen path against the routing Moe ran before MoeRouter, bit for bit; and each
// validation error.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/elementwise.h"
#include "model/mixers/moe_router.h"

namespace hypic {
namespace {

struct Routed {
  std::vector<int> experts;
  std::vector<double> weights;
};

// Index of the largest v[i] among the allowed i, the lowest such index on ties; -1 if none.
int argmax(const std::vector<double>& v, const std::vector<bool>& allowed) {
  int best = -1;
  for (size_t i = 0; i < v.size(); ++i)
    if (allowed[i] && (best < 0 || v[i] > v[size_t(best)])) best = int(i);
  return best;
}

// The DeepSeek-V3 / Bailing-V2 gate, written out step by step.
Routed reference_route(const MoeRouter& r, const std::vector<float>& logits) {
  const size_t E = logits.size();
  std::vector<double> scores(E), choice(E);
  if (r.scoring == RouterScoring::kSoftmax) {
    const double m = *std::max_element(logits.begin(), logits.end());
    double z = 0;
    for (size_t e = 0; e < E; ++e) z += std::exp(double(logits[e]) - m);
    for (size_t e = 0; e < E; ++e) scores[e] = std::exp(double(logits[e]) - m) / z;
  } else {
    for (size_t e = 0; e < E; ++e) scores[e] = 1.0 / (1.0 + std::exp(-double(logits[e])));
  }
  for (size_t e = 0; e < E; ++e)
    choice[e] = scores[e] + (r.selection_bias.empty() ? 0.0 : double(r.selection_bias.f32()[e]));
  std::vector<bool> eligible(E, true);
  if (r.n_group > 1) {
    const size_t G = E / size_t(r.n_group);
    std::vector<double> group_score(size_t(r.n_group));
    for (size_t g = 0; g < group_score.size(); ++g) {
      std::vector<double> v(choice.begin() + long(g * G), choice.begin() + long((g + 1) * G));
      std::sort(v.rbegin(), v.rend());
      group_score[g] = v[0] + v[1];
    }
    std::vector<bool> unpicked(group_score.size(), true), kept(group_score.size(), false);
    for (int j = 0; j < r.topk_group; ++j) {
      const int g = argmax(group_score, unpicked);
      unpicked[size_t(g)] = false;
      kept[size_t(g)] = true;
    }
    for (size_t e = 0; e < E; ++e) eligible[e] = kept[e / G];
  }
  Routed out;
  for (int j = 0; j < r.top_k; ++j) {
    const int e = argmax(choice, eligible);
    eligible[size_t(e)] = false;
    out.experts.push_back(e);
    out.weights.push_back(scores[size_t(e)]);
  }
  if (r.norm_topk_prob) {
    double sum = 0;
    for (double w : out.weights) sum += w;
    if (r.scoring == RouterScoring::kSigmoid) sum += 1e-20;
    for (double& w : out.weights) w /= sum;
  }
  for (double& w : out.weights) w *= double(r.routed_scaling_factor);
  return out;
}

// Moe::forward's routing of one token before MoeRouter existed (Qwen's), kept verbatim.
void qwen_route_before(float* p, int64_t E, int k, bool norm_topk, int* top, float* topw) {
  kernels::softmax(p, E);
  std::vector<int> idx(static_cast<size_t>(E));
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int a, int b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
  float sum = 0;
  for (int j = 0; j < k; ++j) sum += p[idx[size_t(j)]];
  for (int j = 0; j < k; ++j) {
    top[j] = idx[size_t(j)];
    topw[j] = norm_topk ? p[idx[size_t(j)]] / sum : p[idx[size_t(j)]];
  }
}

std::vector<float> random_values(std::mt19937& rng, int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

Tensor vector_tensor(const std::vector<float>& v) {
  Tensor t = Tensor::zeros_f32({int64_t(v.size())});
  std::copy(v.begin(), v.end(), t.f32());
  return t;
}

Routed route(const MoeRouter& r, std::vector<float> logits) {
  Routed out;
  std::vector<int> experts(size_t(r.top_k));
  std::vector<float> weights(size_t(r.top_k));
  route_token(r, logits.data(), int64_t(logits.size()), experts.data(), weights.data());
  out.experts = experts;
  out.weights.assign(weights.begin(), weights.end());
  return out;
}

std::vector<int> experts_of(const MoeRouter& r, const std::vector<float>& logits) {
  EXPECT_TRUE(r.validate(int64_t(logits.size())).is_ok());
  return route(r, logits).experts;
}

TEST(MoeRouter, MatchesReferenceOnRandomLogits) {
  int cases = 0;
  for (int64_t E : {8, 16, 64})
    for (int n_group : {1, 4, 8}) {
      if (E % n_group != 0 || (n_group > 1 && E / n_group < 2)) continue;
      for (int topk_group : {1, std::max(1, n_group / 2), n_group}) {
        if (n_group == 1 && topk_group != 1) continue;
        for (int k = 1; k <= 8 && k <= topk_group * (E / n_group); ++k)
          for (RouterScoring scoring : {RouterScoring::kSoftmax, RouterScoring::kSigmoid})
            for (bool with_bias : {false, true})
              for (bool norm : {false, true})
                for (float factor : {1.0f, 2.5f})
                  for (uint32_t seed = 0; seed < 12; ++seed) {
                    std::mt19937 rng(seed * 7919u + uint32_t(E * 131 + n_group * 17 + k));
                    MoeRouter r;
                    r.scoring = scoring;
                    r.top_k = k;
                    r.norm_topk_prob = norm;
                    r.routed_scaling_factor = factor;
                    r.n_group = n_group;
                    r.topk_group = topk_group;
                    if (with_bias) r.selection_bias = vector_tensor(random_values(rng, E, -0.5f, 0.5f));
                    ASSERT_TRUE(r.validate(E).is_ok()) << r.validate(E).message();
                    const std::vector<float> logits = random_values(rng, E, -4.0f, 4.0f);
                    const Routed want = reference_route(r, logits);
                    const Routed got = route(r, logits);
                    const std::string where = "E=" + std::to_string(E) + " groups " +
                                              std::to_string(topk_group) + "/" +
                                              std::to_string(n_group) + " k=" +
                                              std::to_string(k) + " seed " + std::to_string(seed);
                    ASSERT_EQ(got.experts, want.experts) << where;
                    for (int j = 0; j < k; ++j)
                      ASSERT_NEAR(got.weights[size_t(j)], want.weights[size_t(j)],
                                  1e-6 * std::abs(want.weights[size_t(j)]))
                          << where << " weight " << j;
                    ++cases;
                  }
      }
    }
  EXPECT_GT(cases, 10000);
}

TEST(MoeRouter, ExactTiesGoToTheLowerIndex) {
  MoeRouter r;
  r.top_k = 3;
  EXPECT_EQ(experts_of(r, std::vector<float>(8, 0.5f)), (std::vector<int>{0, 1, 2}));
  r.top_k = 2;
  EXPECT_EQ(experts_of(r, {1, 3, 0, 3, 3, 0}), (std::vector<int>{1, 3}));
  r.scoring = RouterScoring::kSigmoid;
  EXPECT_EQ(experts_of(r, {1, 3, 0, 3, 3, 0}), (std::vector<int>{1, 3}));
  // Tied choices made by the bias: 0.5 + 0.5 at experts 2 and 5.
  r.selection_bias = vector_tensor({0, 0, 0.5f, 0, 0, 0.5f});
  EXPECT_EQ(experts_of(r, {0, 0, 0, 0, 0, 0}), (std::vector<int>{2, 5}));
}

TEST(MoeRouter, TiedGroupsGoToTheLowerGroup) {
  MoeRouter r;
  r.scoring = RouterScoring::kSigmoid;
  r.top_k = 2;
  r.n_group = 4;
  r.topk_group = 1;
  // Groups of two: {0,1} {2,3} {4,5} {6,7}; groups 1 and 3 hold the same scores (in another
  // order), so they tie exactly for the best group score.
  EXPECT_EQ(experts_of(r, {0, 0, 1, 3, 0, 0, 3, 1}), (std::vector<int>{3, 2}));
  EXPECT_EQ(experts_of(r, std::vector<float>(8, 1.0f)), (std::vector<int>{0, 1}));
}

TEST(MoeRouter, GroupScoreIsTheSumOfTheTwoBest) {
  MoeRouter r;
  r.scoring = RouterScoring::kSigmoid;
  r.top_k = 1;
  r.n_group = 2;
  r.topk_group = 1;
  // Group 0 holds the single best expert (0) but group 1's two best sum higher.
  EXPECT_EQ(experts_of(r, {6, -6, -6, -6, 2, 2, 2, -6}), (std::vector<int>{4}));
}

TEST(MoeRouter, BiasChoosesButDoesNotWeigh) {
  MoeRouter r;
  r.scoring = RouterScoring::kSigmoid;
  r.top_k = 1;
  r.selection_bias = vector_tensor({0, 0, 0, 2.0f});
  const std::vector<float> logits = {3, 1, 2, -1};
  ASSERT_TRUE(r.validate(4).is_ok());
  const Routed got = route(r, logits);
  EXPECT_EQ(got.experts, (std::vector<int>{3}));
  EXPECT_EQ(float(got.weights[0]), kernels::sigmoid(-1.0f));
}

TEST(MoeRouter, QwenRoutingIsUnchangedBitForBit) {
  for (int64_t E : {8, 16, 64, 512})
    for (int k = 1; k <= 8; ++k)
      for (bool norm : {false, true})
        for (uint32_t seed = 0; seed < 20; ++seed) {
          std::mt19937 rng(seed + uint32_t(E * 1000 + k));
          std::vector<float> logits = random_values(rng, E, -6.0f, 6.0f);
          if (seed % 4 == 0)  // coarse logits: many exact ties
            for (float& x : logits) x = std::round(x);
          MoeRouter r;
          r.top_k = k;
          r.norm_topk_prob = norm;
          std::vector<float> before_p = logits, after_p = logits;
          std::vector<int> before_e(static_cast<size_t>(k)), after_e(static_cast<size_t>(k));
          std::vector<float> before_w(static_cast<size_t>(k)), after_w(static_cast<size_t>(k));
          qwen_route_before(before_p.data(), E, k, norm, before_e.data(), before_w.data());
          route_token(r, after_p.data(), E, after_e.data(), after_w.data());
          ASSERT_EQ(after_e, before_e) << "E=" << E << " k=" << k << " seed " << seed;
          for (int j = 0; j < k; ++j)
            ASSERT_EQ(std::bit_cast<uint32_t>(after_w[size_t(j)]),
                      std::bit_cast<uint32_t>(before_w[size_t(j)]))
                << "E=" << E << " k=" << k << " seed " << seed;
          for (int64_t e = 0; e < E; ++e)
            ASSERT_EQ(std::bit_cast<uint32_t>(after_p[size_t(e)]),
                      std::bit_cast<uint32_t>(before_p[size_t(e)]));
        }
}

// A valid grouped router over 16 experts; each validation test breaks one field.
MoeRouter grouped_router() {
  MoeRouter r;
  r.scoring = RouterScoring::kSigmoid;
  r.top_k = 4;
  r.n_group = 4;
  r.topk_group = 2;
  r.routed_scaling_factor = 2.5f;
  r.selection_bias = Tensor::zeros_f32({16});
  return r;
}

void expect_invalid(const MoeRouter& r, const std::string& field) {
  const Status st = r.validate(16);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << field;
  EXPECT_NE(st.message().find(field), std::string::npos) << st.message();
}

TEST(MoeRouterValidate, AcceptsAValidRouter) {
  EXPECT_TRUE(grouped_router().validate(16).is_ok());
  EXPECT_TRUE(MoeRouter{}.validate(1).is_ok());
}

TEST(MoeRouterValidate, TopKOutOfRange) {
  MoeRouter r = grouped_router();
  r.top_k = 0;
  expect_invalid(r, "top_k (0)");
  r = MoeRouter{};
  r.top_k = 17;
  expect_invalid(r, "top_k (17) must be in [1, 16]");
}

TEST(MoeRouterValidate, NGroupMustDivideTheExperts) {
  MoeRouter r = grouped_router();
  r.n_group = 3;
  expect_invalid(r, "n_group (3) must divide");
  r.n_group = 0;
  expect_invalid(r, "n_group (0) must divide");
}

TEST(MoeRouterValidate, GroupsOfOneExpertAreRefused) {
  MoeRouter r = grouped_router();
  r.n_group = 16;
  expect_invalid(r, "n_group (16) leaves groups of 1");
}

TEST(MoeRouterValidate, TopkGroupOutOfRange) {
  MoeRouter r = grouped_router();
  r.topk_group = 5;
  expect_invalid(r, "topk_group (5) must be in [1, 4]");
  r.topk_group = 0;
  expect_invalid(r, "topk_group (0)");
}

TEST(MoeRouterValidate, TopKAboveTheSelectedGroupsExperts) {
  MoeRouter r = grouped_router();
  r.topk_group = 1;
  r.top_k = 5;
  expect_invalid(r, "top_k (5) exceeds the 4 experts");
}

TEST(MoeRouterValidate, ScalingFactorMustBePositive) {
  MoeRouter r = grouped_router();
  r.routed_scaling_factor = 0;
  expect_invalid(r, "routed_scaling_factor");
  r.routed_scaling_factor = std::numeric_limits<float>::quiet_NaN();
  expect_invalid(r, "routed_scaling_factor");
}

TEST(MoeRouterValidate, BiasShapeAndDtype) {
  MoeRouter r = grouped_router();
  r.selection_bias = Tensor::zeros_f32({8});
  expect_invalid(r, "e_score_correction_bias");
  r.selection_bias = Tensor::zeros_f32({1, 16});
  expect_invalid(r, "shape [16]");
  r.selection_bias = Tensor::zeros(DType::kBF16, {16});
  expect_invalid(r, "not BF16 [16]");
}

}  // namespace
}  // namespace hypic
