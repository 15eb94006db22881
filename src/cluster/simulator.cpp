#include "cluster/simulator.h"

#include <algorithm>

#include "core/status.h"

namespace hypic::cluster {

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
  // Entries travel in N parts (one per decoder layer, each 1/N of the bytes and of the build
  // time); present[j][l]: part l of segment j is in the combine.
  const int N = std::max(1, P.layers);
  std::vector<std::vector<double>> present(n, std::vector<double>(size_t(N), 0.0));
  for (int l = 0; l < lanes; ++l) {
    const std::vector<int>& jobs = plan.order[size_t(l)];
    const bool remote = l < C.workers;
    double build = 0, done = probe;
    if (!remote) {
      double t = probe;
      for (int j : jobs) {
        for (int p = 0; p < N; ++p) present[size_t(j)][size_t(p)] = t + cost[size_t(j)] * (p + 1) / N;
        t += cost[size_t(j)];
        build += cost[size_t(j)];
      }
      done = t;
    } else if (!jobs.empty()) {
      double req_bytes = 0;
      for (int j : jobs) req_bytes += P.request_bytes_per_token * double(lengths[size_t(j)]);
      // The producer builds entry k once entry k − 3 has left its queue (at most two finished
      // entries wait); the streamer pops parts in order onto the link; the reader ingests a
      // part once it is in and the previous one is ingested.
      std::vector<double> popped;  // per entry: when its last part was popped
      double build_end = probe + P.rpc_latency_s + wire(req_bytes);
      double link_free = 0, reader = probe;
      for (size_t k = 0; k < jobs.size(); ++k) {
        const size_t j = size_t(jobs[k]);
        const double B = r.entry_bytes[j], span = cost[j] + B * P.serialize_s_per_byte;
        const double start = k >= 3 ? std::max(build_end, popped[k - 3]) : build_end;
        build += cost[j];
        double pop = 0;
        for (int p = 0; p < N; ++p) {
          pop = std::max(start + span * (p + 1) / N, link_free);
          link_free = pop + wire(B / N);
          reader = std::max(link_free, reader) + B / N * P.ingest_s_per_byte;
          present[j][size_t(p)] = reader;
        }
        popped.push_back(pop);
        build_end = start + span;
        r.bytes_total += B;
      }
      done = reader;
    }
    r.lane_done_s.push_back(done);
    r.lane_build_s.push_back(build);
  }
  r.all_present_s = r.lane_done_s.empty() ? 0.0 : *std::max_element(r.lane_done_s.begin(), r.lane_done_s.end());
  if (n == 0) r.all_present_s = 0;
  r.compose_s = P.compose_s;
  if (P.layers <= 1 || n == 0) {
    r.ttft_s = r.all_present_s + r.compose_s;
  } else {  // layer l is composed once every segment's part l is in and layer l − 1 is done
    double t = 0;
    for (int p = 0; p < N; ++p) {
      for (size_t j = 0; j < n; ++j) t = std::max(t, present[j][size_t(p)]);
      t += r.compose_s / N;
    }
    r.ttft_s = t;
  }
  return r;
}

}  // namespace hypic::cluster
