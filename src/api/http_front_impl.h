// Internals of the HTTP front shared by http_front.cpp (the front: listener, routes,
// lifecycle) and http_connection.cpp (one connection's state machine). Not for other files.
#pragma once

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "api/http_front.h"
#include "api/request.h"

namespace hypic::api {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;

bool iequal(std::string_view a, std::string_view b);
// An error the front answers for a request to `path` ("" before the path is known): in
// Anthropic's shape on /v1/messages, else an OpenAI error object.
HttpResponse shaped_error(const std::string& path, const ApiError& e);
// An error the front answers itself (type from the status), shaped for `path`.
HttpResponse front_error(int status, std::string message, std::string code, const std::string& path = "");

struct Route {
  std::string method;
  std::string prefix;  // literal part
  enum class Capture { kNone, kSegment, kRest } capture = Capture::kNone;
  Handler handler;
  RouteOptions opt;

  bool match(const std::string& path, std::vector<std::string>* m) const {
    if (path.compare(0, prefix.size(), prefix) != 0) return false;
    const std::string_view rest = std::string_view(path).substr(prefix.size());
    switch (capture) {
      case Capture::kNone:
        if (!rest.empty()) return false;
        break;
      case Capture::kSegment:
        if (rest.empty() || rest.find('/') != std::string_view::npos) return false;
        break;
      case Capture::kRest:
        if (rest.empty()) return false;
        break;
    }
    m->assign({path});
    if (capture != Capture::kNone) m->emplace_back(rest);
    return true;
  }
};

class HandlerPool {
 public:
  explicit HandlerPool(int n);
  ~HandlerPool();
  void post(std::function<void()> fn);
  // Runs what is queued, then joins.
  void stop();

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

class Connection;

// The way back to one request of one connection; it keeps the connection alive until the
// answer is in (or the connection has closed: then the answer is dropped).
struct Reply::Slot {
  std::shared_ptr<Connection> conn;  // moved out by the first send()
  uint64_t seq = 0;
  std::atomic<bool> sent{false};
  ~Slot();  // answers 500 if nothing was sent
  void send(HttpResponse r);  // the first call only
};

struct HttpFront::Impl : std::enable_shared_from_this<HttpFront::Impl> {
  HttpFrontOptions opt;
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_retry{io};
  std::vector<Route> routes;
  HandlerPool pool;
  // I/O thread only:
  std::unordered_set<Connection*> conns;
  std::unordered_map<std::string, int> per_peer;
  int rejecting = 0;  // connections refused by a cap, closing
  bool draining = false;
  bool stopped = false;
  // Any thread:
  std::atomic<bool> running{false};
  std::atomic<int64_t> open{0}, rejected{0}, timed_out{0}, busy{0};
  std::once_flag stop_once;
  std::unique_ptr<asio::ssl::context> tls;  // set by bind() when opt.tls_cert is

  explicit Impl(HttpFrontOptions o) : opt(std::move(o)), pool(opt.handler_threads) {}
  void accept();
  // The I/O thread's side (http_connection.cpp): a new socket (caps, then a Connection);
  // close every connection; close the kept-alive idle ones (drain).
  void on_accept(tcp::socket s);
  void close_all();
  void close_idle();
  void remove(Connection* c, const std::string& peer, bool counted);
  bool authorized(const HttpRequest& r) const;
  // The TLS context of opt.tls_*: an error naming the file that cannot be used.
  Status make_tls();
  // The Access-Control-Allow-Origin answer to r's Origin: "" when CORS is off, r has no
  // Origin or it is not allowed.
  std::string cors_allow(const HttpRequest& r) const;
};

}  // namespace hypic::api
