// Who may call the cluster's gRPC services (SegmentWorker, Combine, Router membership), and
// how a caller proves it: a shared cluster token sent with every call (metadata
// "authorization: Bearer TOKEN", compared in constant time), and optionally mutual TLS with
// gRPC's own credentials (every process presents its certificate, signed by the cluster's
// CA, and verifies its peer's against that CA).
//
// One Credentials object per process, from its flags (--cluster-token or
// $HYPIC_CLUSTER_TOKEN; --tls-cert, --tls-key, --tls-ca), used on both sides: a server
// listens with server() and starts every handler with check(); a client connects with
// channel() and calls authorize() on every ClientContext. With TLS on, a server accepts TLS
// connections only. A refused call is UNAUTHENTICATED and logged (peer, method); the
// token is never logged.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"

namespace grpc {
class ServerCredentials;
class ChannelCredentials;
class ClientContext;
class ServerContext;
class Status;
}  // namespace grpc

namespace hypic::rpc {

struct Security {
  std::string token;                      // empty: no token sent or required
  std::string tls_cert, tls_key, tls_ca;  // PEM files: all three, or none (no TLS)
};

class Credentials {
 public:
  // Reads the PEM files; an error names the flag and the file.
  static Result<std::shared_ptr<const Credentials>> load(const Security& s);
  // No token, no TLS (the default of every option struct that holds credentials).
  static std::shared_ptr<const Credentials> insecure();

  std::shared_ptr<grpc::ServerCredentials> server() const;
  std::shared_ptr<grpc::ChannelCredentials> channel() const;
  // Adds the token (if any) to a call about to be made.
  void authorize(grpc::ClientContext* ctx) const;
  // OK, or UNAUTHENTICATED for a call without the token or with another one.
  grpc::Status check(const grpc::ServerContext* ctx, const char* method) const;

  bool tls() const { return !cert_.empty(); }
  bool has_token() const { return !token_.empty(); }

 private:
  std::string token_, cert_, key_, ca_;  // PEM contents
};

using CredentialsPtr = std::shared_ptr<const Credentials>;

}  // namespace hypic::rpc
