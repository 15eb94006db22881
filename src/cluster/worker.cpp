#include "cluster/worker.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <thread>

#include "checkpoint/safetensors.h"
#include "cluster/wire.h"
#include "core/log.h"
#include "core/timer.h"
#include "hypic_cluster.grpc.pb.h"

namespace hypic::cluster {

struct WorkerServer::Service final : pb::SegmentWorker::Service {
  Service(const Model& m, const WorkerOptions& o)
      : model(m), opt(o), dtype(safetensors_dtype_name(m.compute_type())) {}

  grpc::Status Prefill(grpc::ServerContext* ctx, const pb::PrefillRequest* req,
                       grpc::ServerWriter<pb::EntryChunk>* w) override;
  grpc::Status GetStatus(grpc::ServerContext* ctx, const pb::StatusRequest*,
                         pb::WorkerStatus* out) override {
    if (auto st = opt.creds->check(ctx, "SegmentWorker.GetStatus"); !st.ok()) return st;
    out->set_model_fingerprint(model.fingerprint());
    out->set_dtype(dtype);
    out->set_queued_tokens(uint64_t(std::max<int64_t>(0, queued.load())));
    out->set_segments_built(built.load());
    out->set_max_message_bytes(opt.max_message_bytes);
    std::lock_guard<std::mutex> l(stat_mu);
    out->set_tokens_per_second(tokens_per_second);
    return grpc::Status::OK;
  }

  const Model& model;
  const WorkerOptions opt;
  const std::string dtype;        // safetensors spelling of the compute type
  std::mutex build_mu;            // one build at a time (each uses every core)
  std::atomic<int64_t> queued{0};  // tokens accepted and not built yet, over all calls
  std::atomic<uint64_t> built{0}, sent{0};
  std::mutex stat_mu;
  double tokens_per_second = 0;  // exponential moving average over builds (guarded)
};

namespace {

// One layer of an entry waiting to be streamed.
struct Part {
  uint32_t index = 0;
  uint32_t layer = 0;
  std::string bytes;
  double seconds = -1;  // >= 0 on the entry's last part: its build time
};

grpc::StatusCode grpc_code(StatusCode c) {
  switch (c) {
    case StatusCode::kOk: return grpc::StatusCode::OK;
    case StatusCode::kInvalidArgument: return grpc::StatusCode::INVALID_ARGUMENT;
    case StatusCode::kOutOfRange: return grpc::StatusCode::OUT_OF_RANGE;
    case StatusCode::kResourceExhausted: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case StatusCode::kCancelled: return grpc::StatusCode::CANCELLED;
    case StatusCode::kUnavailable: return grpc::StatusCode::UNAVAILABLE;
    case StatusCode::kNotFound:
    case StatusCode::kIoError:
    case StatusCode::kCorrupt:
    case StatusCode::kUnsupported:
    case StatusCode::kInternal: return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::INTERNAL;
}

}  // namespace

grpc::Status WorkerServer::Service::Prefill(grpc::ServerContext* ctx,
                                            const pb::PrefillRequest* req,
                                            grpc::ServerWriter<pb::EntryChunk>* w) {
  if (auto st = opt.creds->check(ctx, "SegmentWorker.Prefill"); !st.ok()) return st;
  if (req->model_fingerprint() != model.fingerprint() || req->dtype() != dtype)
    return {grpc::StatusCode::FAILED_PRECONDITION,
            "this worker serves model fingerprint " + model.fingerprint() + " in " + dtype +
                ", the request is for " + req->model_fingerprint() + " in " + req->dtype() +
                ": start the worker with the combine worker's --model and --dtype"};
  if (req->seam() < 0) return {grpc::StatusCode::INVALID_ARGUMENT, "seam width must be >= 0"};
  int64_t total = 0;
  for (const pb::Segment& s : req->segments()) total += s.tokens_size();
  queued += total;

  std::mutex mu;
  std::condition_variable cv;
  // Parts built and not yet written. The build pushes its entry's parts as it goes; before
  // the next build the producer waits until at most two entries' parts are left (a bound on
  // memory; the stream keeps a finished entry to send while the next one builds).
  std::deque<Part> ready;
  bool producer_done = false, stop = false;
  grpc::Status err = grpc::Status::OK;
  const size_t layers = size_t(model.config().num_hidden_layers);

  std::thread producer([&] {
    int64_t accounted = 0;  // tokens already taken off `queued`
    for (const pb::Segment& seg : req->segments()) {
      {
        std::unique_lock<std::mutex> l(mu);
        cv.wait(l, [&] { return ready.size() <= 2 * layers || stop; });
        if (stop) break;
      }
      if (ctx->IsCancelled()) break;
      // Fault injection: a slow worker (cancellation still ends the wait within 10 ms). The log
      // line lets a test act while the build is held (a condition, not a timer).
      if (opt.debug_delay_ms > 0)
        HYPIC_LOG_INFO("worker: --debug-delay-ms: holding a segment of %d tokens for %d ms", seg.tokens_size(),
                       opt.debug_delay_ms);
      for (int ms = 0; ms < opt.debug_delay_ms && !ctx->IsCancelled(); ms += 10)
        std::this_thread::sleep_for(std::chrono::milliseconds(std::min(10, opt.debug_delay_ms - ms)));
      const std::vector<int32_t> tokens(seg.tokens().begin(), seg.tokens().end());
      const std::string key =
          segment_key(model.fingerprint(), model.compute_type(), req->seam(), req->salt(), tokens);
      const bool corrupt = opt.debug_corrupt_every > 0 &&
                           (sent.fetch_add(1) + 1) % uint64_t(opt.debug_corrupt_every) == 0;
      Status part_error;
      std::string last;  // the last layer's part
      // Streams layer `layer` of the entry being built (on the build thread).
      auto on_layer = [&](int layer, const SegmentEntry& partial) {
        SegmentEntry part = model.entry_layer(partial, layer);
        part.key = key;
        Result<std::string> bytes = serialize_entry(part);
        if (!bytes.is_ok()) {
          if (part_error.is_ok()) part_error = bytes.status();
          return;
        }
        if (size_t(layer) + 1 == layers) {  // sent with the build time, below
          if (corrupt) bytes->back() = char(bytes->back() ^ 0x5a);  // tensor data: bad checksum
          last = std::move(*bytes);
          return;
        }
        std::lock_guard<std::mutex> l(mu);
        ready.push_back({seg.index(), uint32_t(layer), std::move(*bytes)});
        cv.notify_all();
      };
      Result<SegmentEntry> e = invalid_argument("not built");
      double seconds = 0;
      {
        std::lock_guard<std::mutex> l(build_mu);
        if (ctx->IsCancelled()) break;
        Timer t;
        e = model.build_entry(tokens, req->seam(), on_layer);
        seconds = t.seconds();
      }
      queued -= int64_t(tokens.size());
      accounted += int64_t(tokens.size());
      if (!e.is_ok() || !part_error.is_ok()) {
        const Status& s = e.is_ok() ? part_error : e.status();
        std::lock_guard<std::mutex> l(mu);
        err = {grpc_code(s.code()), "segment " + std::to_string(seg.index()) + ": " + s.message()};
        break;
      }
      built += 1;
      {
        std::lock_guard<std::mutex> l(stat_mu);
        const double tps = double(tokens.size()) / std::max(seconds, 1e-9);
        tokens_per_second = tokens_per_second == 0 ? tps : 0.8 * tokens_per_second + 0.2 * tps;
      }
      std::lock_guard<std::mutex> l(mu);
      ready.push_back({seg.index(), uint32_t(layers - 1), std::move(last), seconds});
      cv.notify_all();
    }
    queued -= total - accounted;
    std::lock_guard<std::mutex> l(mu);
    producer_done = true;
    cv.notify_all();
  });

  // This thread streams what the producer finished, chunk by chunk.
  const size_t chunk = chunk_bytes(opt.max_message_bytes);
  bool write_ok = true;
  for (;;) {
    Part b;
    {
      std::unique_lock<std::mutex> l(mu);
      cv.wait(l, [&] { return !ready.empty() || producer_done; });
      if (ready.empty()) break;
      b = std::move(ready.front());
      ready.pop_front();
      cv.notify_all();
    }
    for (size_t off = 0; off < b.bytes.size() && write_ok; off += chunk) {
      pb::EntryChunk c;
      c.set_index(b.index);
      c.set_layer(b.layer);
      c.set_total_bytes(b.bytes.size());
      c.set_offset(off);
      c.set_data(b.bytes.data() + off, std::min(chunk, b.bytes.size() - off));
      if (off + chunk >= b.bytes.size() && b.seconds >= 0) c.set_build_seconds(b.seconds);
      write_ok = w->Write(c);
    }
    if (!write_ok) break;
  }
  {
    std::lock_guard<std::mutex> l(mu);
    stop = true;
    cv.notify_all();
  }
  producer.join();
  if (!write_ok || ctx->IsCancelled())
    return {grpc::StatusCode::CANCELLED, "the caller cancelled or went away"};
  return err;
}

Result<std::unique_ptr<WorkerServer>> WorkerServer::start(const Model& model,
                                                          const WorkerOptions& opt) {
  if (opt.max_message_bytes < kMinMessageBytes || opt.max_message_bytes > kMaxMessageBytes)
    return invalid_argument("max message size must be between " +
                            std::to_string(kMinMessageBytes >> 10) + " KiB and " +
                            std::to_string(kMaxMessageBytes >> 20) + " MiB");
  if (opt.port < 0 || opt.port > 65535) return invalid_argument("port must be in [0, 65535]");
  std::unique_ptr<WorkerServer> ws(new WorkerServer);
  ws->service_ = std::make_unique<Service>(model, opt);
  ws->host_ = opt.host;
  grpc::ServerBuilder b;
  b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // a taken port is an error, not shared
  b.SetMaxReceiveMessageSize(int(opt.max_message_bytes));
  b.SetMaxSendMessageSize(int(opt.max_message_bytes));
  b.AddListeningPort(host_port(opt.host, opt.port), opt.creds->server(), &ws->port_);
  b.RegisterService(ws->service_.get());
  ws->server_ = b.BuildAndStart();
  if (!ws->server_ || ws->port_ == 0)
    return io_error("cannot listen on " + host_port(opt.host, opt.port) +
                    ": is the port in use or the address not local? Pick another --port "
                    "(0: any free port) or --host");
  return ws;
}

WorkerServer::~WorkerServer() {
  if (!server_) return;
  shutdown(0);
  server_->Wait();
}

std::string WorkerServer::address() const { return host_port(host_, port_); }

void WorkerServer::shutdown(int grace_ms) {
  std::call_once(shutdown_once_, [&] {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(grace_ms));
  });
}

void WorkerServer::wait() { server_->Wait(); }

}  // namespace hypic::cluster
