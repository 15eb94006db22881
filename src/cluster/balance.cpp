#include "cluster/balance.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <set>

#include "core/status.h"

namespace hypic::cluster {
namespace {

constexpr double kScale = 1024.0;  // features in L/1024 keep the normal equations conditioned

// Least squares over the terms in `use` (subset of {1, x, x²}, x = L/1024): coefficients in
// theta (unused ones 0) and the residual sum of squares. False if singular.
bool fit_subset(const std::vector<CostSample>& s, const std::array<bool, 3>& use,
                std::array<double, 3>* theta, double* rss) {
  std::vector<int> idx;
  for (int j = 0; j < 3; ++j)
    if (use[size_t(j)]) idx.push_back(j);
  const size_t k = idx.size();
  double A[3][4] = {};  // [k, k | rhs]
  for (const CostSample& p : s) {
    const double x = double(p.tokens) / kScale;
    const double f[3] = {1.0, x, x * x};
    for (size_t r = 0; r < k; ++r) {
      for (size_t c = 0; c < k; ++c) A[r][c] += f[idx[r]] * f[idx[c]];
      A[r][k] += f[idx[r]] * p.seconds;
    }
  }
  for (size_t c = 0; c < k; ++c) {  // Gaussian elimination, partial pivoting
    size_t piv = c;
    for (size_t r = c + 1; r < k; ++r)
      if (std::fabs(A[r][c]) > std::fabs(A[piv][c])) piv = r;
    if (std::fabs(A[piv][c]) < 1e-12 * std::max(1.0, std::fabs(A[0][0]))) return false;
    for (size_t j = 0; j <= k; ++j) std::swap(A[c][j], A[piv][j]);
    for (size_t r = 0; r < k; ++r) {
      if (r == c) continue;
      const double m = A[r][c] / A[c][c];
      for (size_t j = c; j <= k; ++j) A[r][j] -= m * A[c][j];
    }
  }
  *theta = {0, 0, 0};
  for (size_t r = 0; r < k; ++r) (*theta)[size_t(idx[r])] = A[r][k] / A[r][r];
  *rss = 0;
  for (const CostSample& p : s) {
    const double x = double(p.tokens) / kScale;
    const double e = (*theta)[0] + (*theta)[1] * x + (*theta)[2] * x * x - p.seconds;
    *rss += e * e;
  }
  return true;
}

}  // namespace

CostModel fit_cost_model(const std::vector<CostSample>& samples, const CostModel& prior) {
  if (samples.empty()) return prior;
  std::set<int64_t> lengths;
  for (const CostSample& s : samples) lengths.insert(s.tokens);
  if (lengths.size() < 3) {
    double ps = 0, pp = 0;
    for (const CostSample& s : samples) {
      const double p = prior.seconds(s.tokens);
      ps += p * s.seconds;
      pp += p * p;
    }
    if (pp <= 0 || ps <= 0) return prior;
    const double k = ps / pp;
    return {prior.a * k, prior.b * k, prior.c * k};
  }
  bool found = false;
  double best_rss = 0;
  std::array<double, 3> best{};
  for (int mask = 1; mask < 8; ++mask) {
    const std::array<bool, 3> use = {bool(mask & 1), bool(mask & 2), bool(mask & 4)};
    std::array<double, 3> th{};
    double rss = 0;
    if (!fit_subset(samples, use, &th, &rss)) continue;
    if (th[0] < 0 || th[1] < 0 || th[2] < 0) continue;
    if (!found || rss < best_rss * (1 - 1e-12)) {  // ties: the smaller subset (lower mask)
      found = true;
      best_rss = rss;
      best = th;
    }
  }
  if (!found) return prior;
  return {best[0], best[1] / kScale, best[2] / (kScale * kScale)};
}

const char* policy_name(Policy p) {
  switch (p) {
    case Policy::kLpt: return "lpt";
    case Policy::kRoundRobin: return "round-robin";
    case Policy::kContiguous: return "contiguous";
  }
  return "?";
}

bool parse_policy(const std::string& s, Policy* p) {
  for (Policy x : {Policy::kLpt, Policy::kRoundRobin, Policy::kContiguous})
    if (s == policy_name(x)) {
      *p = x;
      return true;
    }
  return false;
}

double Schedule::makespan() const {
  return finish.empty() ? 0.0 : *std::max_element(finish.begin(), finish.end());
}

Schedule assign(Policy p, const std::vector<double>& cost, const std::vector<int64_t>& length,
                const std::vector<double>& load) {
  HYPIC_CHECK(!load.empty(), "assign() needs at least one lane");
  HYPIC_CHECK(length.size() == cost.size(), "one length per job");
  const size_t n = cost.size(), lanes = load.size();
  Schedule s;
  s.lane.assign(n, 0);
  s.order.assign(lanes, {});
  s.finish = load;
  auto put = [&](size_t job, size_t lane) {
    s.lane[job] = int(lane);
    s.order[lane].push_back(int(job));
    s.finish[lane] += cost[job];
  };
  switch (p) {
    case Policy::kLpt: {
      std::vector<size_t> jobs(n);
      std::iota(jobs.begin(), jobs.end(), size_t(0));
      std::stable_sort(jobs.begin(), jobs.end(), [&](size_t a, size_t b) { return cost[a] > cost[b]; });
      for (size_t j : jobs) {
        const size_t l = size_t(std::min_element(s.finish.begin(), s.finish.end()) - s.finish.begin());
        put(j, l);
      }
      break;
    }
    case Policy::kRoundRobin:
      for (size_t j = 0; j < n; ++j) put(j, j % lanes);
      break;
    case Policy::kContiguous: {
      const double total = double(std::accumulate(length.begin(), length.end(), int64_t(0)));
      double before = 0;
      for (size_t j = 0; j < n; ++j) {
        const double mid = before + double(length[j]) / 2;
        const size_t l = total > 0 ? size_t(std::floor(mid * double(lanes) / total)) : 0;
        put(j, std::min(l, lanes - 1));
        before += double(length[j]);
      }
      break;
    }
  }
  return s;
}

}  // namespace hypic::cluster
