// hypic bench scatter: cold TTFT of one long request under segment parallelism (SPEC §5),
// measured with real `hypic worker` processes on this machine, and projected for more
// workers by the simulator (cluster/simulator.h) calibrated in the same run.
//
// Per run a fresh store. --compose after: TTFT = Scatter::prefill_segments (workers build,
// stream, the combine ingests) + Composer::prefill (composition forward) + the first token.
// --compose overlap (what `hypic serve` does): Scatter::start, then Composer::prefill from
// the arriving entries, composing layer l as soon as every segment's layer l is in; TTFT is
// its end, and `tail_s` = TTFT − when the last entry was complete. The single-instance
// baselines (0 in --workers) are Composer::prefill cold in hypic mode (at the lane's thread
// count and at --threads) and in full mode.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <random>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/bench_scatter_util.h"
#include "cli/commands.h"
#include "core/log.h"
#include "core/parallel.h"
#include "core/timer.h"
#include "cluster/scatter.h"
#include "cluster/simulator.h"
#include "engine/sampler.h"

namespace hypic::cli {
namespace {

using nlohmann::json;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : (v[(v.size() - 1) / 2] + v[v.size() / 2]) / 2;
}

template <typename T, typename F>
Result<std::vector<T>> parse_list(const std::string& s, F parse_one) {
  std::vector<T> out;
  std::string list = s + ",";
  for (size_t p = 0, q; (q = list.find(',', p)) != std::string::npos; p = q + 1) {
    T v;
    if (!parse_one(list.substr(p, q - p), &v)) return invalid_argument("bad list item in '" + s + "'");
    out.push_back(v);
  }
  return out;
}

struct Run {
  double ttft_s = 0, build_s = 0, compose_s = 0, predicted_s = 0;  // build_s: all entries in
  double others_cores = 0;  // mean cores other processes used during the run
  std::vector<double> lane_done_s;
  int first_token = -1, failures = 0;
};

json sim_json(const cluster::SimResult& r) {
  return {{"ttft_s", r.ttft_s}, {"all_present_s", r.all_present_s},
          {"planned_makespan_s", r.planned_makespan_s},
          {"lane_done_s", r.lane_done_s}, {"lane_build_s", r.lane_build_s}};
}

}  // namespace

int bench_scatter(int argc, char** argv) {
  Args a("hypic bench scatter --model DIR [--tokens N] [--segments S] [--skew F|zipf:S]\n"
         "                    [--workers 0,1,2] [--policies lpt,rr,contiguous] [--repeat R]",
         "Cold TTFT of one request of S segments (random token ids, lengths skewed by --skew) with\n"
         "`hypic worker` processes started here (0 in --workers: the single instance, hypic and\n"
         "full mode). Calibrates the simulator (per-segment build time on one worker lane, entry\n"
         "sizes, bandwidth, RPC latency, serialise/ingest per byte, compose) and projects 1..N\n"
         "workers for each policy. JSON on stdout, progress on stderr.");
  a.opt("model", "DIR", "model directory")
      .opt("tokens", "N", "request length (prefix 32 + segments + question 16)", "32768")
      .opt("segments", "S", "number of segments", "24")
      .opt("skew", "F|zipf:S", "segment lengths: factor longest/shortest, or Zipf exponent", "1")
      .opt("workers-bin", "PATH", "hypic binary for the workers", "/proc/self/exe")
      .opt("workers", "LIST", "worker counts to measure (0: single instance, no workers)", "0,1,2")
      .opt("policies", "LIST", "lpt, rr (round-robin), contiguous", "lpt,rr,contiguous")
      .opt("compose", "LIST", "overlap (compose as entries arrive, layer by layer), after (once all are in)",
           "overlap,after")
      .opt("repeat", "R", "measured runs per configuration (median reported)", "1")
      .opt("project-up-to", "N", "simulate 1..N workers", "16")
      .opt("lane-threads", "T", "OpenMP threads of each worker (the lane)", "1")
      .opt("threads", "T", "threads of this (combine) process; 0: all cores", "0")
      .opt("baselines", "LIST", "single-instance modes run for workers 0: hypic,full", "hypic,full")
      .opt("seam", "W", "seam width", "8")
      .opt("dtype", "bf16|f32", "compute type", "bf16")
      .opt("max-message", "MiB", "gRPC message limit (workers and combine)", "4")
      .opt("seed", "S", "request seed", "1");
  if (Status s = a.parse(argc, argv); !s) return report_error("bench scatter", s);
  if (a.help_requested()) return std::printf("%s", a.help().c_str()), 0;
  auto tokens = a.integer("tokens"), nseg = a.integer("segments"), repeat = a.integer("repeat");
  auto upto = a.integer("project-up-to"), lane_threads = a.integer("lane-threads");
  auto threads = a.integer("threads"), seam = a.integer("seam"), msg = a.integer("max-message");
  auto seed = a.integer("seed");
  auto dt = parse_dtype(a.str("dtype"));
  for (const Status* s : {&tokens.status(), &nseg.status(), &repeat.status(), &upto.status(),
                          &lane_threads.status(), &threads.status(), &seam.status(), &msg.status(),
                          &seed.status(), &dt.status()})
    if (!s->is_ok()) return report_error("bench scatter", *s);
  auto workers = parse_list<int>(a.str("workers"), [](const std::string& s, int* v) {
    char* e = nullptr;
    *v = int(std::strtol(s.c_str(), &e, 10));
    return !s.empty() && !*e && *v >= 0 && *v <= 64;
  });
  auto policies = parse_list<cluster::Policy>(a.str("policies"), [](const std::string& s, cluster::Policy* p) {
    return cluster::parse_policy(s == "rr" ? "round-robin" : s, p);
  });
  const std::string bl = std::string(",").append(a.str("baselines")).append(",");
  auto composes = parse_list<bool>(a.str("compose"), [](const std::string& s, bool* overlap) {
    *overlap = s == "overlap";
    return s == "overlap" || s == "after";
  });
  if (!workers || !policies || !composes || !a.has("model") || *nseg < 1 || *repeat < 1 || *upto < 1 ||
      *lane_threads < 1 || *threads < 0 || *seam < 0 || *msg < 1 || *msg > 1024 || policies->empty())
    return report_error("bench scatter", invalid_argument(
        "need --model DIR, --segments >= 1, --repeat >= 1, --project-up-to >= 1, --lane-threads >= 1, "
        "--workers as 0..64, --policies from lpt,rr,contiguous and --compose from overlap,after"));
  if (*threads > 0) set_num_threads(int(*threads));
  const int combine_threads = num_threads();
  const size_t max_message = size_t(*msg) << 20;

  LoadOptions lo;
  lo.compute = *dt;
  auto loaded = Model::load(a.str("model"), lo);
  if (!loaded) return report_error("bench scatter", loaded.status());
  const Model& model = **loaded;
  const int64_t vocab = model.config().vocab_size;

  // The request: a 32-token prefix, the segments, a 16-token question.
  std::mt19937 g{uint32_t(*seed)};
  auto ids = [&](int64_t n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = int32_t(g() % uint32_t(std::min<int64_t>(vocab, 1 << 30)));
    return t;
  };
  auto lengths = skewed_lengths(*tokens - 48, int(*nseg), a.str("skew"),
                                model.min_segment_tokens(int(*seam)), uint32_t(*seed));
  if (!lengths) return report_error("bench scatter", lengths.status());
  PromptParts parts;
  parts.prefix = ids(32);
  for (int64_t L : *lengths) parts.segments.push_back(ids(L));
  parts.suffix = ids(16);
  ComposeOptions co;
  co.mode = PicMode::kHypic;
  co.seam = int(*seam);

  const int max_workers = std::max(1, *std::max_element(workers->begin(), workers->end()));
  HYPIC_LOG_INFO("bench scatter: starting %d worker(s) with %lld thread(s) each", max_workers,
                 (long long)*lane_threads);
  WorkerProcesses procs;
  if (Status s = procs.start(a.str("workers-bin"),
                             {"--model", a.str("model"), "--dtype", a.str("dtype"), "--max-message",
                              std::to_string(*msg)},
                             max_workers, int(*lane_threads));
      !s)
    return report_error("bench scatter", s);

  HYPIC_LOG_INFO("bench scatter: calibrating on %s (every segment on one worker)",
                 procs.addresses()[0].c_str());
  // Other processes' CPU use over an interval, in cores (the machine may be shared).
  auto others = [&](const CpuMeter& m, double wall) { return (m.busy_s() - m.ours_s()) / wall; };
  const CpuMeter cal_cpu(procs.pids());
  auto cal = calibrate(model, procs.addresses()[0], parts, int(*seam), max_message);
  if (!cal) return report_error("bench scatter", cal.status());
  const double cal_others = others(cal_cpu, cal->wall_s);
  auto store_for_run = [] {
    SegmentStore::Options so;
    so.mem_budget_bytes = size_t(16) << 30;
    return std::shared_ptr<SegmentStore>(std::move(SegmentStore::open(so)).value());
  };
  // The cost model Scatter plans with once it has seen the calibration's builds.
  cluster::CostModel fitted;
  {
    cluster::Scatter planner(model, store_for_run(), cluster::ScatterOptions{});
    for (const cluster::CostSample& s : cal->builds) planner.add_sample(s.tokens, s.seconds);
    fitted = planner.cost_model();
  }
  double sq = 0, sum_build = 0;
  std::vector<double> actual;
  for (const cluster::CostSample& s : cal->builds) {
    sq += std::pow(fitted.seconds(s.tokens) - s.seconds, 2);
    sum_build += s.seconds;
    actual.push_back(s.seconds);
  }

  // Single instance (no workers), fresh store each run.
  json out;
  std::vector<double> base_compose;  // composition forward at the lane's threads
  auto single = [&](PicMode mode, int nthreads) -> Result<json> {
    set_num_threads(nthreads);
    std::vector<double> ttft, build, compose, other;
    int tok = -1;
    for (int64_t r = 0; r < *repeat; ++r) {
      auto store = store_for_run();
      Composer composer(model, store, nullptr);
      ComposeOptions o = co;
      o.mode = mode;
      SeqState st = model.new_state(parts.total_tokens() + 1);
      std::vector<float> logits;
      ComposeStats cs;
      const CpuMeter cpu(procs.pids());
      const Timer t;
      HYPIC_RETURN_IF_ERROR(composer.prefill(parts, o, &st, &logits, &cs));
      tok = argmax(logits.data(), vocab);
      ttft.push_back(t.seconds());
      other.push_back(others(cpu, ttft.back()));
      build.push_back(cs.build_ms / 1e3);
      compose.push_back(cs.prefill_ms / 1e3);
      HYPIC_LOG_INFO("bench scatter: single instance %s, %d thread(s): TTFT %.2f s (builds %.2f s), "
                     "others used %.2f cores", pic_mode_name(mode), nthreads, ttft.back(), build.back(),
                     other.back());
    }
    set_num_threads(combine_threads);
    if (mode == PicMode::kHypic && nthreads == int(*lane_threads)) base_compose = compose;
    return json{{"mode", pic_mode_name(mode)}, {"threads", nthreads}, {"ttft_s", ttft},
                {"ttft_median_s", median(ttft)}, {"build_s", median(build)},
                {"compose_s", median(compose)}, {"first_token", tok}, {"others_cores", other}};
  };
  out["single_instance"] = json::array();
  if (std::count(workers->begin(), workers->end(), 0)) {
    std::vector<std::pair<PicMode, int>> runs;
    if (bl.find(",hypic,") != std::string::npos) {
      runs.push_back({PicMode::kHypic, int(*lane_threads)});
      if (combine_threads != int(*lane_threads)) runs.push_back({PicMode::kHypic, combine_threads});
    }
    if (bl.find(",full,") != std::string::npos) runs.push_back({PicMode::kFull, combine_threads});
    for (const auto& [mode, nt] : runs) {
      auto j = single(mode, nt);
      if (!j) return report_error("bench scatter", j.status());
      out["single_instance"].push_back(*j);
    }
  }

  // Segment parallelism: w workers, no local lane (the combine only ingests and composes).
  struct Measured {
    int workers;
    cluster::Policy policy;
    bool overlap;
    std::vector<Run> runs;
  };
  std::vector<Measured> measured;
  std::vector<double> compose_all;  // composition forwards measured after every entry was in
  for (int w : *workers) {
    if (w == 0) continue;
    for (size_t pi = 0; pi < (w == 1 ? 1 : policies->size()); ++pi) {  // one lane: one plan
      for (bool overlap : *composes) {
        Measured m{w, (*policies)[pi], overlap, {}};
        for (int64_t r = 0; r < *repeat; ++r) {
          auto store = store_for_run();
          cluster::ScatterOptions so;
          so.workers.assign(procs.addresses().begin(), procs.addresses().begin() + w);
          so.local_lanes = 0;
          so.policy = m.policy;
          so.max_message_bytes = max_message;
          std::mutex mu;
          Run run;
          run.lane_done_s.assign(size_t(w), 0);
          Timer t;
          so.on_ingest = [&](int lane, int, bool) {
            std::lock_guard<std::mutex> l(mu);
            if (lane >= 0 && lane < w) run.lane_done_s[size_t(lane)] = t.seconds();
          };
          cluster::Scatter scatter(model, store, so);
          for (const cluster::CostSample& s : cal->builds) scatter.add_sample(s.tokens, s.seconds);
          cluster::ScatterStats ss;
          const CpuMeter cpu(procs.pids());
          Composer composer(model, store, nullptr);
          SeqState st = model.new_state(parts.total_tokens() + 1);
          std::vector<float> logits;
          ComposeStats cs;
          t.reset();  // the Scatter is built once per server: not part of the request
          if (overlap) {
            std::unique_ptr<cluster::ScatterCall> call = scatter.start(parts, co, nullptr, &ss);
            ComposeOptions ao = co;
            ao.arriving = &call->arriving();
            const Timer tc;
            const Status s = composer.prefill(parts, ao, &st, &logits, &cs);
            if (!s) return report_error("bench scatter", s);
            run.first_token = argmax(logits.data(), vocab);
            run.ttft_s = t.seconds();
            run.compose_s = tc.seconds();  // includes the waits for arriving layers
            auto pins = call->wait();
            if (!pins) return report_error("bench scatter", pins.status());
            run.build_s = *std::max_element(run.lane_done_s.begin(), run.lane_done_s.end());
            cs.segments_missed = 0;  // the arriving entries count as misses; none was built here
          } else {
            auto pins = scatter.prefill_segments(parts, co, nullptr, &ss);
            if (!pins) return report_error("bench scatter", pins.status());
            run.build_s = t.seconds();
            const Timer tc;
            if (Status s = composer.prefill(parts, co, &st, &logits, &cs); !s)
              return report_error("bench scatter", s);
            run.first_token = argmax(logits.data(), vocab);
            run.compose_s = tc.seconds();
            run.ttft_s = t.seconds();
            compose_all.push_back(run.compose_s);
          }
          run.others_cores = others(cpu, run.ttft_s);
          run.predicted_s = ss.predicted_makespan_s;
          run.failures = ss.worker_failures + ss.corrupt + cs.segments_missed;
          HYPIC_LOG_INFO("bench scatter: %d worker(s), %s, compose %s: TTFT %.2f s (entries in at %.2f s, "
                         "then %.2f s), others used %.2f cores%s", w, cluster::policy_name(m.policy),
                         overlap ? "overlapped" : "after", run.ttft_s, run.build_s, run.ttft_s - run.build_s,
                         run.others_cores, run.failures ? " WITH FAILURES" : "");
          m.runs.push_back(run);
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
  P.layers = std::count(composes->begin(), composes->end(), true) ? layers : 1;

  out["request"] = {{"tokens", parts.total_tokens()}, {"segments", *nseg}, {"skew", a.str("skew")},
                    {"lengths", *lengths}, {"seam", *seam}, {"dtype", a.str("dtype")},
                    {"lane_threads", *lane_threads}, {"combine_threads", combine_threads},
                    {"repeat", *repeat}};
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

  // Simulated against measured: with the fitted cost model and with the calibration's own
  // per-segment times (what the builds took on one lane alone).
  out["measured"] = json::array();
  for (const Measured& m : measured) {
    std::vector<double> ttft, build, compose, other, tail;
    for (const Run& r : m.runs) {
      ttft.push_back(r.ttft_s), build.push_back(r.build_s), compose.push_back(r.compose_s);
      other.push_back(r.others_cores), tail.push_back(r.ttft_s - r.build_s);
    }
    cluster::SimParams Pm = P;
    Pm.layers = m.overlap ? layers : 1;
    if (!m.overlap) Pm.compose_s = median(compose);  // this run's own composition
    const cluster::SimConfig cfg{m.workers, 0, m.policy};
    const auto sim = cluster::simulate(Pm, cfg, *lengths);
    const auto sim_actual = cluster::simulate(Pm, cfg, *lengths, &actual);
    const double got = median(ttft);
    int failures = 0;
    for (const Run& r : m.runs) failures += r.failures;
    out["measured"].push_back({{"workers", m.workers},
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
                               {"sim_actual_error", sim_actual.ttft_s / got - 1}});
  }
  for (json& b : out["single_instance"]) {  // one lane, same threads: the simulator's 0 workers
    if (b["mode"] != "hypic" || b["threads"] != *lane_threads) continue;
    cluster::SimParams Pb = P;
    Pb.compose_s = b["compose_s"].get<double>();
    Pb.layers = 1;  // a single instance builds, then composes
    const auto sim = cluster::simulate(Pb, {0, 1, cluster::Policy::kLpt}, *lengths, &actual);
    b["sim_actual_builds_ttft_s"] = sim.ttft_s;
    b["sim_actual_error"] = sim.ttft_s / b["ttft_median_s"].get<double>() - 1;
  }

  // Projection for 1..N workers: the fitted cost model, this run's link and compose.
  out["projection"] = json::object();
  cluster::SimParams P1 = P;  // the single instance: build, then compose
  P1.layers = 1;
  const double one = cluster::simulate(P1, {0, 1, cluster::Policy::kLpt}, *lengths).ttft_s;
  out["projection"]["single_lane_ttft_s"] = one;
  out["projection"]["compose"] = P.layers > 1 ? "overlap" : "after";
  for (cluster::Policy pol : *policies) {
    json rows = json::array();
    for (int w = 1; w <= int(*upto); ++w) {
      const auto r = cluster::simulate(P, {w, 0, pol}, *lengths);
      const double busiest = *std::max_element(r.lane_build_s.begin(), r.lane_build_s.end());
      rows.push_back({{"workers", w}, {"ttft_s", r.ttft_s}, {"all_present_s", r.all_present_s},
                      {"busiest_lane_build_s", busiest}, {"speedup_vs_single_lane", one / r.ttft_s}});
    }
    out["projection"][cluster::policy_name(pol)] = rows;
  }
  // The same tokens in equal segments (LPT), for comparison with an unskewed request.
  std::vector<int64_t> equal(lengths->size(), 0);
  for (size_t i = 0; i < equal.size(); ++i)
    equal[i] = (*tokens - 48) / int64_t(equal.size()) + (int64_t(i) < (*tokens - 48) % int64_t(equal.size()));
  json rows = json::array();
  const double one_eq = cluster::simulate(P1, {0, 1, cluster::Policy::kLpt}, equal).ttft_s;
  for (int w = 1; w <= int(*upto); ++w) {
    const double t = cluster::simulate(P, {w, 0, cluster::Policy::kLpt}, equal).ttft_s;
    rows.push_back({{"workers", w}, {"ttft_s", t}, {"speedup_vs_single_lane", one_eq / t}});
  }
  out["projection"]["equal_lengths_lpt"] = rows;
  out["projection"]["equal_lengths_single_lane_ttft_s"] = one_eq;
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace hypic::cli
