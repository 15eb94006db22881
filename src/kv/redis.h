// A Redis client for the shared segment tier: a pool of blocking connections (kv/redis_conn.h:
// TCP or TLS, RESP by hiredis's formatter and reader) with connect and command timeouts,
// made lazily; binary-safe commands, one at a time or pipelined. When Redis cannot be reached or a connection
// breaks, the client is "down" for a backoff period (doubling from backoff_min_ms to
// backoff_max_ms) during which every command fails at once with kUnavailable instead of
// waiting for a timeout; the first command after it tries again, and a success resets it.
// So a Redis that is down costs a request one timeout at most, not one per command. A pooled
// connection that turns out broken (Redis restarted since it was made) gets one retry on a
// fresh connection before Redis counts as down.
//
// URL: redis[s]://[[USER]:PASSWORD@]HOST:PORT[/DB][?ssl_ca_certs=F&ssl_certfile=F&ssl_keyfile=F]
// (PASSWORD also from $HYPIC_REDIS_PASSWORD; USER, if given, is sent with AUTH as Redis 6
// ACLs expect). rediss:// is TLS: the server's certificate is checked against ssl_ca_certs
// (default: the system's CAs) and the host; ssl_certfile + ssl_keyfile are a client
// certificate for servers that require one (the query names are redis-py's).
//
// Threading: every method may be called from any thread; a command holds one pooled
// connection (at most max_connections at once; more callers wait).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hypic::kv {

struct RedisAddress {
  std::string host = "127.0.0.1";
  int port = 6379;
  int db = 0;
  std::string user, password;
  bool tls = false;
  std::string tls_ca, tls_cert, tls_key;  // PEM files
};
class RedisConn;
class TlsClient;
Result<RedisAddress> parse_redis_url(std::string_view url);

struct Reply {
  enum class Type { kNil, kString, kInteger, kArray, kStatus, kError };
  Type type = Type::kNil;
  std::string str;  // kString, kStatus, kError
  int64_t integer = 0;
  std::vector<Reply> elements;
  bool nil() const { return type == Type::kNil; }
};

class Redis {
 public:
  struct Options {
    RedisAddress address;
    int connect_timeout_ms = 500;
    int command_timeout_ms = 2000;
    int max_connections = 4;
    int backoff_min_ms = 100, backoff_max_ms = 5000;
  };
  struct Stats {
    uint64_t commands = 0;    // commands sent (a pipeline counts each)
    uint64_t errors = 0;      // connection failures, timeouts and refusals while down
    uint64_t reconnects = 0;  // connections made after the first
    bool up = true;           // not in a backoff period
  };
  // With address.tls the TLS context is made (files read) here: see open_redis() for errors.
  Redis(Options opt, std::shared_ptr<TlsClient> tls);
  ~Redis();
  Redis(const Redis&) = delete;
  Redis& operator=(const Redis&) = delete;

  // One command. An error reply from Redis is a Reply of type kError (not a failed Status);
  // a failed Status means no answer (kUnavailable: down, refused, timed out, broken).
  Result<Reply> command(const std::vector<std::string_view>& argv);
  // Several commands on one connection, sent together; one Reply each, in order.
  Result<std::vector<Reply>> pipeline(const std::vector<std::vector<std::string_view>>& cmds);

  Stats stats() const;
  std::string describe() const;  // "redis://host:port/db" (never the password)
  // Whether a command can be tried now (false in a backoff period).
  bool up() const { return stats().up; }

 private:
  // A connection (*reused: taken from the pool), or null and *why.
  std::unique_ptr<RedisConn> acquire(Status* why, bool* reused);
  // A new connection, authenticated and on its database; *err when not.
  std::unique_ptr<RedisConn> connect(std::string* err);
  // kNo: back to the pool; kStale: closed with the idle ones; kYes: that, and down for a while.
  enum class Broken { kNo, kStale, kYes };
  void release(std::unique_ptr<RedisConn> c, Broken broken, const std::string& why = "");
  void mark_down(const std::string& why);

  const Options opt_;
  std::shared_ptr<TlsClient> tls_;  // rediss://
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<RedisConn>> idle_;
  int open_ = 0;  // connections made and not closed (idle or in use)
  bool ever_connected_ = false;
  std::chrono::steady_clock::time_point down_until_{};
  int backoff_ms_ = 0;
  std::string down_reason_;
  Stats st_;
};

// A client for `url` (parsed and its TLS files read, not connected: the first command connects).
Result<std::shared_ptr<Redis>> open_redis(std::string_view url, int connect_timeout_ms = 500,
                                          int command_timeout_ms = 2000);

}  // namespace hypic::kv
