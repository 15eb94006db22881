#include "bench/scatter.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <random>

#include "bench/forward.h"
#include "bench/scatter_util.h"
#include "cluster/scatter.h"
#include "cluster/simulator.h"
#include "core/log.h"
#include "core/parallel.h"
#include "core/timer.h"
#include "engine/runner.h"
#include "engine/sampler.h"

namespace hypic::bench {
namespace {

using nlohmann::json;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : (v[(v.size() - 1) / 2] + v[v.size() / 2]) / 2;
}

// What every measured run shares.
struct Setup {
  const ScatterBenchOptions* o = nullptr;
  const Model* model = nullptr;
  TokenizedRequest req;                     // keyed once: every run sends this request
  ComposeOptions co;                        // hypic mode at the seam
  const WorkerProcesses* procs = nullptr;
  std::vector<cluster::CostSample> builds;  // the calibration's, for Scatter's cost model
  int combine_threads = 0;
  size_t max_message = 0;
};

// Other processes' CPU use over an interval, in cores (the machine may be shared).
double others(const CpuMeter& m, double wall) { return (m.busy_s() - m.ours_s()) / wall; }

std::shared_ptr<SegmentStore> store_for_run() {
  SegmentStore::Options so;
  so.mem_budget_bytes = size_t(16) << 30;
  return std::shared_ptr<SegmentStore>(std::move(SegmentStore::open(so)).value());
}

json sim_json(const cluster::SimResult& r) {
  return {{"ttft_s", r.ttft_s}, {"all_present_s", r.all_present_s},
          {"planned_makespan_s", r.planned_makespan_s},
          {"lane_done_s", r.lane_done_s}, {"lane_build_s", r.lane_build_s}};
}

// The Runner's builder in a measured run: the Scatter, the call's ScatterStats (plan,
// failures) kept by the run instead of the call.
class StatsKeepingBuilder final : public SegmentBuilder {
 public:
  StatsKeepingBuilder(cluster::Scatter& scatter, cluster::ScatterStats* stats)
      : scatter_(scatter), stats_(stats) {}
  std::unique_ptr<BuildCall> start(const TokenizedRequest& req, const ComposeOptions& opt,
                                   const std::vector<std::string>* workers) override {
    return scatter_.start(req, opt, nullptr, stats_, workers);
  }

 private:
  cluster::Scatter& scatter_;
  cluster::ScatterStats* stats_;
};

// Lookups and the composition forward (its waits for arriving layers included).
double compose_seconds(const ComposeStats& cs) { return (cs.build_ms + cs.prefill_ms) / 1e3; }

// The single instance (no workers): Runner::prefill, fresh store each run; `compose` gets the
// composition forwards' times.
Result<json> single_instance(const Setup& s, PicMode mode, int nthreads, std::vector<double>* compose) {
  const Model& model = *s.model;
  const int64_t vocab = model.config().vocab_size;
  set_num_threads(nthreads);
  std::vector<double> ttft, build, other;
  int tok = -1;
  for (int r = 0; r < s.o->repeat; ++r) {
    const Runner runner(model, store_for_run(), nullptr);
    RunOptions ro;
    ro.compose = s.co;
    ro.compose.mode = mode;
    const CpuMeter cpu(s.procs->pids());
    const Timer t;
    HYPIC_ASSIGN_OR_RETURN(const Prefilled done, runner.prefill(s.req, ro));
    tok = argmax(done.logits.data(), vocab);
    const ComposeStats& cs = done.figures.compose;
    ttft.push_back(t.seconds());
    other.push_back(others(cpu, ttft.back()));
    build.push_back(cs.build_ms / 1e3);
    compose->push_back(cs.prefill_ms / 1e3);
    HYPIC_LOG_INFO("bench scatter: single instance %s, %d thread(s): TTFT %.2f s (builds %.2f s), "
                   "others used %.2f cores", pic_mode_name(mode), nthreads, ttft.back(), build.back(),
                   other.back());
  }
  set_num_threads(s.combine_threads);
  return json{{"mode", pic_mode_name(mode)}, {"threads", nthreads}, {"ttft_s", ttft},
              {"ttft_median_s", median(ttft)}, {"build_s", median(build)},
              {"compose_s", median(*compose)}, {"first_token", tok}, {"others_cores", other}};
}

struct Run {
  double ttft_s = 0, build_s = 0, compose_s = 0, predicted_s = 0;  // build_s: all entries in
  double others_cores = 0;  // mean cores other processes used during the run
  std::vector<double> lane_done_s;
  int first_token = -1, failures = 0;
};

// Segment parallelism: w workers, no local lane (the combine only ingests and composes).
struct Measured {
  int workers;
  cluster::Policy policy;
  bool overlap;
  std::vector<Run> runs;
};

// One run with the first w workers, through the Runner with the Scatter as its builder:
// overlapped, Runner::prefill builds beside the composition (as `hypic serve` does); after,
// Scatter::prefill_segments, then Runner::prefill from the store (its composition time is
// added to `compose_after`).
Result<Run> scatter_run(const Setup& s, const Measured& m, std::vector<double>* compose_after) {
  const Model& model = *s.model;
  const int64_t vocab = model.config().vocab_size;
  const int w = m.workers;
  auto store = store_for_run();
  cluster::ScatterOptions so;
  so.workers.assign(s.procs->addresses().begin(), s.procs->addresses().begin() + w);
  so.local_lanes = 0;
  so.policy = m.policy;
  so.max_message_bytes = s.max_message;
  std::mutex mu;
  Run run;
  run.lane_done_s.assign(size_t(w), 0);
  Timer t;
  so.on_ingest = [&](int lane, int, bool) {
    std::lock_guard<std::mutex> l(mu);
    if (lane >= 0 && lane < w) run.lane_done_s[size_t(lane)] = t.seconds();
  };
  cluster::Scatter scatter(model, store, so);
  for (const cluster::CostSample& c : s.builds) scatter.add_sample(c.tokens, c.seconds);
  cluster::ScatterStats ss;
  StatsKeepingBuilder builder(scatter, &ss);
  const Runner runner(model, store, nullptr, &builder);
  RunOptions ro;
  ro.compose = s.co;
  ro.parallel = m.overlap;
  const CpuMeter cpu(s.procs->pids());
  t.reset();  // the Scatter and the Runner are built once per server: not part of the request
  std::vector<SegmentStore::Pin> pins;  // after: the stored entries, held across the composition
  if (!m.overlap) {
    HYPIC_ASSIGN_OR_RETURN(pins, scatter.prefill_segments(s.req, s.co, nullptr, &ss));
    run.build_s = t.seconds();
  }
  HYPIC_ASSIGN_OR_RETURN(const Prefilled done, runner.prefill(s.req, ro));
  run.first_token = argmax(done.logits.data(), vocab);
  run.ttft_s = t.seconds();
  ComposeStats cs = done.figures.compose;
  run.compose_s = compose_seconds(cs);
  if (m.overlap) {
    run.build_s = *std::max_element(run.lane_done_s.begin(), run.lane_done_s.end());
    cs.segments_missed = 0;  // the arriving entries count as misses; none was built here
  } else {
    compose_after->push_back(run.compose_s);
  }
  run.others_cores = others(cpu, run.ttft_s);
  run.predicted_s = ss.predicted_makespan_s;
  run.failures = ss.worker_failures + ss.corrupt + cs.segments_missed;
  HYPIC_LOG_INFO("bench scatter: %d worker(s), %s, compose %s: TTFT %.2f s (entries in at %.2f s, "
                 "then %.2f s), others used %.2f cores%s", w, cluster::policy_name(m.policy),
                 m.overlap ? "overlapped" : "after", run.ttft_s, run.build_s, run.ttft_s - run.build_s,
                 run.others_cores, run.failures ? " WITH FAILURES" : "");
  return run;
}

// Simulated against measured: with the fitted cost model and with the calibration's own
// per-segment times `actual` (what the builds took on one lane alone).
json measured_json(const Measured& m, const cluster::SimParams& P, int layers,
                   const std::vector<int64_t>& lengths, const std::vector<double>& actual) {
  std::vector<double> ttft, build, compose, other, tail;
  for (const Run& r : m.runs) {
    ttft.push_back(r.ttft_s), build.push_back(r.build_s), compose.push_back(r.compose_s);
    other.push_back(r.others_cores), tail.push_back(r.ttft_s - r.build_s);
  }
  cluster::SimParams Pm = P;
  Pm.layers = m.overlap ? layers : 1;
  if (!m.overlap) Pm.compose_s = median(compose);  // this run's own composition
  const cluster::SimConfig cfg{m.workers, 0, m.policy};
  const auto sim = cluster::simulate(Pm, cfg, lengths);
  const auto sim_actual = cluster::simulate(Pm, cfg, lengths, &actual);
  const double got = median(ttft);
  int failures = 0;
  for (const Run& r : m.runs) failures += r.failures;
  return {{"workers", m.workers},
          {"policy", m.workers == 1 ? "any" : cluster::policy_name(m.policy)},
          {"compose", m.overlap ? "overlap" : "after"},
          {"ttft_s", ttft},
          {"ttft_median_s", got},
          {"entries_s", median(build)},
          {"compose_s", median(compose)},
          {"tail_s", median(tail)},
          {"lane_done_s", m.runs.back().lane_done_s},
          {"planned_makespan_s", m.runs.back().predicted_s},
          {"first_token", m.runs.back().first_token},
          {"failures", failures},
          {"others_cores", other},
          {"sim", sim_json(sim)},
          {"sim_actual_builds", sim_json(sim_actual)},
          {"sim_error", sim.ttft_s / got - 1},
          {"sim_actual_error", sim_actual.ttft_s / got - 1}};
}

// Projection for 1..N workers: the fitted cost model, this run's link and compose; and the
// same tokens in equal segments (LPT), for comparison with an unskewed request.
json projection_json(const ScatterBenchOptions& o, const cluster::SimParams& P,
                     const std::vector<int64_t>& lengths) {
  json out = json::object();
  cluster::SimParams P1 = P;  // the single instance: build, then compose
  P1.layers = 1;
  const double one = cluster::simulate(P1, {0, 1, cluster::Policy::kLpt}, lengths).ttft_s;
  out["single_lane_ttft_s"] = one;
  out["compose"] = P.layers > 1 ? "overlap" : "after";
  for (cluster::Policy pol : o.policies) {
    json rows = json::array();
    for (int w = 1; w <= o.project_up_to; ++w) {
      const auto r = cluster::simulate(P, {w, 0, pol}, lengths);
      const double busiest = *std::max_element(r.lane_build_s.begin(), r.lane_build_s.end());
      rows.push_back({{"workers", w}, {"ttft_s", r.ttft_s}, {"all_present_s", r.all_present_s},
                      {"busiest_lane_build_s", busiest}, {"speedup_vs_single_lane", one / r.ttft_s}});
    }
    out[cluster::policy_name(pol)] = rows;
  }
  const int64_t body = o.tokens - 48;
  std::vector<int64_t> equal(lengths.size(), 0);
  for (size_t i = 0; i < equal.size(); ++i)
    equal[i] = body / int64_t(equal.size()) + (int64_t(i) < body % int64_t(equal.size()));
  json rows = json::array();
  const double one_eq = cluster::simulate(P1, {0, 1, cluster::Policy::kLpt}, equal).ttft_s;
  for (int w = 1; w <= o.project_up_to; ++w) {
    const double t = cluster::simulate(P, {w, 0, cluster::Policy::kLpt}, equal).ttft_s;
    rows.push_back({{"workers", w}, {"ttft_s", t}, {"speedup_vs_single_lane", one_eq / t}});
  }
  out["equal_lengths_lpt"] = rows;
  out["equal_lengths_single_lane_ttft_s"] = one_eq;
  return out;
}

}  // namespace

Result<json> bench_scatter(const ScatterBenchOptions& o) {
  if (o.threads > 0) set_num_threads(o.threads);
  Setup s;
  s.o = &o;
  s.combine_threads = num_threads();
  s.max_message = size_t(o.max_message_mib) << 20;

  LoadOptions lo;
  lo.compute = o.dtype;
  auto loaded = Model::load(o.model, lo);
  if (!loaded) return loaded.status();
  const Model& model = **loaded;
  s.model = &model;

  // The request: a 32-token prefix, the segments, a 16-token question.
  std::mt19937 g{o.seed};
  const int64_t vocab = model.config().vocab_size;
  auto lengths = skewed_lengths(o.tokens - 48, o.segments, o.skew, model.min_segment_tokens(o.seam), o.seed);
  if (!lengths) return lengths.status();
  PromptParts parts;
  parts.prefix = random_tokens(g, 32, vocab);
  for (int64_t L : *lengths) parts.segments.push_back(random_tokens(g, L, vocab));
  parts.suffix = random_tokens(g, 16, vocab);
  s.req = make_request(model, std::move(parts), o.seam, "");
  s.co.mode = PicMode::kHypic;
  s.co.seam = o.seam;

  const int max_workers = std::max(1, *std::max_element(o.workers.begin(), o.workers.end()));
  HYPIC_LOG_INFO("bench scatter: starting %d worker(s) with %d thread(s) each", max_workers, o.lane_threads);
  WorkerProcesses procs;
  HYPIC_RETURN_IF_ERROR(procs.start(o.workers_bin,
                                    {"--model", o.model, "--dtype", o.dtype_label, "--max-message",
                                     std::to_string(o.max_message_mib)},
                                    max_workers, o.lane_threads));
  s.procs = &procs;

  HYPIC_LOG_INFO("bench scatter: calibrating on %s (every segment on one worker)",
                 procs.addresses()[0].c_str());
  const CpuMeter cal_cpu(procs.pids());
  auto cal = calibrate(model, procs.addresses()[0], s.req, s.max_message);
  if (!cal) return cal.status();
  const double cal_others = others(cal_cpu, cal->wall_s);
  s.builds = cal->builds;
  // The cost model Scatter plans with once it has seen the calibration's builds.
  cluster::CostModel fitted;
  {
    cluster::Scatter planner(model, store_for_run(), cluster::ScatterOptions{});
    for (const cluster::CostSample& c : cal->builds) planner.add_sample(c.tokens, c.seconds);
    fitted = planner.cost_model();
  }
  double sq = 0, sum_build = 0;
  std::vector<double> actual;
  for (const cluster::CostSample& c : cal->builds) {
    sq += std::pow(fitted.seconds(c.tokens) - c.seconds, 2);
    sum_build += c.seconds;
    actual.push_back(c.seconds);
  }

  json out;
  std::vector<double> base_compose;  // composition forward at the lane's threads
  out["single_instance"] = json::array();
  if (std::count(o.workers.begin(), o.workers.end(), 0)) {
    std::vector<std::pair<PicMode, int>> runs;
    if (o.baseline_hypic) {
      runs.push_back({PicMode::kHypic, o.lane_threads});
      if (s.combine_threads != o.lane_threads) runs.push_back({PicMode::kHypic, s.combine_threads});
    }
    if (o.baseline_full) runs.push_back({PicMode::kFull, s.combine_threads});
    for (const auto& [mode, nt] : runs) {
      std::vector<double> compose;
      auto j = single_instance(s, mode, nt, &compose);
      if (!j) return j.status();
      if (mode == PicMode::kHypic && nt == o.lane_threads) base_compose = compose;
      out["single_instance"].push_back(*j);
    }
  }

  std::vector<Measured> measured;
  std::vector<double> compose_all;  // composition forwards measured after every entry was in
  for (int w : o.workers) {
    if (w == 0) continue;
    for (size_t pi = 0; pi < (w == 1 ? 1 : o.policies.size()); ++pi) {  // one lane: one plan
      for (bool overlap : o.composes) {
        Measured m{w, o.policies[pi], overlap, {}};
        for (int r = 0; r < o.repeat; ++r) {
          auto run = scatter_run(s, m, &compose_all);
          if (!run) return run.status();
          m.runs.push_back(*run);
        }
        measured.push_back(std::move(m));
      }
    }
  }

  // The simulator, calibrated by this run.
  cluster::SimParams P;
  P.cost = P.plan_cost = fitted;
  P.entry_bytes_base = cal->entry_bytes_base;
  P.entry_bytes_per_token = cal->entry_bytes_per_token;
  P.bandwidth_Bps = cal->bandwidth_Bps;
  P.rpc_latency_s = cal->rpc_latency_s;
  P.serialize_s_per_byte = cal->serialize_s_per_byte;
  P.ingest_s_per_byte = cal->ingest_s_per_byte;
  P.compose_s = !compose_all.empty() ? median(compose_all) : median(base_compose);
  // Projections follow what the server does: overlapped composition when it was measured.
  const int layers = model.config().num_hidden_layers;
  P.layers = std::count(o.composes.begin(), o.composes.end(), true) ? layers : 1;

  out["request"] = {{"tokens", s.req.total_tokens()}, {"segments", o.segments}, {"skew", o.skew},
                    {"lengths", *lengths}, {"seam", o.seam}, {"dtype", o.dtype_label},
                    {"lane_threads", o.lane_threads}, {"combine_threads", s.combine_threads},
                    {"repeat", o.repeat}};
  out["calibration"] = {
      {"build_s", actual},
      {"entry_bytes", cal->entry_bytes},
      {"sum_build_s", sum_build},
      {"cost_model", {{"a", fitted.a}, {"b", fitted.b}, {"c", fitted.c}}},
      {"cost_model_rms_error_s", std::sqrt(sq / double(actual.size()))},
      {"entry_bytes_model", {{"base", cal->entry_bytes_base}, {"per_token", cal->entry_bytes_per_token}}},
      {"bandwidth_MBps", cal->bandwidth_Bps / 1e6},
      {"rpc_latency_ms", cal->rpc_latency_s * 1e3},
      {"serialize_ns_per_byte", cal->serialize_s_per_byte * 1e9},
      {"ingest_ns_per_byte", cal->ingest_s_per_byte * 1e9},
      {"compose_s", P.compose_s},
      {"wall_s", cal->wall_s},
      {"others_cores", cal_others}};

  out["measured"] = json::array();
  for (const Measured& m : measured) out["measured"].push_back(measured_json(m, P, layers, *lengths, actual));
  for (json& b : out["single_instance"]) {  // one lane, same threads: the simulator's 0 workers
    if (b["mode"] != "hypic" || b["threads"] != o.lane_threads) continue;
    cluster::SimParams Pb = P;
    Pb.compose_s = b["compose_s"].get<double>();
    Pb.layers = 1;  // a single instance builds, then composes
    const auto sim = cluster::simulate(Pb, {0, 1, cluster::Policy::kLpt}, *lengths, &actual);
    b["sim_actual_builds_ttft_s"] = sim.ttft_s;
    b["sim_actual_error"] = sim.ttft_s / b["ttft_median_s"].get<double>() - 1;
  }
  out["projection"] = projection_json(o, P, *lengths);
  return out;
}

}  // namespace hypic::bench
