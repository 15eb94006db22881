#include "api/http_front.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <future>

#include "api/anthropic.h"
#include "api/http_front_impl.h"
#include "api/http_util.h"

namespace hypic::api {

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(uint8_t(a[i])) != std::tolower(uint8_t(b[i]))) return false;
  return true;
}

HttpResponse shaped_error(const std::string& path, const ApiError& e) {
  return path == kMessagesPath ? anthropic_error_reply(e) : error_reply(e);
}

HttpResponse front_error(int status, std::string message, std::string code, const std::string& path) {
  return shaped_error(path, make_error(status, std::move(message), status >= 500 ? "server_error" : "invalid_request_error",
                                       std::move(code)));
}

HandlerPool::HandlerPool(int n) {
  for (int i = 0; i < std::max(1, n); ++i) threads_.emplace_back([this] { loop(); });
}

HandlerPool::~HandlerPool() { stop(); }

void HandlerPool::post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> l(mu_);
    jobs_.push_back(std::move(fn));
  }
  cv_.notify_one();
}

void HandlerPool::stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

void HandlerPool::loop() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      fn = std::move(jobs_.front());
      jobs_.pop_front();
    }
    fn();
  }
}

void Reply::operator()(HttpResponse r) const { slot_->send(std::move(r)); }

// ---- HttpRequest ----

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (iequal(k, name)) return v;
  return "";
}

bool HttpRequest::has_header(std::string_view name) const {
  for (const auto& kv : headers)
    if (iequal(kv.first, name)) return true;
  return false;
}

bool HttpRequest::has_param(std::string_view name) const {
  for (const auto& kv : query)
    if (kv.first == name) return true;
  return false;
}

std::string HttpRequest::param(std::string_view name) const {
  for (const auto& [k, v] : query)
    if (k == name) return v;
  return "";
}

std::function<bool()> HttpRequest::client_gone() const {
  if (!peer_gone) return {};
  return [g = peer_gone] { return g->load(); };
}

// ---- HttpFront ----

bool HttpFront::Impl::authorized(const HttpRequest& r) const {
  // The page at / holds no data: it asks for the key and sends it with its requests.
  return opt.api_key.empty() || r.path == "/health" || (r.path == "/" && r.method == "GET") ||
         constant_time_equal(r.header("Authorization"), "Bearer " + opt.api_key) ||
         // Anthropic's clients send the key as x-api-key: taken on their route only.
         (r.path == kMessagesPath && constant_time_equal(r.header("x-api-key"), opt.api_key));
}

Status HttpFront::Impl::make_tls() {
  if (opt.tls_cert.empty() != opt.tls_key.empty())
    return invalid_argument("HTTPS needs both a certificate and its key (--https-cert and --https-key)");
  if (opt.tls_cert.empty()) {
    if (!opt.tls_client_ca.empty()) return invalid_argument("--https-client-ca needs --https-cert and --https-key");
    return Status::ok();
  }
  auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  error_code ec;
  ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                       asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1 |
                       asio::ssl::context::single_dh_use, ec);
  auto bad = [&](const std::string& what, const std::string& file) {
    return invalid_argument("cannot use " + what + " '" + file + "' (" + ec.message() + "): a PEM file is needed");
  };
  if (ctx->use_certificate_chain_file(opt.tls_cert, ec); ec) return bad("the TLS certificate", opt.tls_cert);
  const std::string not_its = "the TLS key '" + opt.tls_key + "' is not the key of the certificate '" + opt.tls_cert + "'";
  if (ctx->use_private_key_file(opt.tls_key, asio::ssl::context::pem, ec); ec)
    return ec.message().find("mismatch") != std::string::npos ? invalid_argument(not_its) : bad("the TLS key", opt.tls_key);
  if (!SSL_CTX_check_private_key(ctx->native_handle())) return invalid_argument(not_its);
  if (!opt.tls_client_ca.empty()) {
    if (ctx->load_verify_file(opt.tls_client_ca, ec); ec) return bad("the client CA", opt.tls_client_ca);
    ctx->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert, ec);
  }
  tls = std::move(ctx);
  return Status::ok();
}

std::string HttpFront::Impl::cors_allow(const HttpRequest& r) const {
  if (opt.cors_origins.empty() || !r.has_header("Origin")) return "";
  const std::string origin = r.header("Origin");
  for (const std::string& o : opt.cors_origins) {
    if (o == "*") return "*";
    if (o == origin) return origin;
  }
  return "";
}

void HttpFront::Impl::accept() {
  if (stopped) return;
  acceptor.async_accept([self = shared_from_this()](const error_code& ec, tcp::socket s) {
    if (self->stopped) return;
    if (ec == asio::error::operation_aborted) return;
    if (ec) {  // e.g. out of file descriptors: try again shortly rather than spin
      self->accept_retry.expires_after(std::chrono::milliseconds(50));
      self->accept_retry.async_wait([self](const error_code& e) {
        if (!e) self->accept();
      });
      return;
    }
    self->on_accept(std::move(s));
    self->accept();
  });
}

void HttpFront::Impl::remove(Connection* c, const std::string& peer, bool counted) {
  if (!counted) {
    rejecting -= 1;
    return;
  }
  if (conns.erase(c) == 0) return;
  open -= 1;
  auto it = per_peer.find(peer);
  if (it != per_peer.end() && --it->second <= 0) per_peer.erase(it);
}

HttpFront::HttpFront(HttpFrontOptions opt) : impl_(std::make_shared<Impl>(std::move(opt))) {}

HttpFront::~HttpFront() { stop(); }

void HttpFront::route(const std::string& method, const std::string& pattern, Handler h, RouteOptions o) {
  Route r;
  r.method = method;
  r.handler = std::move(h);
  r.opt = o;
  r.prefix = pattern;
  for (const auto& [tag, cap] : {std::pair<const char*, Route::Capture>{"{id}", Route::Capture::kSegment},
                                 {"{path}", Route::Capture::kRest}}) {
    const std::string t(tag);
    if (pattern.size() > t.size() && pattern.compare(pattern.size() - t.size(), t.size(), t) == 0) {
      r.prefix = pattern.substr(0, pattern.size() - t.size());
      r.capture = cap;
    }
  }
  impl_->routes.push_back(std::move(r));
}

Status HttpFront::bind() {
  Impl& i = *impl_;
  // Many idle or slow connections cost descriptors, not threads: allow as many as the hard limit.
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  HYPIC_RETURN_IF_ERROR(i.make_tls());
  const std::string where = i.opt.host + ":" + std::to_string(i.opt.port);
  auto fail = [&](const std::string& why) {
    return io_error("cannot listen on " + where + " (" + why + "; in use, or not an address of this machine); pick another --port or --host");
  };
  error_code ec;
  tcp::resolver res(i.io);
  auto eps = res.resolve(i.opt.host, std::to_string(i.opt.port), tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || eps.empty()) return fail(ec ? ec.message() : "no address");
  const tcp::endpoint ep = eps.begin()->endpoint();
  i.acceptor.open(ep.protocol(), ec);
  if (!ec) i.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) i.acceptor.bind(ep, ec);
  if (!ec) i.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    error_code ignored;
    i.acceptor.close(ignored);
    return fail(ec.message());
  }
  i.opt.port = i.acceptor.local_endpoint(ec).port();
  return Status::ok();
}

int HttpFront::port() const { return impl_->opt.port; }

void HttpFront::run() {
  Impl& i = *impl_;
  i.running = true;
  asio::post(i.io, [&i] { i.accept(); });
  auto guard = asio::make_work_guard(i.io);
  i.io.run();
  // Stopped: run what the closes left queued (aborted reads, timers), releasing the
  // connections; they only return now.
  i.io.restart();
  i.io.poll();
}

void HttpFront::begin_drain() {
  asio::post(impl_->io, [i = impl_] {
    i->draining = true;
    i->close_idle();
  });
}

bool HttpFront::wait_idle(int timeout_ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (impl_->busy.load() > 0) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void HttpFront::stop() {
  std::call_once(impl_->stop_once, [this] {
    auto i = impl_;
    if (i->running && !i->io.stopped()) {
      auto closed = std::make_shared<std::promise<void>>();
      auto fut = closed->get_future();
      asio::post(i->io, [i, closed] {
        i->close_all();
        closed->set_value();
      });
      fut.wait_for(std::chrono::seconds(5));
    } else {
      i->close_all();  // no I/O thread runs (none yet, or it ended): nothing else touches them
    }
    i->io.stop();
    i->pool.stop();
  });
}

HttpFrontStats HttpFront::stats() const {
  HttpFrontStats s;
  s.open_connections = impl_->open.load();
  s.rejected_connections = impl_->rejected.load();
  s.timed_out = impl_->timed_out.load();
  s.busy = impl_->busy.load();
  return s;
}

}  // namespace hypic::api
