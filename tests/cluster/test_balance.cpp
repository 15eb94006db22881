// Balancing (cluster/balance.h) against schedules and fits computed by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "cluster/balance.h"

namespace hypic::cluster {
namespace {

Schedule run(Policy p, const std::vector<double>& cost, const std::vector<double>& load,
             std::vector<int64_t> length = {}) {
  if (length.empty()) length.assign(cost.size(), 1);
  return assign(p, cost, length, load);
}

using Order = std::vector<std::vector<int>>;

TEST(Lpt, TwoIdleLanes) {
  // By decreasing cost 0(7) 1(5) 2(4) 3(3) 4(3) 5(2); finishes after each step:
  // {7,0} {7,5} {7,9} {10,9} {10,12} {12,12}.
  const Schedule s = run(Policy::kLpt, {7, 5, 4, 3, 3, 2}, {0, 0});
  EXPECT_EQ(s.lane, (std::vector<int>{0, 1, 1, 0, 1, 0}));
  EXPECT_EQ(s.order, (Order{{0, 3, 5}, {1, 2, 4}}));
  EXPECT_EQ(s.finish, (std::vector<double>{12, 12}));
  EXPECT_EQ(s.makespan(), 12);
}

TEST(Lpt, StartsFromEachLanesCurrentLoad) {
  // Lane 1 is busy for 6 s: {4,6} {7,6} {7,9} {9,9}.
  const Schedule s = run(Policy::kLpt, {4, 3, 3, 2}, {0, 6});
  EXPECT_EQ(s.lane, (std::vector<int>{0, 0, 1, 0}));
  EXPECT_EQ(s.order, (Order{{0, 1, 3}, {2}}));
  EXPECT_EQ(s.finish, (std::vector<double>{9, 9}));
}

TEST(Lpt, TiesGoToTheLowerJobAndLaneIndex) {
  const Schedule s = run(Policy::kLpt, {2, 2, 2, 2}, {0, 0, 0});
  EXPECT_EQ(s.lane, (std::vector<int>{0, 1, 2, 0}));
  EXPECT_EQ(s.finish, (std::vector<double>{4, 2, 2}));
}

TEST(Lpt, MeetsGrahamsBoundOnItsWorstCase) {
  // {3,3,2,2,2} on 2 lanes: LPT {3,0} {3,3} {5,3} {5,5} {7,5} → 7; optimal 6 (3+3 | 2+2+2);
  // 7/6 is exactly 4/3 − 1/(3·2).
  const Schedule s = run(Policy::kLpt, {3, 3, 2, 2, 2}, {0, 0});
  EXPECT_EQ(s.lane, (std::vector<int>{0, 1, 0, 1, 0}));
  EXPECT_EQ(s.makespan(), 7);
  EXPECT_LE(s.makespan() / 6.0, 4.0 / 3 - 1.0 / 6 + 1e-12);
}

TEST(Lpt, NoJobs) {
  const Schedule s = run(Policy::kLpt, {}, {1, 2});
  EXPECT_TRUE(s.lane.empty());
  EXPECT_EQ(s.order, (Order{{}, {}}));
  EXPECT_EQ(s.makespan(), 2);
}

TEST(RoundRobin, IgnoresCostsAndLoadsButReportsFinish) {
  const Schedule s = run(Policy::kRoundRobin, {1, 2, 3, 4, 5}, {1, 0});
  EXPECT_EQ(s.lane, (std::vector<int>{0, 1, 0, 1, 0}));
  EXPECT_EQ(s.order, (Order{{0, 2, 4}, {1, 3}}));
  EXPECT_EQ(s.finish, (std::vector<double>{10, 6}));  // 1 + 1+3+5 | 2+4
}

TEST(Contiguous, SplitsConsecutiveJobsByLength) {
  // Total 1000: midpoints 50, 250, 500, 800 → ×2/1000 → 0.1, 0.5, 1.0, 1.6.
  Schedule s = run(Policy::kContiguous, {1, 3, 2, 4}, {0, 0}, {100, 300, 200, 400});
  EXPECT_EQ(s.lane, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(s.order, (Order{{0, 1}, {2, 3}}));
  EXPECT_EQ(s.finish, (std::vector<double>{4, 6}));
  // Six equal jobs on three lanes: two each, in order.
  s = run(Policy::kContiguous, std::vector<double>(6, 1.0), {0, 0, 0}, std::vector<int64_t>(6, 100));
  EXPECT_EQ(s.lane, (std::vector<int>{0, 0, 1, 1, 2, 2}));
  // One huge job among small ones keeps its neighbours on either side.
  s = run(Policy::kContiguous, {1, 1, 1}, {0, 0}, {10, 1000, 10});
  EXPECT_EQ(s.lane, (std::vector<int>{0, 1, 1}));  // midpoints 5, 510, 1015 of 1020
}

TEST(Policy, NamesRoundTrip) {
  for (Policy p : {Policy::kLpt, Policy::kRoundRobin, Policy::kContiguous}) {
    Policy q = Policy::kLpt;
    ASSERT_TRUE(parse_policy(policy_name(p), &q));
    EXPECT_EQ(q, p);
  }
  Policy q;
  EXPECT_FALSE(parse_policy("random", &q));
}

void expect_model(const CostModel& m, double a, double b, double c, double rel = 1e-6) {
  EXPECT_NEAR(m.a, a, rel * std::max(std::fabs(a), 1e-9));
  EXPECT_NEAR(m.b, b, rel * std::max(std::fabs(b), 1e-12));
  EXPECT_NEAR(m.c, c, rel * std::max(std::fabs(c), 1e-15));
}

TEST(CostModel, RecoversExactQuadratic) {
  const CostModel truth{0.01, 2e-4, 3e-9};
  std::vector<CostSample> s;
  for (int64_t L : {128, 512, 1024, 4096, 8192, 8192}) s.push_back({L, truth.seconds(L)});
  expect_model(fit_cost_model(s, {}), 0.01, 2e-4, 3e-9);
}

TEST(CostModel, ConcaveDataGetsTheBestNonNegativeFit) {
  // y = 1.0, 1.8, 2.4 at L = 100, 200, 300 bends down: the unconstrained quadratic has c < 0.
  // Best non-negative fit is the line: slope 140/20000 = 0.007, intercept 1.7333 − 1.4.
  const CostModel m = fit_cost_model({{100, 1.0}, {200, 1.8}, {300, 2.4}}, {});
  expect_model(m, 1.0 / 3, 0.007, 0.0, 1e-9);
}

TEST(CostModel, FewLengthsScaleThePrior) {
  const CostModel prior{1, 0.1, 0};
  EXPECT_EQ(fit_cost_model({}, prior).b, 0.1);
  // One length: p = prior(10) = 2, k = Σps / Σp² = 2·4 / 4 = 2.
  expect_model(fit_cost_model({{10, 4.0}}, prior), 2, 0.2, 0);
  // Two lengths: p = 2, 3; s = 4, 9: k = (8 + 27) / (4 + 9) = 35/13.
  const double k = 35.0 / 13;
  expect_model(fit_cost_model({{10, 4.0}, {20, 9.0}}, prior), k, 0.1 * k, 0);
}

TEST(CostModel, CostIsQuadraticInLength) {
  const CostModel m{1, 2, 3};
  EXPECT_EQ(m.seconds(0), 1);
  EXPECT_EQ(m.seconds(10), 1 + 20 + 300);
}

}  // namespace
}  // namespace hypic::cluster
