// Request-smuggling harness of the HTTP front, shared by tests/server/test_http_framing.cpp
// (seeded pipelines under ctest) and tests/fuzz/fuzz_http_framing.cpp (libFuzzer picks them):
// pipelines of well and badly framed requests, each body carrying a complete hidden request,
// sent in pieces to a real HttpFront on loopback and checked against what the framing says.
#pragma once

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api/http_front.h"

namespace hypic::api::framing {

// The source of every choice: a seeded generator, or the fuzzer's bytes.
using Next = std::function<uint32_t()>;

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

constexpr const char* kKey = "framing-key";
constexpr const char* kHidden = "GET /smuggled HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer framing-key\r\n\r\n";

// One request on the wire and what the front must answer to it.
struct Wire {
  std::string bytes;
  int status = 200;      // 400: badly framed (then the connection closes)
  size_t body_size = 0;  // what /echo must report
};

inline std::string hidden_body(const Next& rng) {
  std::string pad(size_t(rng() % 40), 'x');
  return pad + kHidden + pad;
}

inline std::string head(const std::string& method, const std::string& path, const std::vector<std::string>& fields) {
  std::string s = method + " " + path + " HTTP/1.1\r\n";
  for (const std::string& f : fields) s += f + "\r\n";
  return s + "\r\n";
}

inline std::string chunked(const std::string& body, const Next& rng) {
  std::string s;
  for (size_t i = 0; i < body.size();) {
    const size_t n = std::min(body.size() - i, size_t(1 + rng() % 30));
    char len[16];
    std::snprintf(len, sizeof len, "%zx", n);
    s += std::string(len) + "\r\n" + body.substr(i, n) + "\r\n";
    i += n;
  }
  return s + "0\r\n\r\n";
}

// kind 0..3 are well framed (3: refused on its headers, body drained), 4..9 badly.
inline Wire make_wire(int kind, const Next& rng) {
  const std::string host = "Host: h", auth = std::string("Authorization: Bearer ") + kKey;
  const std::string body = hidden_body(rng);
  const std::string cl = "Content-Length: " + std::to_string(body.size());
  static const char* kBadTe[] = {"identity", "gzip", "", "chunked, identity", "chunked, chunked", "gzip, chunked"};
  switch (kind) {
    case 0: return {head("GET", "/ok", {host, auth}), 200, 0};
    case 1: return {head("POST", "/echo", {host, auth, cl}) + body, 200, body.size()};
    case 2: return {head("POST", "/echo", {host, auth, "Transfer-Encoding: chunked"}) + chunked(body, rng), 200, body.size()};
    case 3:  // no key: 401 on the headers, the body drained, the connection kept
      return {head("POST", "/echo", {host, cl}) + body, 401, 0};
    case 4: {
      const std::string te = std::string("Transfer-Encoding: ") + kBadTe[rng() % 6];
      return {head("POST", "/echo", {host, auth, te}) + (rng() % 2 ? chunked(body, rng) : body), 400, 0};
    }
    case 5: return {head("POST", "/echo", {host, auth, cl, "Transfer-Encoding: chunked"}) + chunked(body, rng), 400, 0};
    case 6: return {head("POST", "/echo", {auth, cl}) + body, 400, 0};                   // no Host
    case 7: return {head("POST", "/echo", {host, "Host: other", auth, cl}) + body, 400, 0};  // two
    case 8:  // two different lengths
      return {head("POST", "/echo", {host, auth, cl, "Content-Length: 3"}) + body, 400, 0};
    default:  // a length that is not a number
      return {head("POST", "/echo", {host, auth, "Content-Length: 1x"}) + body, 400, 0};
  }
}

class Front {
 public:
  Front() {
    HttpFrontOptions o;
    o.port = 0;
    o.api_key = kKey;
    front_ = std::make_unique<HttpFront>(o);
    front_->route("GET", "/ok", [](const HttpRequest&, Reply r) { r(HttpResponse{200, "text/plain", "ok", {}, {}}); });
    front_->route("POST", "/echo", [](const HttpRequest& q, Reply r) {
      r(HttpResponse{200, "text/plain", std::to_string(q.body.size()), {}, {}});
    });
    front_->route("GET", "/smuggled", [this](const HttpRequest&, Reply r) {
      smuggled_ += 1;
      r(HttpResponse{200, "text/plain", "smuggled", {}, {}});
    });
    if (Status st = front_->bind(); !st) {
      std::fprintf(stderr, "framing harness: %s\n", st.to_string().c_str());
      std::abort();
    }
    io_ = std::thread([this] { front_->run(); });
  }
  ~Front() {
    front_->stop();
    io_.join();
  }
  int port() const { return front_->port(); }
  int smuggled() const { return smuggled_.load(); }

 private:
  std::unique_ptr<HttpFront> front_;
  std::thread io_;
  std::atomic<int> smuggled_{0};
};

// One response, read again after a signal interrupts the blocking read (libFuzzer's timers):
// the parser keeps what it had.
inline void read_response(tcp::socket& sock, boost::beast::flat_buffer& buf,
                          bhttp::response_parser<bhttp::string_body>& p, boost::system::error_code& ec) {
  do {
    ec = {};
    bhttp::read(sock, buf, p, ec);
  } while (ec == asio::error::interrupted);
}

// Sends the pipeline in pieces of 1..200 bytes and checks the answers: "" when they are right,
// else what was wrong. Counts nothing itself: the hidden requests are the Front's smuggled().
inline std::string check_pipeline(int port, const std::vector<Wire>& wires, const Next& rng) {
  std::string all;
  for (const Wire& w : wires) all += w.bytes;
  asio::io_context io;
  tcp::socket sock(io);
  boost::system::error_code ec;
  // A signal (libFuzzer's timers) may interrupt the blocking connect: connect afresh (the
  // front sees the abandoned connection closed, which it must survive anyway).
  for (int tries = 0; tries < 100; ++tries) {
    ec = {};
    if (sock.is_open()) sock.close(ec);
    sock.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), uint16_t(port)), ec);
    if (ec != asio::error::interrupted) break;
  }
  if (ec) return "connect: " + ec.message();
  const timeval tv{20, 0};  // a front that neither answers nor closes fails here, not hangs
  ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  for (size_t i = 0; i < all.size();) {  // every split of the parser's input
    const size_t k = std::min(all.size() - i, size_t(1 + rng() % 200));
    for (size_t done = 0; done < k && !ec;) {
      done += sock.write_some(asio::buffer(all.data() + i + done, k - done), ec);
      if (ec == asio::error::interrupted) ec = {};
    }
    if (ec) break;  // closed after a 400: the rest is not read
    i += k;
  }
  boost::beast::flat_buffer buf;
  std::string ctx = "(status/bytes:";
  for (const Wire& w : wires) ctx += " " + std::to_string(w.status) + "/" + std::to_string(w.bytes.size());
  ctx += ")";
  for (size_t i = 0; i < wires.size(); ++i) {
    bhttp::response_parser<bhttp::string_body> parser;
    read_response(sock, buf, parser, ec);
    if (ec) return ctx + " request " + std::to_string(i) + " unanswered: " + ec.message();
    const auto& res = parser.get();
    if (int(res.result_int()) != wires[i].status)
      return ctx + " request " + std::to_string(i) + " answered " + std::to_string(res.result_int()) + ": " + res.body();
    if (wires[i].status == 200 && wires[i].body_size && res.body() != std::to_string(wires[i].body_size))
      return ctx + " request " + std::to_string(i) + ": the body arrived as " + res.body() + " bytes";
    if (wires[i].status != 400) continue;
    bhttp::response_parser<bhttp::string_body> more;  // badly framed: nothing more, the connection closes
    read_response(sock, buf, more, ec);
    if (ec != bhttp::error::end_of_stream && ec != asio::error::eof && ec != asio::error::connection_reset)
      return ctx + " answered after a badly framed request: " + ec.message() + " " +
             std::to_string(more.get().result_int());
    return "";
  }
  return "";
}

}  // namespace hypic::api::framing
