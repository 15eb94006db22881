// Sampler: greedy, temperature, top-k, top-p and seeding, checked against the definitions
// (softmax(logits / T), truncated and renormalised) with exact or statistical tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "common/testutil.h"
#include "engine/sampler.h"

namespace hypic {
namespace {

std::vector<int32_t> draws(const SamplingParams& p, const std::vector<float>& logits, int n) {
  Sampler s(p);
  std::vector<int32_t> out;
  out.reserve(size_t(n));
  for (int i = 0; i < n; ++i) out.push_back(s.sample(logits.data(), int64_t(logits.size())));
  return out;
}

// The distribution the sampler is specified to draw from: softmax(logits / T) over the top_k
// largest logits (ties: lower id first), then the smallest prefix (in that order) whose
// probability mass reaches top_p, renormalised. Computed here independently in long double.
std::vector<double> expected_probs(const std::vector<float>& logits, float T, int top_k,
                                   float top_p) {
  const size_t V = logits.size();
  std::vector<size_t> order(V);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return logits[a] > logits[b]; });
  const size_t k = (top_k > 0 && size_t(top_k) < V) ? size_t(top_k) : V;
  order.resize(k);
  std::vector<long double> w(k);
  long double sum = 0;
  for (size_t i = 0; i < k; ++i)
    sum += (w[i] = std::exp((long double)logits[order[i]] / (long double)T));
  size_t keep = k;
  if (top_p < 1.0f) {
    long double cum = 0;
    for (size_t i = 0; i < k; ++i) {
      cum += w[i] / sum;
      if (cum >= (long double)top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  long double kept = 0;
  for (size_t i = 0; i < keep; ++i) kept += w[i];
  std::vector<double> p(V, 0.0);
  for (size_t i = 0; i < keep; ++i) p[order[i]] = double(w[i] / kept);
  return p;
}

// N draws; each count is Binomial(N, p_i): mean N·p_i, standard deviation
// sqrt(N·p_i·(1 − p_i)). A correct sampler lands within 5 standard deviations with
// probability 1 − 5.7e-7 per token (the draws are seeded, so the test is also reproducible).
// Tokens with p_i = 0 (cut by top-k / top-p) must never be drawn.
void expect_frequencies(const std::vector<float>& logits, const SamplingParams& p, int N) {
  const std::vector<double> want = expected_probs(logits, p.temperature, p.top_k, p.top_p);
  std::vector<int64_t> count(logits.size(), 0);
  for (int32_t id : draws(p, logits, N)) {
    ASSERT_GE(id, 0);
    ASSERT_LT(size_t(id), logits.size());
    ++count[size_t(id)];
  }
  for (size_t i = 0; i < logits.size(); ++i) {
    if (want[i] == 0.0) {
      EXPECT_EQ(count[i], 0) << "token " << i << " is outside top-k/top-p but was drawn (T="
                             << p.temperature << " k=" << p.top_k << " p=" << p.top_p << ")";
      continue;
    }
    const double mean = N * want[i];
    const double sd = std::sqrt(N * want[i] * (1.0 - want[i]));
    EXPECT_NEAR(double(count[i]), mean, 5.0 * sd + 1e-9)
        << "token " << i << " p=" << want[i] << " (T=" << p.temperature << " k=" << p.top_k
        << " p=" << p.top_p << ")";
  }
}

const std::vector<float> kSmall = {1.0f, 2.5f, -0.5f, 2.0f, 0.0f, 1.5f};  // 6 tokens

TEST(Sampler, ArgmaxTiesGoToLowestId) {
  EXPECT_EQ(argmax(std::vector<float>{1, 3, 3, 2}.data(), 4), 1);
  EXPECT_EQ(argmax(std::vector<float>{5, 5, 5}.data(), 3), 0);
  EXPECT_EQ(argmax(std::vector<float>{-INFINITY, -1e30f, -1e30f}.data(), 3), 1);
  EXPECT_EQ(argmax(std::vector<float>{0.5f}.data(), 1), 0);
}

TEST(Sampler, GreedyIsArgmax) {
  const auto logits = test::randn(512, 7);
  const int32_t best = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  for (uint64_t seed : {0, 1, 99}) {
    for (int32_t id : draws({0.0f, 0, 1.0f, seed}, logits, 20)) EXPECT_EQ(id, best);
    // top-k / top-p do not matter at temperature 0
    for (int32_t id : draws({0.0f, 5, 0.3f, seed}, logits, 5)) EXPECT_EQ(id, best);
  }
  // ties: the lowest id
  const std::vector<float> tie = {0.0f, 4.0f, 1.0f, 4.0f, 4.0f};
  EXPECT_EQ(draws({0.0f, 0, 1.0f, 0}, tie, 1)[0], 1);
}

TEST(Sampler, TemperatureIsDeterministicPerSeedAndDiffersAcrossSeeds) {
  const auto logits = test::randn(512, 11, 2.0f);
  const SamplingParams a{1.0f, 0, 1.0f, 42}, b{1.0f, 0, 1.0f, 43};
  const auto x1 = draws(a, logits, 64), x2 = draws(a, logits, 64), y = draws(b, logits, 64);
  EXPECT_EQ(x1, x2);
  EXPECT_NE(x1, y);
  // Not greedy: at T = 1 over 512 random logits the 64 draws are not all the argmax.
  const int32_t best = argmax(logits.data(), 512);
  EXPECT_TRUE(std::any_of(x1.begin(), x1.end(), [&](int32_t id) { return id != best; }));
}

TEST(Sampler, TopK1IsGreedyAtAnyTemperature) {
  const auto logits = test::randn(512, 3);
  const int32_t best = argmax(logits.data(), 512);
  for (float T : {0.01f, 0.7f, 1.0f, 5.0f, 1000.0f})
    for (int32_t id : draws({T, 1, 1.0f, 123}, logits, 50)) EXPECT_EQ(id, best) << "T=" << T;
  const std::vector<float> tie = {0.0f, 4.0f, 1.0f, 4.0f};
  for (int32_t id : draws({3.0f, 1, 1.0f, 5}, tie, 20)) EXPECT_EQ(id, 1);
}

TEST(Sampler, TinyTopPIsGreedy) {
  const auto logits = test::randn(512, 4);
  const int32_t best = argmax(logits.data(), 512);
  for (float T : {0.5f, 1.0f, 10.0f})
    for (int32_t id : draws({T, 0, 1e-6f, 77}, logits, 50)) EXPECT_EQ(id, best) << "T=" << T;
}

TEST(Sampler, FrequenciesMatchSoftmaxAtTemperature) {
  for (float T : {1.0f, 0.5f, 2.0f}) {
    SCOPED_TRACE(T);
    expect_frequencies(kSmall, {T, 0, 1.0f, 2024}, 200000);
  }
}

TEST(Sampler, FrequenciesWithTopK) {
  // top_k = 3 keeps tokens 1 (2.5), 3 (2.0), 5 (1.5); the rest must never appear.
  const auto p = expected_probs(kSmall, 1.0f, 3, 1.0f);
  EXPECT_EQ(std::count_if(p.begin(), p.end(), [](double x) { return x > 0; }), 3);
  expect_frequencies(kSmall, {1.0f, 3, 1.0f, 5}, 200000);
  expect_frequencies(kSmall, {0.7f, 2, 1.0f, 6}, 200000);
  // top_k >= V is no truncation
  expect_frequencies(kSmall, {1.0f, 100, 1.0f, 7}, 100000);
}

TEST(Sampler, FrequenciesWithTopP) {
  // softmax(kSmall) ≈ [.096 .429 .021 .260 .035 .158], sorted .429 .260 .158 .096 ...;
  // top_p = 0.7 keeps 3 tokens (cum .689 < .7, then .847), top_p = 0.5 keeps 2 (cum .689).
  const auto p = expected_probs(kSmall, 1.0f, 0, 0.7f);
  EXPECT_EQ(std::count_if(p.begin(), p.end(), [](double x) { return x > 0; }), 3);
  const auto q = expected_probs(kSmall, 1.0f, 0, 0.5f);
  EXPECT_EQ(std::count_if(q.begin(), q.end(), [](double x) { return x > 0; }), 2);
  expect_frequencies(kSmall, {1.0f, 0, 0.7f, 8}, 200000);
  expect_frequencies(kSmall, {1.0f, 0, 0.5f, 9}, 200000);
  // with temperature: the mass is computed at temperature T
  expect_frequencies(kSmall, {2.0f, 0, 0.8f, 10}, 200000);
  // top-k and top-p together: top-k first, then top-p over the renormalised top-k
  expect_frequencies(kSmall, {1.0f, 4, 0.6f, 11}, 200000);
}

TEST(Sampler, NegativeInfinityLogitsAreNeverDrawn) {
  const std::vector<float> logits = {-INFINITY, 0.0f, -INFINITY, 0.0f, -INFINITY};
  for (int32_t id : draws({1.0f, 0, 1.0f, 1}, logits, 2000)) EXPECT_TRUE(id == 1 || id == 3) << id;
}

}  // namespace
}  // namespace hypic

namespace hypic {
namespace {

// A wide top-p set (about 2,000 of 6,000 near-equal logits) makes the sampler widen its sorted
// head several times (64, 256, 1024, 4096): every draw must fall in the exact set computed by
// the full sort of expected_probs, and the set's edge must be reachable.
TEST(Sampler, WideTopPSetIsExactWithoutSortingTheVocabulary) {
  std::vector<float> logits(6000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = 0.001f * float((i * 7919) % 997);
  for (float top_p : {0.3f, 0.9f}) {
    const auto p = expected_probs(logits, 1.0f, 0, top_p);
    const auto allowed = std::count_if(p.begin(), p.end(), [](double x) { return x > 0; });
    EXPECT_GT(allowed, 1000) << top_p;
    for (int32_t id : draws({1.0f, 0, top_p, 9}, logits, 4000))
      ASSERT_GT(p[size_t(id)], 0.0) << "token " << id << " outside top-p " << top_p;
    // with top-k inside the same vocabulary
    const auto q = expected_probs(logits, 1.0f, 300, top_p);
    for (int32_t id : draws({1.0f, 300, top_p, 10}, logits, 2000))
      ASSERT_GT(q[size_t(id)], 0.0) << "token " << id << " outside top-k 300 / top-p " << top_p;
  }
}

}  // namespace
}  // namespace hypic
