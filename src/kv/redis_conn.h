// One connection to Redis, plain TCP or TLS (OpenSSL), speaking RESP with hiredis's command
// formatter and reply reader (Debian 12's hiredis 0.14 has no TLS of its own, so the transport
// is ours). Blocking with timeouts: connect by poll(), every read and write by the socket's
// SO_RCVTIMEO / SO_SNDTIMEO. A write to a closed peer never raises SIGPIPE.
//
// TLS (rediss://): the server's certificate must chain to the CA file (or the system's CAs)
// and name the host (DNS name or IP address); a client certificate is sent when one is given.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "kv/redis.h"

namespace hypic::kv {

// An OpenSSL client context: CA, optional client certificate, TLS 1.2 or later.
class TlsClient;
Result<std::shared_ptr<TlsClient>> make_tls_client(const RedisAddress& a);

class RedisConn {
 public:
  // Connects (and, with `tls`, completes the handshake) within the timeouts.
  static Result<std::unique_ptr<RedisConn>> open(const RedisAddress& a, TlsClient* tls, int connect_ms,
                                                 int io_ms);
  ~RedisConn();
  RedisConn(const RedisConn&) = delete;
  RedisConn& operator=(const RedisConn&) = delete;

  // Sends `cmds` together and reads one reply each; false when the connection broke (error()
  // says how; the connection is then unusable).
  bool exchange(const std::vector<std::vector<std::string_view>>& cmds, std::vector<Reply>* out);
  const std::string& error() const { return error_; }

 private:
  struct Impl;
  explicit RedisConn(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::string error_;
};

}  // namespace hypic::kv
