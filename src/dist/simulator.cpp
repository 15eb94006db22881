#include "dist/simulator.h"

#include <algorithm>

#include "core/status.h"

namespace hypic::dist {

SimResult simulate(const SimParams& P, const SimConfig& C, const std::vector<int64_t>& lengths,
                   const std::vector<double>* actual_s) {
  HYPIC_CHECK(C.workers >= 0 && C.local_lanes >= 0, "negative lane count");
  HYPIC_CHECK(!actual_s || actual_s->size() == lengths.size(), "one actual time per segment");
  const size_t n = lengths.size();
  const bool fallback = C.workers == 0 && C.local_lanes == 0;  // the caller builds it all
  const int lanes = fallback ? 1 : C.workers + C.local_lanes;
  const CostModel& pc =
      (P.plan_cost.a == 0 && P.plan_cost.b == 0 && P.plan_cost.c == 0) ? P.cost : P.plan_cost;

  SimResult r;
  std::vector<double> predicted(n), cost(n);
  for (size_t j = 0; j < n; ++j) {
    predicted[j] = pc.seconds(lengths[j]);
    cost[j] = actual_s ? (*actual_s)[j] : P.cost.seconds(lengths[j]);
    r.entry_bytes.push_back(P.entry_bytes_base + P.entry_bytes_per_token * double(lengths[j]));
  }
  const Schedule plan = assign(C.policy, predicted, lengths, std::vector<double>(size_t(lanes), 0.0));
  r.planned_makespan_s = plan.makespan();
  r.lane_of = plan.lane;
  if (fallback) std::fill(r.lane_of.begin(), r.lane_of.end(), -1);

  auto wire = [&](double bytes) { return P.bandwidth_Bps > 0 ? bytes / P.bandwidth_Bps : 0.0; };
  const double probe = P.query_load && C.workers > 0 ? P.rpc_latency_s : 0.0;
  for (int l = 0; l < lanes; ++l) {
    const std::vector<int>& jobs = plan.order[size_t(l)];
    const bool remote = l < C.workers;
    double build = 0, done = probe;
    if (!remote) {
      for (int j : jobs) build += cost[size_t(j)];
      done = probe + build;
    } else if (!jobs.empty()) {
      double req_bytes = 0;
      for (int j : jobs) req_bytes += P.request_bytes_per_token * double(lengths[size_t(j)]);
      // ready: entry k is in the streamer's queue; sent[k]: the streamer pops it and starts
      // sending; link_free: it has sent the previous one; done: ingested by the combine.
      std::vector<double> sent;
      double t = probe + P.rpc_latency_s + wire(req_bytes);  // the producer starts building
      double link_free = 0;
      for (size_t k = 0; k < jobs.size(); ++k) {
        const size_t j = size_t(jobs[k]);
        const double B = r.entry_bytes[j];
        build += cost[j];
        double ready = t + cost[j] + B * P.serialize_s_per_byte;
        if (k >= 2) ready = std::max(ready, sent[k - 2]);  // queue of 2: wait for a pop
        const double start = std::max(ready, link_free);
        sent.push_back(start);
        link_free = start + wire(B);
        // The reader takes entry k only after ingesting entry k − 1.
        done = std::max(link_free, done) + B * P.ingest_s_per_byte;
        r.bytes_total += B;
        t = ready;  // the producer builds the next entry once this one is queued
      }
    }
    r.lane_done_s.push_back(done);
    r.lane_build_s.push_back(build);
  }
  r.all_present_s = r.lane_done_s.empty() ? 0.0 : *std::max_element(r.lane_done_s.begin(), r.lane_done_s.end());
  if (n == 0) r.all_present_s = 0;
  r.compose_s = P.compose_s;
  r.ttft_s = r.all_present_s + r.compose_s;
  return r;
}

}  // namespace hypic::dist
