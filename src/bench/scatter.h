// hypic bench scatter: cold TTFT of one long request under segment parallelism (SPEC §5),
// measured with real `hypic worker` processes on this machine, and projected for more
// workers by the simulator (cluster/simulator.h) calibrated in the same run.
//
// The request is keyed once (make_request) and every run sends it. Per run a fresh store.
// Composition after: TTFT = Scatter::prefill_segments (workers build, stream, the combine
// ingests) + Runner::prefill from the stored entries (composition forward) + the first token.
// Overlapped composition (what `hypic serve` does): Runner::prefill with the Scatter as its
// builder, composing from the arriving entries layer l as soon as every segment's layer l is
// in; TTFT is its end (the builds joined), and `tail_s` = TTFT − when the last entry was
// complete. The single-instance baselines (0 in `workers`) are Runner::prefill cold in hypic
// mode (at the lane's thread count and at the combine's) and in full mode.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/balance.h"
#include "core/dtype.h"
#include "core/status.h"

namespace hypic::bench {

struct ScatterBenchOptions {
  std::string model;                        // model directory
  int64_t tokens = 32768;                   // request length: prefix 32 + segments + question 16
  int segments = 24;                        // >= 1
  std::string skew = "1";                   // segment lengths (skewed_lengths, scatter_util.h)
  std::string workers_bin = "/proc/self/exe";  // hypic binary for the workers
  std::vector<int> workers = {0, 1, 2};     // worker counts to measure (0: single instance)
  std::vector<cluster::Policy> policies;    // non-empty; with 1 worker only the first runs
  std::vector<bool> composes;               // per entry: true overlap, false after
  int repeat = 1;                           // measured runs per configuration (median), >= 1
  int project_up_to = 16;                   // simulate 1..N workers, >= 1
  int lane_threads = 1;                     // OpenMP threads of each worker, >= 1
  int threads = 0;                          // of this (combine) process; 0: all cores
  bool baseline_hypic = true, baseline_full = true;  // single-instance modes for 0 workers
  int seam = 8;                             // >= 0
  DType dtype = DType::kBF16;               // compute type
  std::string dtype_label = "bf16";         // reported as "dtype" and given to the workers
  int max_message_mib = 4;                  // gRPC message limit, in [1, 1024]
  uint32_t seed = 1;                        // the request
};

// Keys: single_instance (per baseline run), request, calibration, measured (per worker
// count, policy and composition: measured and simulated), projection (1..N workers per
// policy, and equal segment lengths with LPT). Progress goes to the log.
Result<nlohmann::json> bench_scatter(const ScatterBenchOptions& o);

}  // namespace hypic::bench
