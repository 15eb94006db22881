// The OpenAI-compatible HTTP front end (cpp-httplib): routes, authentication, request
// limits, SSE streaming. All queueing and locking is in Scheduler; the handlers parse,
// validate, tokenise, submit and write responses.
//
//   GET  /health                 {"status":"ok"} (no API key needed)
//   GET  /v1/models              the one served model
//   POST /v1/chat/completions    ChatML; content parts may be marked as segments
//   POST /v1/completions         a plain prompt
#pragma once

#include <memory>
#include <string>

#include "cache/prefix_cache.h"
#include "cache/segment_store.h"
#include "core/status.h"
#include "model/model.h"
#include "server/request.h"
#include "server/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace hypic::server {

struct ServerOptions {
  std::string host = "127.0.0.1";  // loopback unless asked otherwise
  int port = 8080;                  // 0: an ephemeral port (see HttpServer::port())
  std::string api_key;              // non-empty: "Authorization: Bearer KEY" required
  std::string model_name = "hypic";
  RequestLimits limits;
  Scheduler::Options scheduler;
  size_t cache_mem_bytes = size_t(1) << 30;
  std::string cache_dir;
  bool log_requests = true;         // one JSON line per request on stderr
  int debug_delay_ms = 0;           // tests: each job sleeps this long before running
};

class HttpServer {
 public:
  // `model` and `tok` must outlive the server.
  static Result<std::unique_ptr<HttpServer>> create(const Model& model, const Tokenizer& tok,
                                                    ServerOptions opt);
  ~HttpServer();

  // Binds host:port; port() is then the actual port.
  Status bind();
  int port() const;
  // Serves until stop(). Returns when the listener is closed.
  void run();
  // Graceful: stop accepting jobs, let running ones finish (queued ones get 503), then close
  // the listener. Safe to call from any thread, once or more.
  void stop();

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hypic::server
