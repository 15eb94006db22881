// Pieces of `hypic bench scatter` (bench/scatter.cpp): the request's segment lengths,
// the `hypic worker` child processes, and the calibration that measures what the simulator
// (cluster/simulator.h) needs — per-segment build times on one worker lane, entry sizes, the
// link's bandwidth, the RPC round trip, and serialise / ingest costs per byte.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "core/status.h"
#include "cluster/balance.h"
#include "engine/tokenized_request.h"

namespace hypic::bench {

// `n` segment lengths summing to `total` (each >= min_len), in a random order (seed).
// skew: "0" or "1": equal; "zipf:S": weight 1/rank^S; a number F > 1: geometric from 1 to
// F (the longest is F times the shortest, before rounding and the minimum).
Result<std::vector<int64_t>> skewed_lengths(int64_t total, int n, const std::string& skew,
                                            int64_t min_len, uint32_t seed);

// `hypic worker` processes on ephemeral loopback ports, each with OMP_NUM_THREADS=threads.
// The destructor stops them (SIGTERM, then SIGKILL after 5 s).
class WorkerProcesses {
 public:
  WorkerProcesses() = default;
  ~WorkerProcesses();
  WorkerProcesses(const WorkerProcesses&) = delete;
  WorkerProcesses& operator=(const WorkerProcesses&) = delete;
  // Starts n workers and waits (up to timeout_s) until each has printed its address.
  Status start(const std::string& bin, const std::vector<std::string>& worker_args, int n,
               int threads, double timeout_s = 300);
  const std::vector<std::string>& addresses() const { return addresses_; }
  const std::vector<pid_t>& pids() const { return pids_; }

 private:
  std::string dir_;
  std::vector<pid_t> pids_;
  std::vector<std::string> addresses_;
};

// CPU seconds on this machine during an interval: all processes (/proc/stat) and ours (this
// process and `pids`), so a run can report how much of the machine others used meanwhile.
class CpuMeter {
 public:
  explicit CpuMeter(std::vector<pid_t> pids);
  double busy_s() const;  // all CPUs, since construction
  double ours_s() const;  // this process + pids, since construction
 private:
  static double machine_busy();
  double ours_now() const;
  std::vector<pid_t> pids_;
  double busy0_ = 0, ours0_ = 0;
};

struct Calibration {
  std::vector<cluster::CostSample> builds;  // per segment (request order): tokens, seconds
  std::vector<double> entry_bytes;       // per segment: serialised entry size
  double bandwidth_Bps = 0;              // entry bytes / seconds between first and last chunk
  double rpc_latency_s = 0;              // median GetStatus round trip
  double serialize_s_per_byte = 0;       // serialize_entry, this process
  double ingest_s_per_byte = 0;          // deserialize_entry + key check + store insert
  double entry_bytes_base = 0, entry_bytes_per_token = 0;  // least-squares e0 + e1·L
  double wall_s = 0;
};

// One Prefill of every segment of `req` (each long enough to have a body under its seam) on
// the worker at `address` (alone, so each build has the worker's threads to itself), timed
// chunk by chunk; entries are verified and ingested under the request's keys here after the
// stream ends, so reading is not slowed by ingesting.
Result<Calibration> calibrate(const Model& model, const std::string& address,
                              const TokenizedRequest& req, size_t max_message_bytes);

}  // namespace hypic::bench
