// The Combine gRPC service of `hypic serve --grpc-port` (proto/hypic_cluster.proto): a router
// forwards a client's completion here. The request body is validated, tokenised and queued
// by the same Admission as the HTTP endpoint (server/admission.h), so a forwarded request
// answers exactly as a direct one; the generated text, then
// one Final or Error, stream back as GenerateEvents. A cancelled call (the client left the
// router) cancels the request's ticket, which frees its slot.
// (The conversions of the response's pieces to protobuf are in api/outcome_pb.h: the router
// uses them too.)
//
// Threading: handlers run on gRPC's thread pool, one blocking call per forwarded request;
// all shared state is behind the Admission (which locks for itself).
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
#include "server/admission.h"
#include "engine/tokenized_request.h"
#include "rpc/credentials.h"

namespace grpc {
class Server;
}

namespace hypic::server {

class CombineServer {
 public:
  // Binds host:port (0: any free port) and serves on gRPC's threads; `admission` must
  // outlive the server. `max_body_bytes`: the
  // largest request body accepted over HTTP; forwarded bodies up to it (plus the envelope)
  // are accepted too.
  static Result<std::unique_ptr<CombineServer>> start(const std::string& host, int port,
                                                      size_t max_body_bytes, const Admission& admission,
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
