// One HTTP connection's state machine (see http_front.h) and the I/O thread's side of the
// front: accepting under the caps, closing, the Reply's way back.
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <openssl/ssl.h>

#include "api/http_front_impl.h"
#include "api/http_util.h"

namespace hypic::api {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

namespace {

constexpr size_t kDrainBodyBytes = 64u << 10;   // a rejected request's body read to stay in sync
constexpr size_t kWatchBufferBytes = 1u << 20;  // pipelined bytes buffered while answering
constexpr size_t kReadChunk = 16u << 10;
constexpr int kLingerMs = 2000;                 // reading what a closing peer still sends
constexpr int kMaxRejecting = 512;              // refused connections closing gracefully at once

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      out += char(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

void parse_query(std::string_view q, std::vector<std::pair<std::string, std::string>>* out) {
  while (!q.empty()) {
    const size_t amp = q.find('&');
    const std::string_view kv = q.substr(0, amp);
    if (!kv.empty()) {
      const size_t eq = kv.find('=');
      out->emplace_back(percent_decode(kv.substr(0, eq), true),
                        eq == std::string_view::npos ? std::string() : percent_decode(kv.substr(eq + 1), true));
    }
    if (amp == std::string_view::npos) break;
    q.remove_prefix(amp + 1);
  }
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 507: return "Insufficient Storage";
    default: return "";
  }
}

// The media type of a Content-Type value, lower-cased, without parameters.
std::string media_type(std::string_view v) {
  v = v.substr(0, v.find(';'));
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  std::string s(v);
  for (char& c : s) c = char(std::tolower(uint8_t(c)));
  return s;
}

}  // namespace

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  enum class State { kHandshake, kIdle, kHeader, kBody, kWaiting, kWriting, kLinger, kClosed };

  // `counted`: one of the front's connections (caps); else a refused one, only answered.
  Connection(std::shared_ptr<HttpFront::Impl> front, tcp::socket s, std::string peer, int port, bool counted)
      : f_(std::move(front)), sock_(std::move(s)), timer_(f_->io), peer_(std::move(peer)), peer_port_(port),
        counted_(counted), gone_(std::make_shared<std::atomic<bool>>(false)) {
    if (f_->tls) tls_ = std::make_unique<asio::ssl::stream<tcp::socket&>>(sock_, *f_->tls);
  }

  const std::string& peer() const { return peer_; }
  State state() const { return state_; }
  auto executor() { return sock_.get_executor(); }

  void start() {
    error_code ec;
    sock_.set_option(tcp::no_delay(true), ec);
    sock_.non_blocking(true, ec);  // for best-effort synchronous writes only
    if (tls_) return handshake();
    next_request();
  }

  // Answers `r` at once without reading a request, then closes gracefully.
  void reject(HttpResponse r) {
    error_code ec;
    sock_.non_blocking(true, ec);
    close_after_ = true;
    if (tls_) return reject_.emplace(std::move(r)), handshake();  // answered inside TLS
    answer_early(std::move(r));
  }

  // Posted by a Reply.
  void deliver(uint64_t seq, HttpResponse r) {
    if (state_ != State::kWaiting || seq != seq_) {  // stale: the connection moved on or closed
      if (r.stream) r.stream->abandon();
      return;
    }
    write_response(std::move(r));  // even to a peer that half-closed; a failed write closes
  }

  // Kept-alive idle connections close; a new one still gets its answer (503).
  void on_drain() {
    if (state_ == State::kIdle && seq_ > 0) close();
  }

  void close() {
    if (state_ == State::kClosed) return;
    set_state(State::kClosed);
    disarm();
    gone_->store(true);
    if (stream_ && !stream_done_) {
      auto s = std::move(stream_);
      s->abandon();
    }
    stream_.reset();
    error_code ec;
    sock_.shutdown(tcp::socket::shutdown_both, ec);
    sock_.close(ec);
    f_->remove(this, peer_, counted_);
  }

 private:
  void set_state(State s) {
    const bool was = state_ == State::kWaiting || state_ == State::kWriting;
    const bool is = s == State::kWaiting || s == State::kWriting;
    if (was != is) f_->busy += is ? 1 : -1;
    state_ = s;
  }

  // ---- timers: one per connection, re-armed per phase ----
  void arm(int ms) {
    const uint64_t gen = ++timer_gen_;
    timer_.expires_after(std::chrono::milliseconds(ms));
    timer_.async_wait([self = shared_from_this(), gen](const error_code& ec) {
      if (!ec && gen == self->timer_gen_) self->on_timeout();
    });
  }
  void disarm() {
    ++timer_gen_;
    timer_.cancel();
  }
  void on_timeout() {
    switch (state_) {
      case State::kHandshake:  // as slow as a request's headers may be
        f_->timed_out += 1;
        return close();
      case State::kIdle:  // keep-alive idle
      case State::kLinger:
        return close();
      case State::kHeader:
      case State::kBody:
        f_->timed_out += 1;
        send_now(front_error(408, state_ == State::kHeader ? "the request's headers did not arrive in time"
                                                           : "the request's body did not arrive in time",
                             "request_timeout", req_.path));
        return close();
      case State::kWriting:
        f_->timed_out += 1;
        return close();
      case State::kWaiting:
      case State::kClosed:
        return;
    }
  }

  // ---- TLS ----
  void handshake() {
    set_state(State::kHandshake);
    arm(f_->opt.header_timeout_ms);
    tls_->async_handshake(asio::ssl::stream_base::server, [self = shared_from_this()](const error_code& ec) {
      if (self->state_ == State::kClosed) return;
      self->disarm();
      if (ec) return self->refuse_handshake(ec);
      if (!self->reject_) return self->next_request();
      HttpResponse r = std::move(*self->reject_);
      self->reject_.reset();
      self->answer_early(std::move(r));
    });
  }

  // A failed handshake closes the connection; plain HTTP sent to this port (OpenSSL knows its
  // first bytes) is first told, in plain HTTP, to use https.
  void refuse_handshake(const error_code& ec) {
    if (ec.category() == asio::error::get_ssl_category() && ERR_GET_REASON(ec.value()) == SSL_R_HTTP_REQUEST) {
      const std::string body = front_error(400, "this port speaks HTTPS: use https://", "plain_http_to_https_port").body;
      const std::string s = "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
      error_code ignored;
      sock_.write_some(asio::buffer(s), ignored);
    }
    close();
  }

  // ---- reading ----
  void read_more() {
    if (reading_ || state_ == State::kClosed) return;
    reading_ = true;
    // Into a buffer of its own, appended to buf_ when it completes: a read stays in flight while
    // a response is written, and parsing meanwhile (a pipelined request) consumes buf_, which
    // may move its storage under a region handed to the socket.
    auto done = [self = shared_from_this()](const error_code& ec, size_t n) {
      self->reading_ = false;
      if (self->state_ == State::kClosed) return;
      if (ec) return self->on_read_end();
      self->buf_.commit(asio::buffer_copy(self->buf_.prepare(n), asio::buffer(self->rbuf_.data(), n)));
      self->on_data();
    };
    if (tls_) tls_->async_read_some(asio::buffer(rbuf_), std::move(done));
    else sock_.async_read_some(asio::buffer(rbuf_), std::move(done));
  }

  void on_read_end() {  // EOF or a socket error: the peer is gone (or half-closed)
    gone_->store(true);
    switch (state_) {
      case State::kWaiting:  // the handler's job notices through client_gone; its reply closes
        return;
      case State::kWriting:
        if (stream_ && !stream_done_) return close();
        return;  // a plain body being written: finish (or fail) it, then close
      default:
        return close();
    }
  }

  void on_data() {
    switch (state_) {
      case State::kHandshake:  // no reads before it is done
        return;
      case State::kIdle:
        set_state(State::kHeader);
        arm(f_->opt.header_timeout_ms);
        [[fallthrough]];
      case State::kHeader:
      case State::kBody:
        return parse();
      case State::kWaiting:
      case State::kWriting:
        if (buf_.size() < kWatchBufferBytes) read_more();  // watching for the peer's close
        return;
      case State::kLinger:
        buf_.consume(buf_.size());
        return read_more();
      case State::kClosed:
        return;
    }
  }

  void next_request() {
    head_.emplace();
    head_->header_limit(uint32_t(std::min<size_t>(f_->opt.max_header_bytes, UINT32_MAX)));
    head_->body_limit(UINT64_MAX);  // checked on the headers, see decide()
    body_.reset();
    early_.reset();
    close_after_ = false;
    header_bytes_ = 0;
    if (f_->draining && seq_ > 0 && buf_.size() == 0) return close();  // kept alive: done
    if (buf_.size() > 0) {  // a pipelined request is already here
      set_state(State::kHeader);
      arm(f_->opt.header_timeout_ms);
      return parse();
    }
    set_state(State::kIdle);
    arm(f_->opt.keep_alive_timeout_ms);
    read_more();
  }

  void parse() {
    error_code ec;
    if (state_ == State::kHeader) {
      while (!head_->is_header_done()) {
        if (buf_.size() == 0) return read_more();
        const size_t n = head_->put(buf_.data(), ec);
        buf_.consume(n);
        // Beast limits the bytes of one put(); the whole block is limited here.
        header_bytes_ += n;
        if (header_bytes_ > f_->opt.max_header_bytes) ec = bhttp::error::header_limit;
        else if (ec == bhttp::error::need_more) return read_more();
        if (ec) return protocol_error(ec);
      }
      if (!decide()) return;
    }
    if (state_ == State::kBody) {
      while (!body_->is_done()) {
        if (buf_.size() == 0) return read_more();
        const size_t n = body_->put(buf_.data(), ec);
        buf_.consume(n);
        if (ec == bhttp::error::need_more) return read_more();
        if (ec == bhttp::error::body_limit && early_) {  // a rejected request's long body
          close_after_ = true;
          break;
        }
        if (ec == bhttp::error::body_limit) {
          close_after_ = true;
          return answer_early(front_error(413, "request body too large", "request_too_large", req_.path));
        }
        if (ec) return protocol_error(ec);
      }
      disarm();
      if (early_) {
        HttpResponse r = std::move(*early_);
        early_.reset();
        return answer_early(std::move(r));
      }
      req_.body = body_->release().body();
      return dispatch();
    }
  }

  void protocol_error(const error_code& ec) {
    close_after_ = true;
    if (ec == bhttp::error::header_limit)
      return answer_early(front_error(431, "the request's headers are larger than " + std::to_string(f_->opt.max_header_bytes) + " bytes",
                                      "request_header_fields_too_large"));
    answer_early(front_error(400, "malformed HTTP request: " + ec.message(), "bad_request"));
  }

  // Why a request's head frames it ambiguously (RFC 9112), or "" when it does not: a
  // Transfer-Encoding other than exactly "chunked" (the body's length would be unknown, and a
  // body read as empty would run as the next request: smuggling behind a proxy that frames it
  // otherwise), or two Host headers, or none in HTTP/1.1 (§3.2).
  template <class Head>
  static std::string framing_error(const Head& h) {
    std::vector<std::string_view> te;
    int hosts = 0;
    for (const auto& fld : h) {
      if (fld.name() == bhttp::field::transfer_encoding) te.emplace_back(fld.value().data(), fld.value().size());
      if (fld.name() == bhttp::field::host) ++hosts;
    }
    auto trimmed = [](std::string_view v) {
      while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
      while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
      return v;
    };
    if (!te.empty() && !(te.size() == 1 && iequal(trimmed(te[0]), "chunked"))) {
      std::string all;
      for (std::string_view v : te) all += (all.empty() ? "" : ", ") + std::string(v);
      return "unsupported Transfer-Encoding '" + all +
             "': a request body is framed by Content-Length or by 'Transfer-Encoding: chunked' alone";
    }
    if (hosts > 1) return "a request must not have more than one Host header";
    if (hosts == 0 && h.version() == 11) return "an HTTP/1.1 request needs a Host header";
    return "";
  }

  // The request's fate on its headers alone. False when answered (or closed) here.
  bool decide() {
    const auto& h = head_->get();
    req_ = HttpRequest{};
    req_.method = std::string(h.method_string());
    req_.target = std::string(h.target());
    std::string_view t(h.target().data(), h.target().size());
    // The absolute form ("http://host/path", RFC 9112 3.2.2) names the same resource.
    for (std::string_view scheme : {"http://", "https://"})
      if (t.size() > scheme.size() && iequal(t.substr(0, scheme.size()), scheme)) {
        const size_t slash = t.find('/', scheme.size());
        t = slash == std::string_view::npos ? std::string_view("/") : t.substr(slash);
      }
    const size_t q = t.find('?');
    req_.path = percent_decode(t.substr(0, q), false);
    if (q != std::string_view::npos) parse_query(t.substr(q + 1), &req_.query);
    for (const auto& fld : h) req_.headers.emplace_back(std::string(fld.name_string()), std::string(fld.value()));
    req_.remote_addr = peer_;
    req_.remote_port = peer_port_;
    req_.peer_gone = gone_;
    version_ = h.version();
    keep_alive_ = head_->keep_alive();
    if (std::string why = framing_error(h); !why.empty()) {
      close_after_ = true;
      return answer_early(front_error(400, why, "bad_request", req_.path)), false;
    }
    const auto len = head_->content_length();
    const bool has_body = head_->chunked() || (len && *len > 0);

    // (Beast's parser accepts HTTP/1.0 and 1.1 only: other versions are a 400 "bad version".)
    const bool expect_continue = has_body && version_ == 11 && iequal(req_.header("Expect"), "100-continue");
    cors_ = f_->cors_allow(req_);
    const bool preflight = req_.method == "OPTIONS" && !f_->opt.cors_origins.empty() &&
                           req_.has_header("Origin") && req_.has_header("Access-Control-Request-Method");
    if (f_->draining) {
      close_after_ = true;
      early_ = shaped_error(req_.path, shutting_down_error());
    } else if (preflight) {
      early_ = preflight_answer();
    } else if (!f_->authorized(req_)) {
      early_ = front_error(401, "missing or invalid API key (send 'Authorization: Bearer KEY'; on /v1/messages also "
                                "'x-api-key: KEY')", "invalid_api_key", req_.path);
    } else if (len && *len > f_->opt.max_body_bytes) {
      close_after_ = true;
      return answer_early(front_error(413, "request body too large", "request_too_large", req_.path)), false;
    }
    if (early_) {
      if (!has_body) {
        HttpResponse r = std::move(*early_);
        early_.reset();
        return answer_early(std::move(r)), false;
      }
      // Not worth reading, or the client waits for our word before sending it: answer now,
      // then close (what it still sends is read and dropped while the connection closes).
      if ((len && *len > kDrainBodyBytes) || expect_continue) {
        close_after_ = true;
        HttpResponse r = std::move(*early_);
        early_.reset();
        return answer_early(std::move(r)), false;
      }
      start_body(kDrainBodyBytes);
      return true;
    }
    if (expect_continue) {
      wbuf_ += "HTTP/1.1 100 Continue\r\n\r\n";
      flush();
    }
    start_body(f_->opt.max_body_bytes);
    return true;
  }

  void start_body(size_t limit) {
    body_.emplace(std::move(*head_));
    head_.reset();
    body_->body_limit(limit);
    body_->eager(true);
    set_state(State::kBody);
    arm(f_->opt.body_timeout_ms);
  }

  // A CORS preflight (no key needed: browsers send none on it): 204 with what the page may
  // send, or 403 for an Origin not allowed.
  HttpResponse preflight_answer() const {
    if (cors_.empty())
      return front_error(403, "origin '" + req_.header("Origin") + "' is not allowed (the server's --cors-origin list)",
                         "cors_origin_not_allowed", req_.path);
    HttpResponse r;
    r.status = 204;
    r.content_type.clear();
    r.set("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
    r.set("Access-Control-Allow-Headers", req_.has_header("Access-Control-Request-Headers")
                                              ? req_.header("Access-Control-Request-Headers")
                                              : std::string("Authorization, Content-Type"));
    r.set("Access-Control-Max-Age", "600");
    return r;
  }

  // ---- routing and handlers ----
  void dispatch() {
    if (f_->draining) {
      close_after_ = true;
      return answer_early(shaped_error(req_.path, shutting_down_error()));
    }
    const Route* found = nullptr;
    std::string allow;
    std::vector<std::string> m;
    for (const Route& r : f_->routes) {
      if (!r.match(req_.path, &m)) continue;
      if (r.method == req_.method) {
        found = &r;
        break;
      }
      if (allow.find(r.method) == std::string::npos) allow += (allow.empty() ? "" : ", ") + r.method;
    }
    if (!found && allow.empty())
      return answer_early(front_error(404, "unknown route " + req_.method + " " + req_.path, "unknown_url", req_.path));
    if (!found) {
      HttpResponse r = front_error(405, "method " + req_.method + " is not allowed on " + req_.path + " (allowed: " + allow + ")",
                                   "method_not_allowed", req_.path);
      r.set("Allow", allow);
      return answer_early(std::move(r));
    }
    if (found->opt.json_body && !req_.body.empty()) {
      const std::string ct = media_type(req_.header("Content-Type"));
      if (ct != "application/json")
        return answer_early(front_error(415, "the request body must be JSON, sent with 'Content-Type: application/json' (got " +
                                                 (ct.empty() ? std::string("no Content-Type") : "'" + ct + "'") + ")",
                                        "unsupported_media_type", req_.path));
    }
    req_.matches = std::move(m);
    set_state(State::kWaiting);
    ++seq_;
    auto slot = std::make_shared<Reply::Slot>();
    slot->conn = shared_from_this();
    slot->seq = seq_;
    Reply reply(std::move(slot));
    read_more();  // watch for the peer's close while the handler runs
    if (found->opt.inline_ok) return found->handler(req_, std::move(reply));
    auto req = std::make_shared<HttpRequest>(std::move(req_));
    f_->pool.post([h = found->handler, req, reply = std::move(reply)]() mutable { h(*req, std::move(reply)); });
  }

  // An answer the front makes itself (errors before a handler).
  void answer_early(HttpResponse r) {
    disarm();
    set_state(State::kWaiting);
    ++seq_;
    deliver(seq_, std::move(r));
  }

  // Best effort, synchronous and non-blocking: a small answer right before closing. Not
  // inside TLS (a read may be in flight in the TLS stream: the connection just closes).
  void send_now(const HttpResponse& r) {
    if (tls_) return;
    const std::string s = head_bytes(r, r.body.size(), /*chunked=*/false, /*close=*/true) + r.body;
    error_code ec;
    sock_.write_some(asio::buffer(s), ec);
  }

  // ---- writing ----
  std::string head_bytes(const HttpResponse& r, size_t length, bool chunked, bool close) const {
    std::string s = (version_ == 10 ? "HTTP/1.0 " : "HTTP/1.1 ") + std::to_string(r.status) + " " + reason_phrase(r.status) + "\r\n";
    if (!r.content_type.empty()) s += "Content-Type: " + r.content_type + "\r\n";
    for (const auto& [k, v] : r.headers) s += k + ": " + v + "\r\n";
    if (!cors_.empty()) s += "Access-Control-Allow-Origin: " + cors_ + "\r\nVary: Origin\r\n";
    if (chunked) s += "Transfer-Encoding: chunked\r\n";
    else if (!r.stream && r.status != 204) s += "Content-Length: " + std::to_string(length) + "\r\n";
    if (close) s += "Connection: close\r\n";
    else if (version_ == 10) s += "Connection: keep-alive\r\n";
    return s + "\r\n";
  }

  void write_response(HttpResponse r) {
    set_state(State::kWriting);
    if (!keep_alive_ || f_->draining) close_after_ = true;
    chunked_ = r.stream && version_ == 11;
    if (r.stream && !chunked_) close_after_ = true;  // HTTP/1.0: the body ends with the connection
    wbuf_ += head_bytes(r, r.body.size(), chunked_, close_after_);
    if (r.stream) {
      stream_ = std::move(r.stream);
      stream_done_ = false;
      return pump();
    }
    wbuf_ += r.body;
    stream_done_ = true;
    flush();
  }

  void pump() {
    if (state_ != State::kWriting || !stream_ || stream_done_ || writing_) return;
    for (;;) {
      std::string data;
      // The wake holds the connection: a stream waiting for its next piece has no I/O pending.
      const auto p = stream_->poll(&data, [c = shared_from_this()] {
        asio::post(c->sock_.get_executor(), [c] { c->pump(); });
      });
      if (!data.empty()) append_body(data);
      if (p == BodyStream::Poll::kDone) {
        if (chunked_) wbuf_ += "0\r\n\r\n";
        stream_done_ = true;
        break;
      }
      if (p == BodyStream::Poll::kPending) break;
    }
    flush();
  }

  void append_body(const std::string& data) {
    if (!chunked_) {
      wbuf_ += data;
      return;
    }
    char size[24];
    std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    wbuf_ += size;
    wbuf_ += data;
    wbuf_ += "\r\n";
  }

  void flush() {
    if (writing_ || state_ == State::kClosed) return;
    if (wbuf_.empty()) {
      if (state_ == State::kWriting && stream_done_) finish_response();
      return;
    }
    writing_ = true;
    inflight_.swap(wbuf_);
    wbuf_.clear();
    if (state_ == State::kWriting) arm(f_->opt.write_timeout_ms);
    auto done = [self = shared_from_this()](const error_code& ec, size_t) {
      self->writing_ = false;
      self->inflight_.clear();
      if (self->state_ == State::kClosed) return;
      if (ec) return self->close();
      if (self->state_ == State::kWriting) self->disarm();
      if (self->state_ == State::kWriting && self->stream_ && !self->stream_done_) {
        if (self->gone_->load()) return self->close();
        return self->pump();
      }
      self->flush();
    };
    if (tls_) asio::async_write(*tls_, asio::buffer(inflight_), std::move(done));
    else asio::async_write(sock_, asio::buffer(inflight_), std::move(done));
  }

  void finish_response() {
    stream_.reset();
    if (!close_after_ && !gone_->load()) return next_request();
    if (gone_->load()) return close();
    // Graceful: our side ends here; what the peer still sends is read and dropped for a
    // moment, so that closing does not reset the connection before it read the answer.
    error_code ec;
    sock_.shutdown(tcp::socket::shutdown_send, ec);
    set_state(State::kLinger);
    arm(kLingerMs);
    buf_.consume(buf_.size());
    read_more();
  }

  std::shared_ptr<HttpFront::Impl> f_;
  tcp::socket sock_;
  std::unique_ptr<asio::ssl::stream<tcp::socket&>> tls_;  // set: HTTPS, every byte through it
  std::optional<HttpResponse> reject_;  // a refused TLS connection's answer, after the handshake
  asio::steady_timer timer_;
  std::string peer_;
  int peer_port_ = 0;
  bool counted_ = true;
  std::shared_ptr<std::atomic<bool>> gone_;
  State state_ = State::kIdle;
  uint64_t timer_gen_ = 0;
  uint64_t seq_ = 0;
  beast::flat_buffer buf_;
  std::array<char, kReadChunk> rbuf_;  // the read in flight writes here only
  std::optional<bhttp::request_parser<bhttp::empty_body>> head_;
  std::optional<bhttp::request_parser<bhttp::string_body>> body_;
  std::optional<HttpResponse> early_;  // answered once the body is drained
  HttpRequest req_;
  std::string cors_;  // Access-Control-Allow-Origin for the request being answered ("": none)
  unsigned version_ = 11;
  size_t header_bytes_ = 0;  // of this request's header block so far
  bool keep_alive_ = true;
  bool close_after_ = false;
  bool reading_ = false;
  bool writing_ = false;
  std::string wbuf_, inflight_;
  std::shared_ptr<BodyStream> stream_;
  bool stream_done_ = true;
  bool chunked_ = false;
};

Reply::Slot::~Slot() {
  if (!sent.load()) send(front_error(500, "the request's handler ended without an answer", "internal_error"));
}

void Reply::Slot::send(HttpResponse r) {
  if (sent.exchange(true) || !conn) {  // the first answer only
    if (r.stream) r.stream->abandon();
    return;
  }
  // Delivered, and the connection released, on the I/O thread.
  auto ex = conn->executor();
  asio::post(ex, [c = std::move(conn), seq = seq, r = std::move(r)]() mutable { c->deliver(seq, std::move(r)); });
}

void HttpFront::Impl::on_accept(tcp::socket s) {
  error_code ec;
  const auto ep = s.remote_endpoint(ec);
  if (ec) return;
  const std::string peer = ep.address().to_string();
  auto it = per_peer.find(peer);
  const int from_peer = it == per_peer.end() ? 0 : it->second;
  const bool total_full = int64_t(conns.size()) >= opt.max_connections;
  if (total_full || from_peer >= opt.max_connections_per_peer) {
    rejected += 1;
    // Answered 503 and closed gracefully (so the peer reads the answer), unless so many
    // rejections are already closing that this one is just dropped.
    if (rejecting >= kMaxRejecting) {
      s.close(ec);
      return;
    }
    const int cap = total_full ? opt.max_connections : opt.max_connections_per_peer;
    auto c = std::make_shared<Connection>(shared_from_this(), std::move(s), peer, ep.port(), /*counted=*/false);
    rejecting += 1;
    c->reject(error_reply(make_error(503, "too many connections (at most " + std::to_string(cap) +
                                              (total_full ? " in total" : " from one address") +
                                              "); close idle connections or retry later",
                                      "server_error", "too_many_connections")));
    return;
  }
  per_peer[peer] += 1;
  auto c = std::make_shared<Connection>(shared_from_this(), std::move(s), peer, ep.port(), /*counted=*/true);
  conns.insert(c.get());
  open += 1;
  c->start();
}

void HttpFront::Impl::close_all() {
  stopped = true;
  error_code ec;
  acceptor.close(ec);
  accept_retry.cancel();
  std::vector<Connection*> all(conns.begin(), conns.end());
  for (Connection* c : all) c->close();
}

void HttpFront::Impl::close_idle() {
  std::vector<Connection*> idle;
  for (Connection* c : conns)
    if (c->state() == Connection::State::kIdle) idle.push_back(c);
  for (Connection* c : idle) c->on_drain();
}

}  // namespace hypic::api
