// The combine worker's side of segment parallelism (SPEC §5). For a request's cold
// segments, Scatter assigns them to lanes — remote scatter workers (cluster/worker.h, by
// address) and m local lanes building in-process — sends each worker one streaming Prefill
// with a deadline, and ingests entries layer by layer as they arrive (verify each layer,
// place it, and once an entry is complete SegmentStore::insert). start() returns at once:
// its arriving() entries go to Composer::prefill (ComposeOptions::arriving), which composes
// layer l as soon as every segment's layer l is in, so composition overlaps the builds and
// the transfers instead of waiting for the last entry; prefill_segments() is start + wait.
// Scatter is the engine's SegmentBuilder (engine/segment_builder.h): the Runner drives it.
//
// Faults: a worker that is unreachable, errs, misses its deadline, breaks the stream
// protocol or disconnects has its unfinished segments rescheduled onto the local lanes; a
// layer that fails verification (structure, checksum, key, seam, tokens, this model's
// shapes) gets its segment rejected and rebuilt locally. Layers already placed are kept (a
// rebuild recomputes the same bits: builds are deterministic) and the rebuild fills the
// rest. So a call completes with every entry present unless a local build itself fails or
// the caller cancels; then arriving() gates fail with that error.
//
// Bounds: every RPC has a deadline = floor + slack × the lane's projected finish (cost
// model); messages are at most max_message_bytes; a layer claiming more than
// max_entry_bytes is a protocol error.
//
// Threading: one Scatter may serve many requests at once; start() and prefill_segments()
// are safe from any number of threads. All locking of the cluster client is in this class:
// each call has its own state under its own mutex, and the cost samples are under the
// Scatter's mutex. gRPC channels are created once per address (on first use) and shared
// (they are thread-safe). A call uses one thread per remote lane and per local lane (the
// fallback lane included) and a cancellation watcher.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cache/segment_store.h"
#include "cluster/balance.h"
#include "engine/compose.h"
#include "engine/segment_builder.h"
#include "engine/tokenized_request.h"
#include "model/model.h"
#include "rpc/credentials.h"

namespace hypic::cluster {

struct ScatterOptions {
  std::vector<std::string> workers;  // "host:port" of each scatter worker
  int local_lanes = 1;               // m in-process build lanes
  // OpenMP threads of each local lane's builds (0: the caller's setting). With m > 1 lanes,
  // cores / m avoids oversubscription; builds are bit-identical across thread counts (f32,
  // tested).
  int local_lane_threads = 0;
  Policy policy = Policy::kLpt;
  double deadline_slack = 4.0;       // × projected seconds of the lane's work
  double deadline_floor_s = 10.0;    // + this, so a cold cost model cannot starve a worker
  bool query_load = true;            // GetStatus before assigning (load-aware; skips dead ones)
  double status_timeout_s = 0.5;
  size_t max_message_bytes = size_t(4) << 20;
  size_t max_entry_bytes = size_t(2) << 30;
  rpc::CredentialsPtr creds = rpc::Credentials::insecure();  // TLS and token for the workers
  size_t max_samples = 256;          // cost samples kept (the most recent)
  // Called after each entry is complete and stored (from the lane's thread, outside the call's lock):
  // the lane (a worker's index in the call's worker list, its size + i for local lane i, −1 for the
  // fallback lane), the segment's index in the request's parts, whether a worker built it.
  // For tests and metrics.
  std::function<void(int lane, int segment, bool remote)> on_ingest;
};

struct ScatterStats {
  int segments = 0;     // cacheable segments of the request (duplicates counted once)
  int hits = 0;         // already in the store
  int built_remote = 0, built_local = 0;
  int rescheduled = 0;  // segments moved to the local lanes after their worker failed
  int corrupt = 0;      // entries rejected by verification (then rebuilt)
  int worker_failures = 0;  // workers unreachable or failing during the call
  std::vector<std::string> errors;  // one line per failure or rejection
  std::vector<int> lane_of;  // per missed segment (request order): planned lane, as on_ingest
  double predicted_makespan_s = 0, wall_s = 0;
};

class Scatter;

// One call in flight (Scatter::start). The request, `opt`, `stats` and `cancel` passed to
// start() must outlive it. Destroying it without wait() cancels the call and joins its threads.
class ScatterCall final : public BuildCall {
 public:
  ~ScatterCall() override;
  ScatterCall(const ScatterCall&) = delete;
  ScatterCall& operator=(const ScatterCall&) = delete;

  // The missed segments' entries by key, filling layer by layer: ComposeOptions::arriving.
  // The pointers stay valid until this object is destroyed.
  const ArrivingEntries& arriving() const override { return arriving_; }
  // Joins every lane and returns what prefill_segments() returns. Call at most once.
  Result<std::vector<SegmentStore::Pin>> wait() override;
  // After wait(): the call's ScatterStats in brief.
  BuildFigures figures() const override;

 private:
  friend class Scatter;
  struct State;
  ScatterCall() = default;
  std::unique_ptr<State> st_;
  ArrivingEntries arriving_;
  bool waited_ = false;
};

class Scatter final : public SegmentBuilder {
 public:
  Scatter(const Model& model, std::shared_ptr<SegmentStore> store, ScatterOptions opt);
  ~Scatter() override;
  Scatter(const Scatter&) = delete;
  Scatter& operator=(const Scatter&) = delete;

  // Makes sure every keyed segment of `req` (those Composer::prefill composes under `opt`,
  // hypic / naive mode; keyed under opt.seam and opt.salt) is in the store, and returns their
  // Pins (hold them across the prefill so nothing is evicted in between).
  // `cancel` (may be null): once it reads true the in-flight RPCs are cancelled, local lanes
  // stop after their current build and the call returns kCancelled. `stats` (may be null: kept
  // in the call). `workers` (may be null: ScatterOptions::workers) names this call's scatter
  // workers — a router passes the live ones per request, so workers join and leave without
  // restarting the combine instance.
  Result<std::vector<SegmentStore::Pin>> prefill_segments(
      const TokenizedRequest& req, const ComposeOptions& opt, const std::atomic<bool>* cancel,
      ScatterStats* stats, const std::vector<std::string>* workers = nullptr);
  // The same call, started in the background: compose from the returned call's arriving()
  // while it runs, then wait() for its result. Errors found before anything starts (no
  // store, bad seam) come back from wait().
  std::unique_ptr<ScatterCall> start(const TokenizedRequest& req, const ComposeOptions& opt,
                                     const std::atomic<bool>* cancel, ScatterStats* stats,
                                     const std::vector<std::string>* workers = nullptr);
  // SegmentBuilder: start() without a cancel flag (destroying the call cancels it), its
  // figures kept in the call.
  std::unique_ptr<BuildCall> start(const TokenizedRequest& req, const ComposeOptions& opt,
                                   const std::vector<std::string>* workers) override;

  // The cost model now in use (fitted from builds seen so far; a FLOP-based prior before).
  CostModel cost_model() const;
  void add_sample(int64_t tokens, double seconds);

  struct Call;  // one call's state (scatter.cpp)

 private:
  struct Remote;
  void run_remote(Call& c, int lane);
  void run_local(Call& c, int lane);
  void probe_workers(Call& c);
  int lane_id(const Call& c, int lane) const;
  // Places layer `layer` of job j (verified `part`); completes and stores the entry after its
  // last layer. False (and the reason) when the part does not fit the job.
  bool place_layer(Call& c, int j, int layer, SegmentEntry&& part, double seconds, int lane,
                   bool remote, std::string* why);
  Remote* remote(const std::string& address);  // its channel, created on first use

  const Model& model_;
  std::shared_ptr<SegmentStore> store_;
  const ScatterOptions opt_;
  std::mutex remotes_mu_;  // guards remotes_ (entries are never removed: pointers stay valid)
  std::map<std::string, std::unique_ptr<Remote>> remotes_;  // by address
  CostModel prior_;

  mutable std::mutex mu_;  // guards samples_, fit_
  std::vector<CostSample> samples_;
  CostModel fit_;
};

}  // namespace hypic::cluster
