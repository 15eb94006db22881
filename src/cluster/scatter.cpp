#include "cluster/scatter.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <set>
#include <thread>

#include "checkpoint/safetensors.h"
#include "cluster/wire.h"
#include "core/log.h"
#include "core/parallel.h"
#include "core/timer.h"
#include "hypic_cluster.grpc.pb.h"

namespace hypic::cluster {

struct Scatter::Remote {
  std::string address;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::SegmentWorker::Stub> stub;
};

namespace {

// One missed segment to build (duplicates within a request share one job).
struct Job {
  int segment = 0;  // index in TokenizedRequest::segments of its first occurrence
  const std::vector<int32_t>* tokens = nullptr;
  std::string key;
};

// A lane of the schedule: a remote worker (index into Call::remotes) or a local lane.
struct LaneRef {
  bool remote = false;
  int index = 0;
};

std::chrono::system_clock::time_point after(double seconds) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(
             std::chrono::duration<double>(seconds));
}

}  // namespace

// The state of one call. Everything below `mu` is guarded by it.
struct Scatter::Call {
  const ComposeOptions* opt = nullptr;
  std::vector<Remote*> remotes;  // this call's workers (ScatterOptions::workers or the override)
  std::string dtype;  // safetensors spelling of the compute type
  std::vector<Job> jobs;
  std::vector<LaneRef> lanes;  // schedule lane → remote worker or local lane
  std::vector<double> load;    // [lanes] seconds each is already busy for
  Schedule plan;
  ScatterStats* stats = nullptr;
  int layers = 0;  // decoder layers of an entry
  int lane_threads = 0;  // OpenMP threads of each local lane's builds

  // A job's entry as its layers arrive; the gate the composition waits on.
  struct Arrival final : EntryGate {
    Call* call = nullptr;
    SegmentEntry entry;  // Model::empty_entry, slots filled in layer order
    int ready = 0;       // layers placed (guarded by call->mu)
    Status wait(int layer) const override {
      std::unique_lock<std::mutex> l(call->mu);
      call->cv.wait(l, [&] { return ready > layer || call->aborted || call->lanes_running == 0; });
      if (ready > layer) return Status::ok();
      if (call->cancelled) return Status(StatusCode::kCancelled, "segment prefill cancelled by the caller");
      if (!call->local_error.is_ok()) return call->local_error;
      return internal_error("segment entry " + entry.key + " never arrived");
    }
  };
  std::vector<std::unique_ptr<Arrival>> arrivals;  // [jobs]

  std::mutex mu;
  std::condition_variable cv;
  std::vector<SegmentStore::Pin> pins;  // [jobs], set when an entry is complete and stored
  std::deque<int> orphans;              // jobs to rebuild locally
  int remote_running = 0;
  int lanes_running = 0;  // lane threads not yet ended
  bool aborted = false;  // cancelled by the caller, or a local build failed
  bool cancelled = false;
  bool finished = false;  // every lane joined (ends the cancellation watcher)
  Status local_error;
  std::set<grpc::ClientContext*> contexts;  // RPCs in flight

  void abort_locked() {
    aborted = true;
    for (grpc::ClientContext* c : contexts) c->TryCancel();
    cv.notify_all();
  }
};

struct ScatterCall::State {
  Scatter::Call c;
  ScatterStats stats;  // when the caller keeps none
  std::vector<SegmentStore::Pin> hits;
  Status early;  // an error found before anything started
  std::vector<std::thread> threads;
  std::thread watcher;
  Timer wall;
};

// The stable name of a schedule lane: a worker's index in the call's worker list, or its
// size + i for local lane i (schedule lanes skip workers found dead).
int Scatter::lane_id(const Call& c, int lane) const {
  const LaneRef& r = c.lanes[size_t(lane)];
  return r.remote ? r.index : int(c.remotes.size()) + r.index;
}

Scatter::Scatter(const Model& model, std::shared_ptr<SegmentStore> store, ScatterOptions opt)
    : model_(model), store_(std::move(store)), opt_(std::move(opt)) {
  for (const std::string& a : opt_.workers) remote(a);
  // Prior: the model's FLOPs at a nominal 20 GFLOP/s plus 1 ms per segment, as a + bL + cL².
  std::vector<CostSample> flops;
  for (int64_t L : {64, 512, 4096, 32768})
    flops.push_back({L, 1e-3 + model_.forward_flops(L, 0, true) / 2e10});
  prior_ = fit_cost_model(flops, CostModel{1e-3, 1e-3, 3e-8});
  fit_ = prior_;
}

Scatter::~Scatter() = default;

Scatter::Remote* Scatter::remote(const std::string& address) {
  std::lock_guard<std::mutex> l(remotes_mu_);
  std::unique_ptr<Remote>& r = remotes_[address];
  if (!r) {
    grpc::ChannelArguments args;
    const int max_message = int(std::clamp(opt_.max_message_bytes, kMinMessageBytes, kMaxMessageBytes));
    args.SetMaxReceiveMessageSize(max_message);
    args.SetMaxSendMessageSize(max_message);
    // A restarted worker is found again within seconds, not after gRPC's default 2 minutes.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
    r = std::make_unique<Remote>();
    r->address = address;
    r->channel = grpc::CreateCustomChannel(address, opt_.creds->channel(), args);
    r->stub = pb::SegmentWorker::NewStub(r->channel);
  }
  return r.get();
}

CostModel Scatter::cost_model() const {
  std::lock_guard<std::mutex> l(mu_);
  return fit_;
}

void Scatter::add_sample(int64_t tokens, double seconds) {
  std::lock_guard<std::mutex> l(mu_);
  samples_.push_back({tokens, seconds});
  if (samples_.size() > opt_.max_samples)
    samples_.erase(samples_.begin(), samples_.end() - std::ptrdiff_t(opt_.max_samples));
  fit_ = fit_cost_model(samples_, prior_);
}

// Asks every worker for its status at once (one completion queue); a worker that does not
// answer in time or serves another model gets no work. Fills c.lanes / c.load for remotes.
void Scatter::probe_workers(Call& c) {
  const CostModel cm = cost_model();
  if (!opt_.query_load) {
    for (size_t i = 0; i < c.remotes.size(); ++i) {
      c.lanes.push_back({true, int(i)});
      c.load.push_back(0);
    }
    return;
  }
  struct Probe {
    grpc::ClientContext ctx;
    pb::WorkerStatus resp;
    grpc::Status st;
    std::unique_ptr<grpc::ClientAsyncResponseReader<pb::WorkerStatus>> rpc;
  };
  grpc::CompletionQueue cq;
  std::vector<std::unique_ptr<Probe>> probes;
  for (size_t i = 0; i < c.remotes.size(); ++i) {
    auto p = std::make_unique<Probe>();
    p->ctx.set_deadline(after(opt_.status_timeout_s));
    opt_.creds->authorize(&p->ctx);
    p->rpc = c.remotes[i]->stub->AsyncGetStatus(&p->ctx, pb::StatusRequest(), &cq);
    p->rpc->Finish(&p->resp, &p->st, reinterpret_cast<void*>(i));
    probes.push_back(std::move(p));
  }
  void* tag = nullptr;
  bool ok = false;
  for (size_t n = 0; n < probes.size() && cq.Next(&tag, &ok); ++n) {
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  for (size_t i = 0; i < probes.size(); ++i) {
    const Probe& p = *probes[i];
    std::string why;
    if (!p.st.ok()) {
      why = "status: " + p.st.error_message();
    } else if (p.resp.model_fingerprint() != model_.fingerprint() || p.resp.dtype() != c.dtype) {
      why = "serves model " + p.resp.model_fingerprint() + " in " + p.resp.dtype() +
            ", not this instance's " + model_.fingerprint() + " in " + c.dtype +
            ": start it with the same --model and --dtype";
    }
    if (!why.empty()) {
      c.stats->worker_failures += 1;
      c.stats->errors.push_back(c.remotes[i]->address + ": " + why);
      continue;
    }
    const double q = double(p.resp.queued_tokens());
    c.lanes.push_back({true, int(i)});
    c.load.push_back(p.resp.tokens_per_second() > 0 ? q / p.resp.tokens_per_second() : cm.b * q);
  }
}

Result<std::vector<SegmentStore::Pin>> Scatter::prefill_segments(const TokenizedRequest& req,
                                                                 const ComposeOptions& opt,
                                                                 const std::atomic<bool>* cancel,
                                                                 ScatterStats* stats,
                                                                 const std::vector<std::string>* workers) {
  return start(req, opt, cancel, stats, workers)->wait();
}

std::unique_ptr<BuildCall> Scatter::start(const TokenizedRequest& req, const ComposeOptions& opt,
                                          const std::vector<std::string>* workers) {
  return start(req, opt, nullptr, nullptr, workers);
}

std::unique_ptr<ScatterCall> Scatter::start(const TokenizedRequest& req, const ComposeOptions& opt,
                                            const std::atomic<bool>* cancel, ScatterStats* stats,
                                            const std::vector<std::string>* workers) {
  std::unique_ptr<ScatterCall> call(new ScatterCall);
  call->st_ = std::make_unique<ScatterCall::State>();
  ScatterCall::State& S = *call->st_;
  if (!stats) stats = &S.stats;
  *stats = ScatterStats{};
  Call& c = S.c;
  c.stats = stats;
  if (!store_) {
    S.early = invalid_argument("no segment store configured");
    return call;
  }
  if (opt.seam < 0) {
    S.early = invalid_argument("seam width must be >= 0");
    return call;
  }
  HYPIC_CHECK(req.seam == opt.seam && req.salt == opt.salt,
              "the request's segments were keyed under another seam or salt than it runs with");
  if (opt.mode != PicMode::kHypic && opt.mode != PicMode::kNaive) return call;

  for (const std::string& a : workers ? *workers : opt_.workers) c.remotes.push_back(remote(a));
  c.opt = &opt;
  c.dtype = safetensors_dtype_name(model_.compute_type());
  c.layers = model_.config().num_hidden_layers;
  // Lane threads are new threads: give them the caller's OpenMP setting unless told otherwise.
  c.lane_threads = opt_.local_lane_threads > 0 ? opt_.local_lane_threads : num_threads();
  std::set<std::string> seen;
  for (size_t i = 0; i < req.segments.size(); ++i) {
    const SegmentRef& seg = req.segments[i];
    if (seg.key.empty()) continue;  // no body: the composition recomputes it
    if (!seen.insert(seg.key).second) continue;
    stats->segments += 1;
    if (SegmentStore::Pin p = store_->lookup(seg.key)) {
      stats->hits += 1;
      S.hits.push_back(std::move(p));
      continue;
    }
    c.jobs.push_back({int(i), &seg.tokens, seg.key});
  }
  if (c.jobs.empty()) return call;
  for (const Job& j : c.jobs) {
    auto a = std::make_unique<Call::Arrival>();
    a->call = &c;
    a->entry = model_.empty_entry(*j.tokens, opt.seam, j.key);
    call->arriving_[j.key] = {&a->entry, a.get()};
    c.arrivals.push_back(std::move(a));
  }

  // Plan: live workers first, then the local lanes.
  probe_workers(c);
  const int m = std::max(0, opt_.local_lanes);
  for (int i = 0; i < m; ++i) {
    c.lanes.push_back({false, i});
    c.load.push_back(0);
  }
  const CostModel cm = cost_model();
  std::vector<double> cost;
  std::vector<int64_t> length;
  for (const Job& j : c.jobs) {
    cost.push_back(cm.seconds(int64_t(j.tokens->size())));
    length.push_back(int64_t(j.tokens->size()));
  }
  c.pins.resize(c.jobs.size());
  if (c.lanes.empty()) {  // no live worker and no local lane: the fallback lane builds everything
    for (size_t j = 0; j < c.jobs.size(); ++j) c.orphans.push_back(int(j));
    stats->lane_of.assign(c.jobs.size(), -1);
  } else {
    c.plan = assign(opt_.policy, cost, length, c.load);
    for (int l : c.plan.lane) stats->lane_of.push_back(lane_id(c, l));
    stats->predicted_makespan_s = c.plan.makespan();
  }

  // One thread per lane with work (every local lane: it also takes rescheduled jobs), and
  // the fallback lane when there is no local lane. Counted before any lane thread starts.
  std::vector<int> run;
  for (size_t l = 0; l < c.lanes.size(); ++l)
    if (!c.lanes[l].remote || !c.plan.order[l].empty()) run.push_back(int(l));
  if (m == 0) run.push_back(-1);
  for (int l : run) c.remote_running += l >= 0 && c.lanes[size_t(l)].remote;
  c.lanes_running = int(run.size());
  for (int l : run)
    S.threads.emplace_back([this, &c, l] {
      if (l >= 0 && c.lanes[size_t(l)].remote) {
        run_remote(c, l);
      } else {
        run_local(c, l);
      }
      std::lock_guard<std::mutex> lock(c.mu);
      c.lanes_running -= 1;
      c.cv.notify_all();
    });
  if (cancel) {
    S.watcher = std::thread([&c, cancel] {
      std::unique_lock<std::mutex> l(c.mu);
      while (!c.finished) {
        if (!c.aborted && cancel->load()) {
          c.cancelled = true;
          c.abort_locked();
        }
        c.cv.wait_for(l, std::chrono::milliseconds(20));
      }
    });
  }
  return call;
}

ScatterCall::~ScatterCall() {
  if (waited_ || !st_) return;
  {
    std::lock_guard<std::mutex> l(st_->c.mu);
    if (!st_->c.aborted) {
      st_->c.cancelled = true;
      st_->c.abort_locked();
    }
  }
  (void)wait();
}

Result<std::vector<SegmentStore::Pin>> ScatterCall::wait() {
  if (waited_) return internal_error("ScatterCall::wait called twice");
  waited_ = true;
  State& S = *st_;
  Scatter::Call& c = S.c;
  for (std::thread& t : S.threads) t.join();
  {
    std::lock_guard<std::mutex> l(c.mu);
    c.finished = true;
    c.cv.notify_all();
  }
  if (S.watcher.joinable()) S.watcher.join();
  if (c.stats) c.stats->wall_s = S.wall.seconds();
  if (!S.early.is_ok()) return S.early;
  if (c.cancelled) return Status(StatusCode::kCancelled, "segment prefill cancelled by the caller");
  if (!c.local_error.is_ok()) return c.local_error;
  std::vector<SegmentStore::Pin> out = std::move(S.hits);
  for (size_t j = 0; j < c.jobs.size(); ++j) {
    if (!c.pins[j])
      return internal_error("segment " + std::to_string(c.jobs[j].segment) + " got no entry");
    out.push_back(std::move(c.pins[j]));
  }
  return out;
}

BuildFigures ScatterCall::figures() const {
  const ScatterStats& s = *st_->c.stats;
  return {s.built_remote, s.built_local, s.rescheduled, s.corrupt};
}

bool Scatter::place_layer(Call& c, int j, int layer, SegmentEntry&& part, double seconds,
                          int lane, bool remote, std::string* why) {
  Call::Arrival& a = *c.arrivals[size_t(j)];
  const Job& job = c.jobs[size_t(j)];
  {
    std::lock_guard<std::mutex> l(c.mu);
    if (layer < a.ready) return true;  // placed already (a rebuild recomputes the same bits)
    if (layer > a.ready) {
      *why = "layer " + std::to_string(layer) + " arrived before layer " + std::to_string(a.ready);
      return false;
    }
    if (Status s = model_.set_entry_layer(&a.entry, layer, std::move(part)); !s) {
      *why = s.message();
      return false;
    }
    a.ready = layer + 1;
    c.cv.notify_all();
    if (a.ready < c.layers) return true;
  }
  // Complete: the store gets its own copy (the composition may still be reading this one).
  SegmentStore::Pin pin = store_->insert(job.key, SegmentEntry(a.entry), seconds);
  if (seconds > 0) add_sample(int64_t(job.tokens->size()), seconds);
  {
    std::lock_guard<std::mutex> l(c.mu);
    c.pins[size_t(j)] = std::move(pin);
    (remote ? c.stats->built_remote : c.stats->built_local) += 1;
  }
  if (opt_.on_ingest) opt_.on_ingest(lane < 0 ? -1 : lane_id(c, lane), job.segment, remote);
  return true;
}

// A local lane: its own jobs, then whatever failed elsewhere, until every remote lane has
// ended. lane < 0: the fallback lane (no jobs of its own).
void Scatter::run_local(Call& c, int lane) {
  const int seam = c.opt->seam;
  struct Threads {  // per-thread OpenMP setting for this lane, restored on exit
    int saved = 0;
    explicit Threads(int n) {
      if (n > 0) saved = num_threads(), set_num_threads(n);
    }
    ~Threads() {
      if (saved > 0) set_num_threads(saved);
    }
  } threads(c.lane_threads);
  auto fail = [&](const Status& s) {
    std::lock_guard<std::mutex> l(c.mu);
    if (c.local_error.is_ok()) c.local_error = s;
    c.abort_locked();
  };
  auto build = [&](int j, bool retry) {
    const Job& job = c.jobs[size_t(j)];
    const std::string where = "segment " + std::to_string(job.segment);
    auto layer_of = [&](const SegmentEntry& e, int layer) {
      SegmentEntry part = model_.entry_layer(e, layer);
      part.key = job.key;
      return part;
    };
    std::string why;
    bool ok = true;
    auto place = [&](const SegmentEntry& e, int layer, double seconds) {
      if (ok) ok = place_layer(c, j, layer, layer_of(e, layer), seconds, lane, false, &why);
    };
    // A retried job may have been built by another request in the meantime.
    if (SegmentStore::Pin pin = retry ? store_->lookup(job.key) : nullptr) {
      for (int layer = 0; layer < c.layers; ++layer) place(*pin, layer, 0);
    } else {
      Timer t;
      // Layers are placed as the build finishes them; the last one with the build time.
      Result<SegmentEntry> e =
          model_.build_entry(*job.tokens, seam, [&](int layer, const SegmentEntry& partial) {
            if (layer + 1 < c.layers) place(partial, layer, 0);
          });
      if (!e.is_ok()) return fail(e.status().with_context(where));
      place(*e, c.layers - 1, t.seconds());
    }
    if (!ok) fail(internal_error(where + ": " + why));
  };
  if (lane >= 0)
    for (int j : c.plan.order[size_t(lane)]) {
      {
        std::lock_guard<std::mutex> l(c.mu);
        if (c.aborted) return;
      }
      build(j, false);
    }
  for (;;) {
    int j = -1;
    {
      std::unique_lock<std::mutex> l(c.mu);
      c.cv.wait(l, [&] { return c.aborted || !c.orphans.empty() || c.remote_running == 0; });
      if (c.aborted || c.orphans.empty()) return;
      j = c.orphans.front();
      c.orphans.pop_front();
    }
    build(j, true);
  }
}

// A remote lane: one streaming Prefill of the lane's jobs; each entry's layers are verified
// and placed as they arrive. On any failure the jobs not yet complete go to the local lanes
// (their placed layers stay; the rebuild fills the rest).
void Scatter::run_remote(Call& c, int lane) {
  Remote& r = *c.remotes[size_t(c.lanes[size_t(lane)].index)];
  const std::vector<int>& mine = c.plan.order[size_t(lane)];
  std::set<int> pending(mine.begin(), mine.end());
  std::string failure;  // empty: the stream delivered every entry

  auto reject = [&](int j, const std::string& why) {  // under c.mu
    c.stats->corrupt += 1;
    c.stats->rescheduled += 1;
    c.stats->errors.push_back(r.address + ": segment " +
                              std::to_string(c.jobs[size_t(j)].segment) + " rejected: " + why);
    c.orphans.push_back(j);
    c.cv.notify_all();
  };
  std::set<int> dropped;  // rejected jobs: the rest of their parts is read and ignored
  // Verifies one layer of job j and places it (or hands the job to the local lanes).
  auto ingest = [&](int j, int layer, const std::string& bytes, double seconds) {
    if (dropped.count(j)) return;
    Result<SegmentEntry> e = deserialize_entry(bytes);
    std::string why;
    if (!e.is_ok()) {
      why = e.status().message();
    } else if (place_layer(c, j, layer, std::move(*e), seconds, lane, true, &why)) {
      if (layer + 1 == c.layers) pending.erase(j);
      return;
    }
    pending.erase(j);
    dropped.insert(j);
    std::lock_guard<std::mutex> l(c.mu);
    reject(j, "layer " + std::to_string(layer) + ": " + why);
  };

  grpc::ClientContext ctx;
  ctx.set_deadline(after(opt_.deadline_floor_s + opt_.deadline_slack * c.plan.finish[size_t(lane)]));
  opt_.creds->authorize(&ctx);
  pb::PrefillRequest req;
  req.set_model_fingerprint(model_.fingerprint());
  req.set_dtype(c.dtype);
  req.set_seam(c.opt->seam);
  req.set_salt(c.opt->salt);
  for (int j : mine) {
    pb::Segment* s = req.add_segments();
    s->set_index(uint32_t(j));
    s->mutable_tokens()->Add(c.jobs[size_t(j)].tokens->begin(), c.jobs[size_t(j)].tokens->end());
  }
  bool started = false;
  {
    std::lock_guard<std::mutex> l(c.mu);
    if (!c.aborted) {
      c.contexts.insert(&ctx);
      started = true;
    }
  }
  if (started) {
    std::unique_ptr<grpc::ClientReader<pb::EntryChunk>> reader = r.stub->Prefill(&ctx, req);
    pb::EntryChunk ch;
    std::string buf;
    int cur = -1, cur_layer = 0;  // the part whose chunks are arriving (job, layer)
    uint64_t total = 0;
    while (reader->Read(&ch)) {
      std::string bad;
      const int j = int(ch.index());
      if (cur < 0) {
        if (ch.offset() != 0 || (!pending.count(j) && !dropped.count(j)))
          bad = "chunk for segment job " + std::to_string(j) + " at offset " +
                std::to_string(ch.offset()) + " does not start a part of a pending entry";
        else if (ch.layer() >= uint32_t(c.layers))
          bad = "layer " + std::to_string(ch.layer()) + " of a " + std::to_string(c.layers) +
                "-layer model";
        else if (ch.total_bytes() == 0 || ch.total_bytes() > opt_.max_entry_bytes)
          bad = "part of " + std::to_string(ch.total_bytes()) + " bytes exceeds the " +
                std::to_string(opt_.max_entry_bytes) + "-byte limit";
        cur = j;
        cur_layer = int(ch.layer());
        total = ch.total_bytes();
        buf.clear();
      } else if (j != cur || int(ch.layer()) != cur_layer || ch.total_bytes() != total ||
                 ch.offset() != buf.size()) {
        bad = "chunk out of sequence";
      }
      if (bad.empty() && (ch.data().empty() || ch.data().size() > total - buf.size()))
        bad = "chunk of " + std::to_string(ch.data().size()) + " bytes overruns the part";
      if (!bad.empty()) {
        failure = "protocol error: " + bad;
        ctx.TryCancel();
        while (reader->Read(&ch)) {
        }
        break;
      }
      buf += ch.data();
      if (buf.size() == total) {
        ingest(cur, cur_layer, buf, ch.build_seconds());
        cur = -1;
        std::string().swap(buf);
      }
    }
    const grpc::Status st = reader->Finish();
    if (failure.empty() && !st.ok())
      failure = "Prefill failed (" + std::to_string(int(st.error_code())) + "): " + st.error_message();
    if (failure.empty() && !pending.empty()) failure = "stream ended before every entry";
  }
  std::lock_guard<std::mutex> l(c.mu);
  c.contexts.erase(&ctx);
  if (!c.aborted && !pending.empty()) {
    if (failure.empty()) failure = "not started";
    c.stats->worker_failures += 1;
    c.stats->errors.push_back(r.address + ": " + failure + "; " + std::to_string(pending.size()) +
                              " segment(s) rescheduled locally");
    HYPIC_LOG_WARN("scatter: worker %s: %s; rebuilding %zu segment(s) locally", r.address.c_str(),
                   failure.c_str(), pending.size());
    for (int j : pending) c.orphans.push_back(j);
    c.stats->rescheduled += int(pending.size());
  }
  c.remote_running -= 1;
  c.cv.notify_all();
}

}  // namespace hypic::cluster
