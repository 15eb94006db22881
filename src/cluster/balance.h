// Balancing cold segments over lanes (SPEC §5): a cost model of a segment's standalone
// prefill fitted from measured times, and the assignment policies. Pure functions: no
// state, no locking; the caller (cluster/scatter.h) keeps the samples.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hypic::cluster {

// Seconds to build the entry of an L-token segment: cost(L) = a + b·L + c·L².
// a: per-segment overhead; b: per-token work (projections, MLP, linear layers, conv);
// c: causal attention (L²/2 score and value products per full-attention layer).
struct CostModel {
  double a = 0, b = 0, c = 0;
  double seconds(int64_t L) const { return a + b * double(L) + c * double(L) * double(L); }
};

struct CostSample {
  int64_t tokens = 0;  // L
  double seconds = 0;  // measured build time
};

// Least-squares fit of (a, b, c) >= 0 to the samples: every subset of the three terms is
// fitted (normal equations in L/1024, solved by Gaussian elimination) and the one with the
// smallest residual among those with non-negative coefficients wins — the exact
// non-negative least-squares solution for three unknowns. With fewer than three distinct
// lengths the terms are not identifiable: `prior` scaled by the least-squares factor
// k = Σ p·s / Σ p² (p = prior(L)) is returned instead; with no samples, `prior` itself.
CostModel fit_cost_model(const std::vector<CostSample>& samples, const CostModel& prior);

enum class Policy {
  kLpt,         // longest processing time first onto the lane that finishes it first
  kRoundRobin,  // job i to lane i mod n, ignoring costs and loads (baseline)
  kContiguous,  // consecutive jobs, roughly equal total length per lane (baseline)
};
const char* policy_name(Policy p);  // "lpt", "round-robin", "contiguous"
bool parse_policy(const std::string& s, Policy* p);

// A schedule of n jobs on the lanes. Invariants: lane[i] in [0, lanes); order[l] lists the
// jobs of lane l in the order they run (each job exactly once overall); finish[l] =
// load[l] + Σ cost of order[l] (projected seconds from now).
struct Schedule {
  std::vector<int> lane;                // [jobs]
  std::vector<std::vector<int>> order;  // [lanes][jobs on it]
  std::vector<double> finish;           // [lanes]
  double makespan() const;              // max finish (0 with no lanes)
};

// cost[i]: predicted seconds of job i; length[i]: its tokens (contiguous split only);
// load[l]: seconds lane l is already busy for (its queue). Needs at least one lane.
//   LPT: jobs by decreasing cost (ties: lower index first), each onto the lane with the
//        smallest projected finish (ties: lower lane index). Graham's bound: makespan
//        <= (4/3 − 1/(3n))·optimal for equal loads (R. Graham, SIAM J. Appl. Math. 1969).
//   round-robin: lane i mod n, in input order.
//   contiguous: job i goes to lane floor((P_i + length_i / 2) · n / P_total), P_i the
//        tokens before it — consecutive groups of about P_total / n tokens each, in order.
Schedule assign(Policy p, const std::vector<double>& cost, const std::vector<int64_t>& length,
                const std::vector<double>& load);

}  // namespace hypic::cluster
