// The OpenAI-compatible HTTP server (on HttpFront, api/http_front.h): routes, authentication, request
// limits, SSE streaming. Queueing and the jobs' locking are in Scheduler, what a job runs
// (the engine's Runner, registrations) in Jobs (server/jobs.h); the registry of segments,
// the metrics and the connection queue keep their own small locks (see their headers). The
// handlers parse, validate, tokenise, submit and answer through their Reply; none of them
// waits (a completion answers when its ticket fills).
//
//   GET    /health                 {"status":"ok"} (no API key needed)
//   GET    /metrics                Prometheus text format
//   GET    /v1/models              the one served model
//   POST   /v1/chat/completions    in the chat template; parts may be (or reference) segments
//   POST   /v1/completions         a plain prompt
//   POST   /v1/segments            register a segment: prefill, cache and pin its entry
//   GET    /v1/segments[/{id}]     a tenant's registrations (?cache_salt=...)
//   DELETE /v1/segments/{id}       end a registration (?cache_salt=...)
// and, with ServerOptions::grpc_port, the Combine gRPC service (server/combine_service.h)
// through which a router forwards completions to the same prepare / submit path.
//
// A registration is a job on the scheduler like a completion (same workers, same 429).
// A request stops when its client disconnects (the front watches every socket).
#pragma once

#include <memory>
#include <string>

#include "cache/prefix_cache.h"
#include "cache/segment_store.h"
#include "core/status.h"
#include "cluster/scatter.h"
#include "model/model.h"
#include "rpc/credentials.h"
#include "api/auto_segments.h"
#include "api/http_front.h"
#include "server/engine_request.h"
#include "server/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace hypic::server {

struct ServerOptions {
  std::string host = "127.0.0.1";  // loopback unless asked otherwise
  int port = 8080;                  // 0: an ephemeral port (see HttpServer::port())
  std::string api_key;              // non-empty: "Authorization: Bearer KEY" required
  std::string model_name = "hypic";
  api::RequestLimits limits;
  Scheduler::Options scheduler;
  size_t cache_mem_bytes = size_t(1) << 30;
  // The disk tier and the durable registry of /v1/segments (kRegistryFile there): a restart
  // with the same directory answers every unexpired segment id and starts warm.
  std::string cache_dir;
  // The shared tier and registry (redis://[:PASSWORD@]HOST:PORT[/DB]; empty: none): entries
  // any instance built are fetched instead of built, and the registry of /v1/segments is
  // kept there instead of in cache_dir, so every instance answers every segment id.
  std::string segment_store;
  // Segments made for clients that do not mark them (api/auto_segments.h); a request's
  // "hypic": {"auto_segments": ...} overrides it.
  api::AutoSegments auto_segments;
  // The model's reasoning format when its replies reason (engine/model_tokenizer.h
  // model_reasoning); null: no reasoning markup.
  const ReasoningFormat* reasoning = nullptr;
  // Segment parallelism (combine worker): when scatter.workers is non-empty or
  // scatter.local_lanes > 1, the cold segments of hypic / naive requests are built by
  // cluster::Scatter (remote `hypic worker`s and local lanes) before the composition.
  cluster::ScatterOptions scatter;
  size_t registered_mem_bytes = 0;  // cap on bytes pinned by /v1/segments; 0: cache_mem_bytes / 2
  int max_registered_segments = 1024;
  // The HTTP front's connection limits and deadlines (host, port, api_key and the body
  // limit are taken from the fields above and from `limits`).
  api::HttpFrontOptions http;
  // SIGTERM / stop(): streams in flight get this long, then are cut (finish_reason "abort",
  // a final error event); new requests get 503 meanwhile.
  int drain_timeout_ms = 30000;
  // The Combine gRPC service (a router forwards requests to it): its port, 0 for any free
  // one, −1 for none. It listens on `host`.
  int grpc_port = -1;
  // The cluster's TLS and token: required by the Combine service, sent to scatter workers.
  rpc::CredentialsPtr creds = rpc::Credentials::insecure();
  // After the drain, the memory tier's entries are written to the disk tier (cache_dir) for
  // a warm restart, for at most this long.
  int flush_timeout_ms = 30000;
  bool log_requests = true;         // one JSON line per request on stderr
  int debug_delay_ms = 0;           // tests: each job sleeps this long before running
  int debug_piece_delay_ms = 0;     // tests: and this long after each piece of text
};

// The registered segments' database in cache_dir.
inline constexpr const char* kRegistryFile = "registry.sqlite";

class HttpServer {
 public:
  // `model` and `tok` must outlive the server.
  static Result<std::unique_ptr<HttpServer>> create(const Model& model, const Tokenizer& tok,
                                                    ServerOptions opt);
  ~HttpServer();

  // Binds host:port; port() is then the actual port.
  Status bind();
  int port() const;
  int grpc_port() const;  // −1 without the Combine service
  // Serves until stop(). Returns when the listener is closed.
  void run();
  // Graceful: new requests get 503, queued jobs 503, running ones finish within
  // drain_timeout_ms (then are cut), then the listener and connections close. Blocks until
  // then. Safe to call from any thread, once or more.
  void stop();

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hypic::server
