// hypic bench scatter: cold TTFT under segment parallelism, measured with `hypic worker`
// processes and simulated (bench/scatter.h).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/scatter.h"
#include "cli/args.h"
#include "cli/commands.h"

namespace hypic::cli {
namespace {

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

}  // namespace

int bench_scatter(int argc, char** argv) {
  Args a("hypic bench scatter --model DIR [--tokens N] [--segments S] [--skew F|zipf:S]\n"
         "                    [--workers 0,1,2] [--policies lpt,rr,contiguous] [--repeat R]",
         "Cold TTFT of one request of S segments (random token ids, lengths skewed by --skew) with\n"
         "`hypic worker` processes started here (0 in --workers: the single instance, hypic and\n"
         "full mode). Calibrates the simulator (per-segment build time on one worker lane, entry\n"
         "sizes, bandwidth, RPC latency, serialise/ingest per byte, compose) and projects 1..N\n"
         "workers for each policy. JSON on stdout, progress on stderr.");
  a.opt("model", "DIR|FILE.gguf", "model directory (Hugging Face), or a GGUF file (llama.cpp's; a split: its first part)")
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
      .opt("dtype", kDtypeValues, kDtypeHelp, "bf16")
      .opt("max-message", "MiB", "gRPC message limit (workers and combine)", "4")
      .opt("seed", "S", "request seed", "1");
  if (auto done = parse_command(a, argc, argv, "bench scatter")) return *done;
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
  bench::ScatterBenchOptions o;
  o.model = a.str("model");
  o.tokens = *tokens;
  o.segments = int(*nseg);
  o.skew = a.str("skew");
  o.workers_bin = a.str("workers-bin");
  o.workers = *workers;
  o.policies = *policies;
  o.composes = *composes;
  o.repeat = int(*repeat);
  o.project_up_to = int(*upto);
  o.lane_threads = int(*lane_threads);
  o.threads = int(*threads);
  o.baseline_hypic = bl.find(",hypic,") != std::string::npos;
  o.baseline_full = bl.find(",full,") != std::string::npos;
  o.seam = int(*seam);
  o.dtype = *dt;
  o.dtype_label = a.str("dtype");
  o.max_message_mib = int(*msg);
  o.seed = uint32_t(*seed);
  auto out = bench::bench_scatter(o);
  if (!out) return report_error("bench scatter", out.status());
  print_bench_json(*out);
  return 0;
}

}  // namespace hypic::cli
