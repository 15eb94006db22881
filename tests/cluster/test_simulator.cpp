// The cold-TTFT simulator (cluster/simulator.h) on cases computed by hand.
#include <gtest/gtest.h>

#include <algorithm>

#include "cluster/simulator.h"

namespace hypic::cluster {
namespace {

SimParams linear_cost(double b, double a = 0) {
  SimParams p;
  p.cost = {a, b, 0};
  p.request_bytes_per_token = 0;
  p.query_load = false;
  return p;
}

TEST(Simulator, NoLaneMeansTheCallerBuildsEverythingThenComposes) {
  SimParams p = linear_cost(0.01, 1.0);  // cost(100) = 2, cost(200) = 3
  p.compose_s = 0.5;
  p.rpc_latency_s = 7;  // no worker: no RPC
  p.query_load = true;
  const SimResult r = simulate(p, {0, 0, Policy::kLpt}, {100, 200});
  EXPECT_DOUBLE_EQ(r.all_present_s, 5.0);
  EXPECT_DOUBLE_EQ(r.ttft_s, 5.5);
  EXPECT_EQ(r.lane_of, (std::vector<int>{-1, -1}));
  // One local lane is the same thing.
  EXPECT_DOUBLE_EQ(simulate(p, {0, 1, Policy::kLpt}, {100, 200}).ttft_s, 5.5);
}

TEST(Simulator, LocalLanesFollowTheLptPlan) {
  const SimParams p = linear_cost(0.01, 1.0);  // 2, 3, 4
  const SimResult r = simulate(p, {0, 2, Policy::kLpt}, {100, 200, 300});
  // 4 → lane 0; 3 → lane 1; 2 → lane 1 (3 < 4): finishes 4 and 5.
  EXPECT_EQ(r.lane_of, (std::vector<int>{1, 1, 0}));
  EXPECT_DOUBLE_EQ(r.lane_done_s[0], 4.0);
  EXPECT_DOUBLE_EQ(r.lane_done_s[1], 5.0);
  EXPECT_DOUBLE_EQ(r.all_present_s, 5.0);
  EXPECT_DOUBLE_EQ(r.planned_makespan_s, 5.0);
}

TEST(Simulator, PoliciesOnSkewedLengthsWithTwoWorkers) {
  SimParams p = linear_cost(0.01);  // 4, 1, 1, 1, 1
  p.rpc_latency_s = 0.01;
  p.query_load = true;  // probe + Prefill call: 0.02 before the first build
  const std::vector<int64_t> L = {400, 100, 100, 100, 100};
  // LPT: 4 alone on worker 0, the four 1s on worker 1.
  EXPECT_NEAR(simulate(p, {2, 0, Policy::kLpt}, L).all_present_s, 4.02, 1e-12);
  // Round-robin: worker 0 gets 0, 2, 4 (6 s), worker 1 gets 1, 3 (2 s).
  const SimResult rr = simulate(p, {2, 0, Policy::kRoundRobin}, L);
  EXPECT_EQ(rr.lane_of, (std::vector<int>{0, 1, 0, 1, 0}));
  EXPECT_NEAR(rr.all_present_s, 6.02, 1e-12);
  EXPECT_NEAR(rr.lane_done_s[1], 2.02, 1e-12);
  // Contiguous: midpoints 200 | 450 550 650 750 of 800 → 4 | 1+1+1+1.
  EXPECT_NEAR(simulate(p, {2, 0, Policy::kContiguous}, L).all_present_s, 4.02, 1e-12);
}

TEST(Simulator, StreamingOverlapsBuildsWithTransferAndIngest) {
  SimParams p = linear_cost(0.01, 1.0);  // 2, 3
  p.entry_bytes_per_token = 10;           // 1000 and 2000 bytes
  p.bandwidth_Bps = 1000;                 // 1 s and 2 s on the link
  p.serialize_s_per_byte = 0.0005;        // 0.5 s and 1 s
  p.ingest_s_per_byte = 0.001;            // 1 s and 2 s
  p.compose_s = 1;
  const SimResult r = simulate(p, {1, 0, Policy::kRoundRobin}, {100, 200});
  // Entry 0: built 2, serialised 2.5, sent 2.5–3.5, ingested 4.5. Entry 1 is built while
  // entry 0 travels: 2.5 + 3 + 1 = 6.5, sent 6.5–8.5, ingested 10.5.
  EXPECT_DOUBLE_EQ(r.all_present_s, 10.5);
  EXPECT_DOUBLE_EQ(r.ttft_s, 11.5);
  EXPECT_DOUBLE_EQ(r.bytes_total, 3000);
  EXPECT_DOUBLE_EQ(r.lane_build_s[0], 5.0);
}

TEST(Simulator, SlowIngestHoldsTheReader) {
  SimParams p = linear_cost(0.001);  // 0.1 each
  p.entry_bytes_base = 1000;
  p.bandwidth_Bps = 1000;      // 1 s each
  p.ingest_s_per_byte = 0.003;  // 3 s each
  const SimResult r = simulate(p, {1, 0, Policy::kRoundRobin}, {100, 100});
  // Entry 0: 0.1, sent to 1.1, ingested 4.1; entry 1 arrives at 2.1 but waits for the
  // reader until 4.1: ingested 7.1.
  EXPECT_NEAR(r.all_present_s, 7.1, 1e-12);
}

TEST(Simulator, TheWorkersTwoEntryQueueStallsItsBuilds) {
  SimParams p = linear_cost(0.01);
  p.entry_bytes_base = 1000;
  p.bandwidth_Bps = 100;  // 10 s per entry
  const std::vector<double> actual = {1, 1, 1, 1, 35};
  const SimResult r = simulate(p, {1, 0, Policy::kRoundRobin}, {100, 100, 100, 100, 100}, &actual);
  // Sends start at 1, 11, 21, 31. The build of entry 4 waits until entry 1 has left the
  // queue (at 11), so it runs 11–46 (not 4–39) and its send 46–56 (not 41–51).
  EXPECT_DOUBLE_EQ(r.all_present_s, 56.0);
  EXPECT_DOUBLE_EQ(r.lane_build_s[0], 39.0);
}

TEST(Simulator, PlansWithThePlanCostAndRunsWithTheActualCost) {
  SimParams p = linear_cost(0.01);  // actual: 4, 1, 1, 1, 1
  p.plan_cost = {1, 0, 0};          // the planner thinks they all take 1 s
  const SimResult r = simulate(p, {2, 0, Policy::kLpt}, {400, 100, 100, 100, 100});
  // Equal predictions: LPT degenerates to alternating lanes (ties: lower index, lower lane).
  EXPECT_EQ(r.lane_of, (std::vector<int>{0, 1, 0, 1, 0}));
  EXPECT_DOUBLE_EQ(r.planned_makespan_s, 3.0);
  EXPECT_DOUBLE_EQ(r.all_present_s, 6.0);
}

TEST(Simulator, NoColdSegmentIsJustTheCompose) {
  SimParams p = linear_cost(0.01);
  p.compose_s = 0.25;
  p.rpc_latency_s = 1;
  p.query_load = true;
  const SimResult r = simulate(p, {4, 1, Policy::kLpt}, {});
  EXPECT_DOUBLE_EQ(r.all_present_s, 0.0);
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.25);
}

TEST(Simulator, LayerPartsOverlapCompositionWithTheBuilds) {
  SimParams p = linear_cost(0.01, 1.0);  // 2, 3
  p.compose_s = 1;
  p.layers = 2;  // 0.5 s of composition per layer
  // One local lane, LPT order: the 3-s segment (parts at 1.5, 3), then the 2-s one (4, 5).
  // Layer 0 composes at 4–4.5, layer 1 at 5–5.5; whole entries would give 5 + 1.
  EXPECT_DOUBLE_EQ(simulate(p, {0, 1, Policy::kLpt}, {100, 200}).ttft_s, 5.5);
  p.layers = 1;
  EXPECT_DOUBLE_EQ(simulate(p, {0, 1, Policy::kLpt}, {100, 200}).ttft_s, 6.0);
  // Composition slower than the builds: layer 0 at 4–9, layer 1 at 9–14 (not 5 + 10).
  p.layers = 2;
  p.compose_s = 10;
  EXPECT_DOUBLE_EQ(simulate(p, {0, 1, Policy::kLpt}, {100, 200}).ttft_s, 14.0);
}

TEST(Simulator, LayerPartsStreamFromAWorkerAsItBuilds) {
  SimParams p = linear_cost(0.01, 1.0);  // 2 s
  p.entry_bytes_base = 1000;
  p.bandwidth_Bps = 1000;  // 0.5 s per part of 500 bytes
  p.compose_s = 1;
  p.layers = 2;
  // Part 0 ready at 1, sent 1–1.5; part 1 at 2, sent 2–2.5. Layer 0 composes 1.5–2,
  // layer 1 2.5–3. Whole: ready 2, sent 2–3, composed 3–4.
  const SimResult r = simulate(p, {1, 0, Policy::kLpt}, {100});
  EXPECT_DOUBLE_EQ(r.all_present_s, 2.5);
  EXPECT_DOUBLE_EQ(r.ttft_s, 3.0);
  p.layers = 1;
  EXPECT_DOUBLE_EQ(simulate(p, {1, 0, Policy::kLpt}, {100}).ttft_s, 4.0);
}

TEST(Simulator, LptStaysWithinTheListSchedulingBounds) {
  const SimParams p = linear_cost(1e-3, 0.01);
  std::vector<int64_t> L;
  double total = 0, longest = 0;
  for (int i = 0; i < 24; ++i) {
    L.push_back(200 + 97 * ((i * 7) % 24));
    total += p.cost.seconds(L.back());
    longest = std::max(longest, p.cost.seconds(L.back()));
  }
  for (int w = 1; w <= 16; ++w) {
    const double t = simulate(p, {w, 0, Policy::kLpt}, L).ttft_s;
    EXPECT_GE(t, std::max(longest, total / w) - 1e-12) << w << " workers";
    EXPECT_LE(t, total / w + longest + 1e-12) << w << " workers";
  }
  EXPECT_DOUBLE_EQ(simulate(p, {1, 0, Policy::kLpt}, L).ttft_s, total);
}

}  // namespace
}  // namespace hypic::cluster
