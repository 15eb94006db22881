// The scatter worker (SPEC §5): a gRPC SegmentWorker service (proto/hypic_cluster.proto) over a
// loaded Model. Prefill builds the entries of the segments it is sent, in the order given,
// and streams each one (serialize_entry bytes, checksummed) in chunks of at most
// max_message_bytes − 64 KiB as soon as it is built, while a second thread builds the next
// (at most two built entries wait for the network: memory stays bounded).
//
// Threading: gRPC runs handlers on its own thread pool, so requests from several combine
// workers may be in flight at once. Builds are serialised by one mutex (a build already
// uses every core); queued_tokens (accepted, not yet built) is what GetStatus reports as
// the worker's load. A cancelled or timed-out call stops before its next segment.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "core/address.h"
#include "core/status.h"
#include "model/model.h"
#include "rpc/credentials.h"

namespace grpc {
class Server;
}

namespace hypic::cluster {

struct WorkerOptions {
  std::string host = "127.0.0.1";
  int port = 0;                             // 0: any free port (see WorkerServer::port())
  size_t max_message_bytes = size_t(4) << 20;  // gRPC send and receive limit, both ways
  rpc::CredentialsPtr creds = rpc::Credentials::insecure();  // TLS and the token callers need
  // Fault injection for tests: flip a byte in every Nth entry sent (0: never); sleep this
  // long before building each segment.
  int debug_corrupt_every = 0;
  int debug_delay_ms = 0;
};

class WorkerServer {
 public:
  // Binds and starts serving (on gRPC's threads). `model` must outlive the server.
  static Result<std::unique_ptr<WorkerServer>> start(const Model& model, const WorkerOptions& opt);
  ~WorkerServer();  // shutdown() if still running
  WorkerServer(const WorkerServer&) = delete;
  WorkerServer& operator=(const WorkerServer&) = delete;

  int port() const { return port_; }
  std::string address() const;  // "host:port", as a Scatter takes it
  // Stops accepting calls; calls in flight get `grace_ms` to finish, then are cancelled.
  // Idempotent; safe from any thread.
  void shutdown(int grace_ms = 2000);
  void wait();  // until shutdown() has completed

 private:
  struct Service;
  WorkerServer() = default;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string host_;
  int port_ = 0;
  std::once_flag shutdown_once_;
};

}  // namespace hypic::cluster
