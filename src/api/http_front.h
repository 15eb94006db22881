// The event-driven HTTP/1.1 front of `hypic serve` and `hypic router` (Boost.Asio sockets,
// Boost.Beast's request parser). A slow or idle client costs a socket and a buffer, never a
// thread: one I/O thread runs every connection as a state machine, route handlers run on a
// small pool of handler threads, and a handler that waits for a job (a completion) returns
// at once and answers later through its Reply, from any thread.
//
// Per connection, one request at a time, in order (pipelined requests wait in the buffer and
// are answered in the order sent):
//   header   the whole header block must arrive within header_timeout (from its first
//            byte; an idle keep-alive connection is closed after keep_alive_timeout);
//            at most max_header_bytes.
//   decide   on the headers alone: draining (503), the API key for every path but /health
//            (401), Content-Length against max_body_bytes (413). A request answered here has
//            its body drained (up to kDrainBodyBytes; beyond, or when it sent `Expect:
//            100-continue`, the connection is closed after the answer) so a kept-alive
//            connection stays in sync. `Expect: 100-continue` is answered `100 Continue`
//            once the request is accepted. The absolute form of a target is accepted.
//   body     the whole body within body_timeout.
//   route    404 for an unknown path, 405 with Allow for a known path and another method,
//            415 for a JSON route whose body is not application/json.
//   handler  on the pool (or on the I/O thread for `inline_ok` routes); meanwhile the socket
//            is watched: a peer that closes sets the request's client_gone flag.
//   write    the response (Content-Length, or chunked from a BodyStream) within
//            write_timeout per write; then the next request, or close.
// Connections beyond max_connections in total or max_connections_per_peer from one address
// are answered 503 and closed at accept. Protocol errors are answered with the OpenAI error
// object (400 malformed, 408 timeout, 431 headers too large) and the connection closed.
//
// Threading: route(), bind() before run(); run() on one thread (it is the I/O thread);
// begin_drain(), stop() and stats() from any thread. A Reply may be called from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace hypic::api {

struct HttpRequest {
  std::string method;  // as sent ("GET")
  std::string target;  // as sent: path and query
  std::string path;    // percent-decoded, without the query
  std::vector<std::pair<std::string, std::string>> headers;  // as sent, in order
  std::vector<std::pair<std::string, std::string>> query;    // decoded ('+' is a space)
  std::vector<std::string> matches;  // the route pattern's groups; [0] is the whole path
  std::string body;
  std::string remote_addr;
  int remote_port = 0;
  // True once the peer has closed its side (or the connection ended). Cheap; any thread.
  std::shared_ptr<const std::atomic<bool>> peer_gone;

  // Case-insensitive; "" when absent.
  std::string header(std::string_view name) const;
  bool has_header(std::string_view name) const;
  bool has_param(std::string_view name) const;
  std::string param(std::string_view name) const;  // the first value; "" when absent
  std::function<bool()> client_gone() const;
};

// A response body produced over time (Server-Sent Events). Polled on the I/O thread only.
class BodyStream {
 public:
  virtual ~BodyStream() = default;
  enum class Poll { kData, kPending, kDone };
  // Appends what is ready to *out. kPending (nothing appended): `wake` is called once, from
  // any thread, when more is ready. kDone: what was appended is the last of it.
  virtual Poll poll(std::string* out, const std::function<void()>& wake) = 0;
  // The response will not be completed (peer gone, a write failed or timed out, the server
  // stopped). Called at most once, never after kDone.
  virtual void abandon() = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra ones
  std::shared_ptr<BodyStream> stream;  // set: the body comes from it (chunked), not `body`
  HttpResponse& set(std::string name, std::string value) {
    headers.emplace_back(std::move(name), std::move(value));
    return *this;
  }
};

// The way back to a request's connection: call it once, from any thread. A Reply that is
// destroyed without having been called answers 500, so a request is never left hanging.
class Reply {
 public:
  struct Slot;
  explicit Reply(std::shared_ptr<Slot> s) : slot_(std::move(s)) {}
  void operator()(HttpResponse r) const;

 private:
  std::shared_ptr<Slot> slot_;
};

using Handler = std::function<void(const HttpRequest&, Reply)>;

struct HttpFrontOptions {
  std::string host = "127.0.0.1";
  int port = 8080;             // 0: any free port (port() after bind())
  std::string api_key;         // non-empty: "Authorization: Bearer KEY" on every path but /health
  size_t max_body_bytes = 8u << 20;
  size_t max_header_bytes = 64u << 10;
  int max_connections = 4096;
  int max_connections_per_peer = 256;
  int header_timeout_ms = 10000;
  int body_timeout_ms = 30000;
  int keep_alive_timeout_ms = 5000;
  int write_timeout_ms = 30000;
  int handler_threads = 2;
  // CORS: the Origins whose pages may call this server ("*": any; empty: none, no CORS
  // headers). An allowed Origin gets Access-Control-Allow-Origin on every answer and its
  // preflight (OPTIONS with Access-Control-Request-Method) a 204 without the API key;
  // another Origin's preflight is 403. Credentials (cookies) are never allowed: the key is a
  // header the page sends.
  std::vector<std::string> cors_origins;
  // TLS: the certificate chain and its key (PEM files; both or neither): every connection then
  // speaks HTTPS (HTTP/1.1 inside TLS 1.2 or 1.3), plain HTTP to it is answered 400 and closed.
  // tls_client_ca (PEM): clients must also present a certificate signed by it.
  std::string tls_cert, tls_key, tls_client_ca;
};

struct HttpFrontStats {
  int64_t open_connections = 0;
  int64_t rejected_connections = 0;  // refused at accept (caps)
  int64_t timed_out = 0;             // closed by a header / body / write deadline
  int64_t busy = 0;                  // connections with a request being answered
};

struct RouteOptions {
  bool inline_ok = false;  // cheap and non-blocking: runs on the I/O thread
  bool json_body = false;  // a body must be application/json (else 415)
};

class HttpFront {
 public:
  explicit HttpFront(HttpFrontOptions opt);
  ~HttpFront();  // stop()
  HttpFront(const HttpFront&) = delete;
  HttpFront& operator=(const HttpFront&) = delete;

  // `pattern` is matched against the whole decoded path: literal bytes, optionally ending in
  // one capture, "{id}" (one or more bytes, no '/') or "{path}" (one or more bytes), which
  // becomes matches[1]. Linear time whatever the path (no regex).
  void route(const std::string& method, const std::string& pattern, Handler h, RouteOptions o = {});
  Status bind();
  int port() const;
  // Serves until stop(); this thread is the I/O thread.
  void run();
  // From now on every new request is answered 503 shutting_down (and its connection closed);
  // idle connections are closed; requests being answered go on.
  void begin_drain();
  // Waits up to timeout_ms until no connection is answering a request; true if none is.
  bool wait_idle(int timeout_ms);
  // Closes the listener and every connection (streams in flight are abandoned); run()
  // returns. Idempotent.
  void stop();
  HttpFrontStats stats() const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace hypic::api
