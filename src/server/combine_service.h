// The Combine gRPC service of `hypic serve --grpc-port` (proto/hypic_cluster.proto): a router
// forwards a client's completion here. The request body is validated, tokenised and queued
// through the same path as the HTTP endpoint (HttpServer's prepare / submit, passed in as
// hooks), so a forwarded request answers exactly as a direct one; the generated text, then
// one Final or Error, stream back as GenerateEvents. A cancelled call (the client left the
// router) cancels the request's ticket, which frees its slot.
// (The conversions of the response's pieces to protobuf are in api/outcome_pb.h: the router
// uses them too.)
//
// Threading: handlers run on gRPC's thread pool, one blocking call per forwarded request;
// all shared state is behind the hooks (the scheduler's own locking).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "core/timer.h"
#include "hypic_cluster.pb.h"
#include "api/request.h"
#include "api/ticket.h"
#include "engine/tokenized_request.h"
#include "rpc/credentials.h"

namespace grpc {
class Server;
}

namespace hypic::server {

struct CombineHooks {
  std::function<std::optional<ApiError>(std::string_view body, Endpoint ep, ApiRequest* r, PromptParts* parts)> prepare;
  std::function<std::variant<ApiError, std::shared_ptr<Ticket>>(ApiRequest r, PromptParts parts, const Timer& arrival)> submit;
  std::function<cluster::pb::InstanceLoad()> load;
  // After each forwarded request: its log line (id, status, usage...) for the server's log.
  std::function<void(int status, const nlohmann::json& log)> done;
};

class CombineServer {
 public:
  // Binds host:port (0: any free port) and serves on gRPC's threads. `max_body_bytes`: the
  // largest request body accepted over HTTP; forwarded bodies up to it (plus the envelope)
  // are accepted too.
  static Result<std::unique_ptr<CombineServer>> start(const std::string& host, int port,
                                                      size_t max_body_bytes, CombineHooks hooks,
                                                      rpc::CredentialsPtr creds);
  ~CombineServer();  // shutdown(0)
  CombineServer(const CombineServer&) = delete;
  CombineServer& operator=(const CombineServer&) = delete;

  int port() const { return port_; }
  // Stops accepting calls; calls in flight get `grace_ms`, then are cancelled. Idempotent.
  void shutdown(int grace_ms);

 private:
  struct Service;
  CombineServer() = default;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::once_flag shutdown_once_;
};

}  // namespace hypic::server
