// The HTTP front never runs bytes of a body as a request (request smuggling), whatever the
// framing: random pipelines of well and badly framed requests on one connection, each body
// carrying a complete hidden request, written in random pieces. Expected: every request up
// to the first badly framed one is answered in order (bodies whole), the bad one gets 400 and
// the connection closes; the hidden requests are never answered. Seeded, so a failure repeats.
// (It found a desync: a read left in flight while a response was written received its bytes
// into storage that parsing the next pipelined request had moved; the next request misparsed.)
#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api/http_front.h"

namespace hypic::server {
namespace {

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

std::string hidden_body(std::mt19937& rng) {
  std::string pad(size_t(rng() % 40), 'x');
  return pad + kHidden + pad;
}

std::string head(const std::string& method, const std::string& path, const std::vector<std::string>& fields) {
  std::string s = method + " " + path + " HTTP/1.1\r\n";
  for (const std::string& f : fields) s += f + "\r\n";
  return s + "\r\n";
}

std::string chunked(const std::string& body, std::mt19937& rng) {
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

Wire make_wire(int kind, std::mt19937& rng) {
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
    EXPECT_TRUE(front_->bind().is_ok());
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

TEST(HttpFraming, NoBodyIsEverRunAsARequest) {
  Front front;
  std::mt19937 rng(20261206);
  int pipelines = 0, bad_seen = 0, drained = 0;
  for (int round = 0; round < 300; ++round) {
    std::vector<Wire> wires;
    const int n = 1 + int(rng() % 6);
    for (int i = 0; i < n; ++i) {
      const bool bad = rng() % 3 == 0;
      wires.push_back(make_wire(bad ? 4 + int(rng() % 6) : int(rng() % 4), rng));
    }
    std::string all;
    for (const Wire& w : wires) all += w.bytes;

    asio::io_context io;
    tcp::socket sock(io);
    sock.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), uint16_t(front.port())));
    const timeval tv{20, 0};  // a front that neither answers nor closes fails here, not hangs
    ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (size_t i = 0; i < all.size();) {  // in random pieces: every split of the parser's input
      const size_t k = std::min(all.size() - i, size_t(1 + rng() % 200));
      boost::system::error_code ec;
      asio::write(sock, asio::buffer(all.data() + i, k), ec);
      if (ec) break;  // closed after a 400: the rest is not read
      i += k;
    }
    boost::beast::flat_buffer buf;
    std::string ctx = "round " + std::to_string(round) + " (status/bytes:";
    for (const Wire& w : wires) ctx += " " + std::to_string(w.status) + "/" + std::to_string(w.bytes.size());
    ctx += ")";
    size_t i = 0;
    for (; i < wires.size(); ++i) {
      bhttp::response<bhttp::string_body> res;
      boost::system::error_code ec;
      bhttp::read(sock, buf, res, ec);
      ASSERT_FALSE(ec) << ctx << ": request " << i << " unanswered: " << ec.message();
      ASSERT_EQ(int(res.result_int()), wires[i].status) << ctx << ", request " << i << ": " << res.body();
      if (wires[i].status == 200 && wires[i].body_size) EXPECT_EQ(res.body(), std::to_string(wires[i].body_size)) << ctx;
      drained += wires[i].status == 401;
      if (wires[i].status == 400) break;
    }
    if (i < wires.size()) {  // the bad request: nothing more is answered, the connection closes
      ++bad_seen;
      bhttp::response<bhttp::string_body> res;
      boost::system::error_code ec;
      bhttp::read(sock, buf, res, ec);
      EXPECT_TRUE(ec == bhttp::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset)
          << ctx << ": answered after a badly framed request: " << ec.message() << " " << res.result_int();
    }
    ++pipelines;
  }
  EXPECT_EQ(front.smuggled(), 0);
  EXPECT_EQ(pipelines, 300);
  EXPECT_GT(bad_seen, 50);  // the generator reaches every case
  EXPECT_GT(drained, 20);
}

}  // namespace
}  // namespace hypic::server
