// A discrete-event projection of a request's cold TTFT under segment parallelism (SPEC §5),
// following what cluster/scatter.cpp and cluster/worker.cpp do, for what-if numbers of workers
// this machine does not have. Pure function: no threads, no clock.
//
// What is modelled (times from the request's start, t = 0):
//   * Plan: cluster::assign(policy) over the remote workers then the local lanes, with the
//     costs predicted by `plan_cost` (what Scatter plans with), all lanes idle.
//   * Start: a status probe (one RPC round trip, if query_load and any worker), then each
//     worker's Prefill call (one round trip plus its tokens over the link) — in parallel.
//   * Entries travel in `layers` parts (one per decoder layer; 1: whole entries), each part
//     1/layers of the entry's bytes and of its build + serialisation time. A worker builds
//     its segments in plan order, one at a time (build_mu), serialising each part as the
//     build finishes its layer and queueing it for its streaming thread; before building
//     entry k it waits until entry k − 3 has left the queue (at most two finished entries
//     wait). The streamer sends parts one after another at `bandwidth_Bps` (the worker's
//     own link).
//   * The combine worker reads each worker's stream on one thread per worker and ingests a
//     part (deserialise + checksum + checks + placing: bytes × ingest_s_per_byte) once its
//     last chunk is in, before reading on.
//   * A local lane builds its segments in order in the combine process (no serialise, no
//     transfer); its parts appear as the build passes each layer. With no lane at all the
//     calling thread builds everything (Scatter's fallback lane).
//   * Compose (`compose_s`: composition forward over prefix, seams and suffix + the first
//     token, the same in every layout). layers = 1: it starts when every entry is in
//     (all_present_s). layers > 1: layer l is composed (compose_s / layers) once layer l − 1
//     is and every segment's part l is in — Composer::prefill with ComposeOptions::arriving,
//     except that it waits piece by piece (the pieces before a missing segment's go ahead),
//     so this is slightly pessimistic.
// Not modelled: failures and rescheduling, CPU shared between processes on one machine
// (each worker is assumed to have its own cores), HTTP/2 flow-control stalls beyond the
// ingest dependency, the Finish() round trip.
#pragma once

#include <cstdint>
#include <vector>

#include "cluster/balance.h"

namespace hypic::cluster {

struct SimParams {
  CostModel cost;       // seconds of one lane's build of an L-token segment
  CostModel plan_cost;  // what the planner predicts with (usually = cost)
  double entry_bytes_base = 0, entry_bytes_per_token = 0;  // serialised entry: e0 + e1·L
  double bandwidth_Bps = 0;         // per-worker link, bytes/s (<= 0: infinite)
  double rpc_latency_s = 0;         // one RPC round trip (status probe, Prefill call)
  double serialize_s_per_byte = 0;  // worker: serialize_entry
  double ingest_s_per_byte = 0;     // combine: deserialize_entry + verify + insert
  double compose_s = 0;             // combine: composition forward + first token
  double request_bytes_per_token = 4;  // token ids in the Prefill request
  bool query_load = true;           // Scatter's GetStatus probe before planning
  int layers = 1;  // parts per entry and composition steps (decoder layers; 1: whole entries)
};

struct SimConfig {
  int workers = 0;      // remote scatter workers
  int local_lanes = 0;  // lanes building inside the combine process
  Policy policy = Policy::kLpt;
};

struct SimResult {
  double ttft_s = 0;         // layers = 1: all_present_s + compose_s
  double all_present_s = 0;  // every entry in the combine's store (prefill_segments returns)
  double compose_s = 0;
  double planned_makespan_s = 0;  // the planner's projection (predicted costs, builds only)
  std::vector<int> lane_of;       // per segment: its lane (workers first, then local lanes)
  std::vector<double> lane_done_s;   // per lane: when its last entry is ingested / built
  std::vector<double> lane_build_s;  // per lane: seconds of building (actual costs)
  std::vector<double> entry_bytes;   // per segment
  double bytes_total = 0;            // sent over the links
};

// `lengths`: tokens of each cold segment, in request order. `actual_s` (optional, one per
// segment): the builds' real seconds, used for execution instead of params.cost — e.g.
// measured times, to check the simulator against a run that planned with a fitted model.
SimResult simulate(const SimParams& params, const SimConfig& config,
                   const std::vector<int64_t>& lengths,
                   const std::vector<double>* actual_s = nullptr);

}  // namespace hypic::cluster
