#include "router/router.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "core/hash.h"
#include "core/timer.h"
#include "core/address.h"
#include "hypic_cluster.grpc.pb.h"
#include "server/combine_service.h"
#include "server/http_front.h"
#include "server/http_util.h"
#include "server/respond.h"

namespace hypic::router {

using nlohmann::json;
namespace pb = cluster::pb;
using server::ApiError;
using server::dump;
using server::make_error;
using server::error_reply;
using server::HttpRequest;
using server::json_reply;
using server::Reply;

namespace {

constexpr size_t kChainBlock = 4096;

uint64_t hash_text(uint64_t seed, const std::string& a, const std::string& b) {
  Xxh64 h(seed);
  const uint64_t n = a.size();
  h.update(&n, sizeof n);
  h.update(a.data(), a.size());
  h.update(b.data(), b.size());
  return h.digest();
}

std::chrono::system_clock::time_point after_ms(int ms) {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(ms);
}

Role role_of(pb::Member::Role r) { return r == pb::Member::WORKER ? Role::kWorker : Role::kInstance; }

}  // namespace

std::vector<SegKey> affinity_keys(const server::ApiRequest& r) {
  std::vector<SegKey> keys;
  const bool pic = r.mode == PicMode::kHypic || r.mode == PicMode::kNaive;
  const std::string mode = pic_mode_name(r.mode);
  const std::string seg_ns = r.cache_salt + '\0' + std::to_string(r.seam) + '\0' + mode;
  std::string chain;  // the prompt's other text, in order (parts separated by NUL)
  if (r.endpoint == server::Endpoint::kCompletions) chain = r.prompt;
  for (const server::Message& m : r.messages)
    for (const server::ContentPart& p : m.parts) {
      if (p.segment && pic && p.segment_id.empty()) {
        keys.push_back({hash_text(2, seg_ns, p.text), int64_t(p.text.size())});
      } else {
        chain += p.text;
        chain += '\0';
      }
    }
  if (!chain.empty())
    keys.push_back({hash_text(1, r.cache_salt + '\0' + mode, chain.substr(0, kChainBlock)), int64_t(chain.size())});
  return keys;
}

// One forwarded request: its gRPC call in flight, for the reaper and stop().
struct Forward {
  std::shared_ptr<server::Ticket> ticket;
  std::function<bool()> client_gone;  // the client's connection has closed
  std::mutex mu;
  grpc::ClientContext* ctx = nullptr;  // the current attempt's call (guarded by mu)
  bool cancel = false;                 // guarded by mu
  void try_cancel() {
    std::lock_guard<std::mutex> l(mu);
    cancel = true;
    if (ctx) ctx->TryCancel();
  }
};

struct Router::Impl {
  RouterOptions opt;
  Cluster cluster;
  std::unique_ptr<server::HttpFront> http;
  std::unique_ptr<grpc::Server> grpc_server;
  int grpc_port = -1;
  struct Service;
  std::unique_ptr<Service> service;

  std::mutex mu_;  // stubs, active, stopping
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<pb::Combine::Stub>> combine_stubs;
  std::map<std::string, std::shared_ptr<pb::SegmentWorker::Stub>> worker_stubs;
  std::set<std::shared_ptr<Forward>> active;
  int forwarding = 0;  // forward threads running (stop() waits for 0)
  bool stopping = false;
  std::thread prober, reaper;
  std::once_flag stop_once;

  std::atomic<uint64_t> next_id{1}, retries{0}, affinity_hits{0}, affinity_bytes{0};
  std::mutex count_mu;
  std::map<int, uint64_t> by_status;  // guarded by count_mu

  explicit Impl(RouterOptions o) : opt(std::move(o)), cluster(opt.cluster) {}

  std::shared_ptr<pb::Combine::Stub> combine_stub(const std::string& a);
  std::shared_ptr<pb::SegmentWorker::Stub> worker_stub(const std::string& a);
  void probe_all();
  void probe_loop();
  void reap_loop();
  void run_forward(std::shared_ptr<Forward> f, std::string body, server::Endpoint ep,
                   std::vector<SegKey> keys, std::string id);
  void handle_completion(const HttpRequest& req, Reply reply, server::Endpoint ep);
  std::string served_model() const {
    return opt.model_name.empty() ? cluster.model_name() : opt.model_name;
  }
  void log_line(const json& j) {
    if (opt.log_requests) std::fprintf(stderr, "%s\n", dump(j).c_str());
  }
  void count(int status) {
    std::lock_guard<std::mutex> l(count_mu);
    by_status[status] += 1;
  }
  std::string metrics_text();
  json cluster_json();
  // The error of a forward that was cancelled: cut at the drain deadline (503), or its
  // client left (499).
  ApiError cut_or_cancelled() {
    std::lock_guard<std::mutex> l(mu_);
    if (!stopping) return server::cancelled_error();
    return make_error(503, "the router is shutting down: this reply was cut at the drain deadline (--drain-timeout); retry the request",
                      "server_error", "shutting_down");
  }
  void setup_routes();
};

struct Router::Impl::Service final : pb::Router::Service {
  explicit Service(Impl* i) : impl(i) {}
  grpc::Status Join(grpc::ServerContext*, const pb::Member* m, pb::JoinReply* out) override {
    if (m->address().empty() || m->address().size() > 256 || m->address().find(':') == std::string::npos)
      return {grpc::StatusCode::INVALID_ARGUMENT, "member address must be host:port"};
    const bool fresh = [&] {
      for (const auto& [r, a] : impl->cluster.members())
        if (r == role_of(m->role()) && a == m->address()) return false;
      return true;
    }();
    impl->cluster.join(role_of(m->role()), m->address(), Cluster::Clock::now());
    if (fresh) {
      impl->log_line(json{{"event", "member.join"}, {"role", role_name(role_of(m->role()))}, {"address", m->address()}});
      impl->cv_.notify_all();  // probe it now rather than at the next interval
    }
    out->set_heartbeat_ms(uint32_t(impl->opt.heartbeat_ms));
    return grpc::Status::OK;
  }
  grpc::Status Leave(grpc::ServerContext*, const pb::Member* m, pb::JoinReply* out) override {
    if (impl->cluster.leave(role_of(m->role()), m->address()))
      impl->log_line(json{{"event", "member.leave"}, {"role", role_name(role_of(m->role()))}, {"address", m->address()}});
    out->set_heartbeat_ms(uint32_t(impl->opt.heartbeat_ms));
    return grpc::Status::OK;
  }
  Impl* impl;
};

std::shared_ptr<pb::Combine::Stub> Router::Impl::combine_stub(const std::string& a) {
  std::lock_guard<std::mutex> l(mu_);
  auto& s = combine_stubs[a];
  if (!s) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(64 << 20);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
    s = pb::Combine::NewStub(grpc::CreateCustomChannel(a, grpc::InsecureChannelCredentials(), args));
  }
  return s;
}

std::shared_ptr<pb::SegmentWorker::Stub> Router::Impl::worker_stub(const std::string& a) {
  std::lock_guard<std::mutex> l(mu_);
  auto& s = worker_stubs[a];
  if (!s) s = pb::SegmentWorker::NewStub(grpc::CreateChannel(a, grpc::InsecureChannelCredentials()));
  return s;
}

void Router::Impl::probe_all() {
  const auto now = Cluster::Clock::now();
  cluster.expire(now);
  for (const auto& [role, addr] : cluster.members()) {
    ProbeResult r;
    grpc::ClientContext ctx;
    ctx.set_deadline(after_ms(opt.probe_timeout_ms));
    if (role == Role::kInstance) {
      pb::InstanceLoad l;
      r.ok = combine_stub(addr)->GetLoad(&ctx, pb::LoadRequest(), &l).ok();
      r.model_name = l.model_name();
      r.fingerprint = l.model_fingerprint();
      r.dtype = l.dtype();
      r.running = l.running();
      r.queued = l.queued();
      r.capacity = l.max_batch() + l.max_queue();
    } else {
      pb::WorkerStatus s;
      r.ok = worker_stub(addr)->GetStatus(&ctx, pb::StatusRequest(), &s).ok();
      r.fingerprint = s.model_fingerprint();
      r.dtype = s.dtype();
    }
    cluster.report(role, addr, r, Cluster::Clock::now());
  }
}

void Router::Impl::probe_loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stopping) {
    l.unlock();
    probe_all();
    l.lock();
    cv_.wait_for(l, std::chrono::milliseconds(opt.probe_interval_ms));
  }
}

void Router::Impl::reap_loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stopping) {
    cv_.wait_for(l, std::chrono::milliseconds(50));
    for (const auto& f : active)
      if (f->ticket->cancelled() || (f->client_gone && f->client_gone())) f->try_cancel();
  }
}

void Router::Impl::run_forward(std::shared_ptr<Forward> f, std::string body, server::Endpoint ep,
                               std::vector<SegKey> keys, std::string id) {
  std::set<std::string> tried;
  std::optional<server::Outcome> outcome;
  std::optional<server::Outcome> last_busy;  // the last 429 / 503 an instance answered
  std::string last_error = "no instance is available (none has joined or answered a health check)";
  bool busy = false;  // healthy instances exist, but all are full or answered 429 / 503
  for (int attempt = 0; attempt < opt.max_attempts && !outcome; ++attempt) {
    auto choice = cluster.choose(keys, tried, &busy);
    if (!choice) break;
    const std::string addr = choice->address;
    if (attempt > 0) retries += 1;
    if (choice->affinity_bytes > 0) {
      affinity_hits += 1;
      affinity_bytes += uint64_t(choice->affinity_bytes);
    }
    pb::GenerateRequest req;
    req.set_endpoint(ep == server::Endpoint::kChat ? pb::GenerateRequest::CHAT : pb::GenerateRequest::COMPLETIONS);
    req.set_openai_body(body);
    for (const std::string& w : cluster.healthy_workers()) req.add_scatter_workers(w);
    req.set_request_id(id);
    grpc::ClientContext ctx;
    {
      std::lock_guard<std::mutex> l(f->mu);
      if (f->cancel) break;
      f->ctx = &ctx;
    }
    cluster.begin(addr);
    auto reader = combine_stub(addr)->Generate(&ctx, req);
    pb::GenerateEvent ev;
    bool relayed = false;
    std::string text;  // the whole reply (the non-streaming body)
    while (reader->Read(&ev)) {
      if (ev.has_text()) {
        relayed = true;
        text += ev.text();
        if (!f->ticket->push_text(ev.text())) f->try_cancel();
      } else if (ev.has_final()) {
        server::Outcome o;
        o.result = json{{"text", text}, {"finish_reason", ev.final().finish_reason()},
                        {"usage", server::usage_from_pb(ev.final().usage())}};
        o.result["usage"]["hypic"]["instance"] = addr;
        outcome = std::move(o);
      } else if (ev.has_error()) {
        server::Outcome o;
        o.error = server::error_from_pb(ev.error());
        outcome = std::move(o);
      }
    }
    const grpc::Status st = reader->Finish();
    cluster.end(addr);
    {
      std::lock_guard<std::mutex> l(f->mu);
      f->ctx = nullptr;
    }
    // An instance that is full (429) or stopping (503) took nothing: try another.
    if (outcome && outcome->error && !relayed &&
        (outcome->error->http_status == 429 || outcome->error->http_status == 503) &&
        attempt + 1 < opt.max_attempts) {
      last_error = "instance " + addr + ": " + outcome->error->message;
      log_line(json{{"event", "forward.busy"}, {"id", id}, {"instance", addr}, {"status", outcome->error->http_status}});
      last_busy = *outcome;
      outcome.reset();
      tried.insert(addr);
      continue;
    }
    if (outcome) break;
    if (f->ticket->cancelled() || st.error_code() == grpc::StatusCode::CANCELLED) {
      outcome = server::Outcome{cut_or_cancelled(), {}};
      break;
    }
    last_error = "instance " + addr + " failed: " + (st.ok() ? "the stream ended without a result" : st.error_message());
    log_line(json{{"event", "forward.failed"}, {"id", id}, {"instance", addr}, {"error", last_error}, {"relayed", relayed}});
    // The instance is down (or went down mid-call): another may serve the request. Other codes
    // (a message over the limit, a protocol mismatch) would fail the same way anywhere.
    const auto code = st.error_code();
    const bool down = st.ok() || code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::UNKNOWN ||
                      code == grpc::StatusCode::INTERNAL || code == grpc::StatusCode::ABORTED ||
                      code == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (!down) break;
    cluster.forward_failed(addr, Cluster::Clock::now());
    tried.insert(addr);
    if (relayed) break;  // text already sent: cannot start over elsewhere
  }
  bool cancelled = false;
  {
    std::lock_guard<std::mutex> l(f->mu);
    cancelled = f->cancel;
  }
  if (!outcome && cancelled) outcome = server::Outcome{cut_or_cancelled(), {}};
  if (!outcome && last_busy) outcome = std::move(last_busy);
  if (!outcome && busy) outcome = server::Outcome{server::make_error(429, "every instance is busy (at its request limit); retry later",
                                                                     "rate_limit_error", "overloaded"), {}};
  if (!outcome) {
    const bool none = tried.empty();
    outcome = server::Outcome{make_error(none ? 503 : 502, last_error + (none ? "; start `hypic serve --join` instances or pass --instances" : ""),
                                         "server_error", none ? "no_instance" : "instance_failed"),
                              {}};
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    active.erase(f);  // before the finish: the reaper only looks at forwards in flight
  }
  f->ticket->finish(std::move(*outcome));
  std::lock_guard<std::mutex> l(mu_);  // the thread's last touch of the Impl
  forwarding -= 1;
  cv_.notify_all();
}

void Router::Impl::handle_completion(const HttpRequest& req, Reply reply, server::Endpoint ep) {
  const Timer arrival;
  server::ReplyMeta m;
  m.chat = ep == server::Endpoint::kChat;
  m.id = (m.chat ? "chatcmpl-r" : "cmpl-r") + std::to_string(next_id++);
  json log{{"id", m.id}, {"path", req.path}};
  auto done = [this, &log, arrival] {
    return server::ReplyDone([this, log, arrival](int status, const json& usage, const std::string& code) mutable {
      log["status"] = status;
      log["ms"] = arrival.ms();
      if (!code.empty()) log["error"] = code;
      if (!usage.is_null()) {
        log["usage"] = usage;
        if (usage.contains("hypic")) log["instance"] = usage["hypic"].value("instance", "");
      }
      log_line(log);
      count(status);
    });
  };
  auto fail = [&](const ApiError& e) {
    reply(error_reply(e));
    done()(e.http_status, nullptr, e.code);
  };
  server::ApiRequest r;
  if (auto e = server::parse_request(req.body, ep, opt.limits, &r)) return fail(*e);
  const std::string served = served_model();
  if (served.empty())
    return fail(make_error(503, "no instance is available (none has joined or answered a health check); start `hypic serve --join` instances or pass --instances",
                           "server_error", "no_instance"));
  if (r.model != served) return fail(server::model_not_found(r.model, served));
  for (const auto& msg : r.messages)
    for (const auto& p : msg.parts)
      if (!p.segment_id.empty())
        return fail(server::bad_request("registered segments ('segment_id') are per instance and cannot be used through the router; "
                                        "send the text as an inline segment (cache_control), which the router routes by cache affinity",
                                        "messages", "unsupported_via_router"));
  m.model = served;
  m.stream = r.stream;
  m.include_usage = r.include_usage;
  m.created = std::time(nullptr);
  log["stream"] = r.stream;
  log["mode"] = pic_mode_name(r.mode);
  auto f = std::make_shared<Forward>();
  f->ticket = std::make_shared<server::Ticket>();
  f->client_gone = req.client_gone();
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stopping) return fail(server::shutting_down_error());
    active.insert(f);
    forwarding += 1;
  }
  std::thread(&Impl::run_forward, this, f, req.body, ep, affinity_keys(r), m.id).detach();
  server::reply_completion(std::move(reply), f->ticket, std::move(m), done());
}

std::string Router::Impl::metrics_text() {
  std::string s;
  auto line = [&](const std::string& name, const std::string& labels, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    s += name + (labels.empty() ? "" : "{" + labels + "}") + " " + buf + "\n";
  };
  s += "# HELP hypic_router_requests_total Completions answered, by HTTP status.\n# TYPE hypic_router_requests_total counter\n";
  {
    std::lock_guard<std::mutex> l(count_mu);
    for (const auto& [st, n] : by_status) line("hypic_router_requests_total", "status=\"" + std::to_string(st) + "\"", double(n));
  }
  s += "# HELP hypic_router_retries_total Forwards retried on another instance.\n# TYPE hypic_router_retries_total counter\n";
  line("hypic_router_retries_total", "", double(retries.load()));
  s += "# HELP hypic_router_affinity_hits_total Forwards sent to the home of some of their segments.\n# TYPE hypic_router_affinity_hits_total counter\n";
  line("hypic_router_affinity_hits_total", "", double(affinity_hits.load()));
  s += "# HELP hypic_router_affinity_bytes_total Segment text bytes routed to their home instance.\n# TYPE hypic_router_affinity_bytes_total counter\n";
  line("hypic_router_affinity_bytes_total", "", double(affinity_bytes.load()));
  s += "# HELP hypic_router_member_up Whether a member answered its health checks.\n# TYPE hypic_router_member_up gauge\n";
  s += "# HELP hypic_router_member_inflight Requests forwarded to an instance and not finished.\n# TYPE hypic_router_member_inflight gauge\n";
  for (const MemberState& mb : cluster.snapshot()) {
    const std::string labels = "role=\"" + std::string(role_name(mb.role)) + "\",address=\"" + mb.address + "\"";
    line("hypic_router_member_up", labels, mb.healthy ? 1 : 0);
    if (mb.role == Role::kInstance) line("hypic_router_member_inflight", labels, mb.inflight);
  }
  return s;
}

json Router::Impl::cluster_json() {
  json members = json::array();
  for (const MemberState& mb : cluster.snapshot())
    members.push_back(json{{"role", role_name(mb.role)}, {"address", mb.address}, {"static", mb.is_static},
                           {"healthy", mb.healthy}, {"model", mb.model_name}, {"fingerprint", mb.fingerprint},
                           {"dtype", mb.dtype}, {"inflight", mb.inflight}, {"forwarded", mb.forwarded},
                           {"running", mb.running}, {"queued", mb.queued}});
  bool mixed = false;
  const std::string model = cluster.model_name(&mixed);
  return json{{"object", "cluster"}, {"model", model}, {"mixed_models", mixed}, {"members", members}};
}

void Router::Impl::setup_routes() {
  server::HttpFrontOptions fo = opt.http;
  fo.host = opt.host;
  fo.port = opt.port;
  fo.api_key = opt.api_key;
  fo.max_body_bytes = opt.limits.max_body_bytes;
  http = std::make_unique<server::HttpFront>(fo);
  const server::RouteOptions cheap{/*inline_ok=*/true, /*json_body=*/false};
  const server::RouteOptions json_body{/*inline_ok=*/false, /*json_body=*/true};
  http->route("GET", "/health", [this](const HttpRequest&, Reply reply) {
    if (served_model().empty()) return reply(error_reply(make_error(503, "no healthy instance", "server_error", "no_instance")));
    reply(json_reply(json{{"status", "ok"}}));
  }, cheap);
  http->route("GET", "/metrics", [this](const HttpRequest&, Reply reply) {
    server::HttpResponse r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = metrics_text();
    reply(std::move(r));
  });
  http->route("GET", "/v1/cluster", [this](const HttpRequest&, Reply reply) { reply(json_reply(cluster_json())); });
  auto model_object = [](const std::string& name) {
    return json{{"id", name}, {"object", "model"}, {"created", 0}, {"owned_by", "hypic"}};
  };
  http->route("GET", "/v1/models", [this, model_object](const HttpRequest&, Reply reply) {
    const std::string name = served_model();
    json data = name.empty() ? json::array() : json::array({model_object(name)});
    reply(json_reply(json{{"object", "list"}, {"data", data}}));
  }, cheap);
  http->route("GET", "/v1/models/{path}", [this, model_object](const HttpRequest& req, Reply reply) {
    const std::string name = served_model();
    if (!name.empty() && req.matches[1] == name) return reply(json_reply(model_object(name)));
    reply(error_reply(server::model_not_found(req.matches[1], name)));
  }, cheap);
  http->route("POST", "/v1/chat/completions", [this](const HttpRequest& req, Reply reply) {
    handle_completion(req, std::move(reply), server::Endpoint::kChat);
  }, json_body);
  http->route("POST", "/v1/completions", [this](const HttpRequest& req, Reply reply) {
    handle_completion(req, std::move(reply), server::Endpoint::kCompletions);
  }, json_body);
  auto per_instance = [](const HttpRequest&, Reply reply) {
    reply(error_reply(server::bad_request("segment registration is per instance (its ids are that instance's): register on an "
                                          "instance directly, or send the text as an inline segment, which the router routes by cache affinity",
                                          "", "unsupported_via_router")));
  };
  http->route("POST", "/v1/segments", per_instance, json_body);
  http->route("GET", "/v1/segments", per_instance, cheap);
  http->route("GET", "/v1/segments/{id}", per_instance, cheap);
  http->route("DELETE", "/v1/segments/{id}", per_instance, cheap);
}

Router::Router(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Router::~Router() { stop(0); }

Result<std::unique_ptr<Router>> Router::create(RouterOptions opt) {
  if (opt.instances.empty() && opt.grpc_port < 0)
    return invalid_argument("the router needs instances: list them (--instances) or let them join (--grpc-port)");
  for (const auto* list : {&opt.instances, &opt.workers})
    for (const std::string& a : *list)
      if (a.find(':') == std::string::npos) return invalid_argument("member address '" + a + "' is not host:port");
  auto impl = std::make_unique<Impl>(std::move(opt));
  for (const std::string& a : impl->opt.instances) impl->cluster.add_static(Role::kInstance, a);
  for (const std::string& a : impl->opt.workers) impl->cluster.add_static(Role::kWorker, a);
  if (impl->opt.grpc_port >= 0) {
    impl->service = std::make_unique<Impl::Service>(impl.get());
    grpc::ServerBuilder b;
    b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    b.AddListeningPort(host_port(impl->opt.host, impl->opt.grpc_port), grpc::InsecureServerCredentials(), &impl->grpc_port);
    b.RegisterService(impl->service.get());
    impl->grpc_server = b.BuildAndStart();
    if (!impl->grpc_server || impl->grpc_port == 0)
      return io_error("cannot listen for gRPC on " + host_port(impl->opt.host, impl->opt.grpc_port) +
                      ": is the port in use? Pick another --grpc-port (0: any free port)");
  }
  impl->setup_routes();
  impl->probe_all();  // static members are known (or not) before the first request
  Impl* p = impl.get();
  impl->prober = std::thread([p] { p->probe_loop(); });
  impl->reaper = std::thread([p] { p->reap_loop(); });
  return std::unique_ptr<Router>(new Router(std::move(impl)));
}

Status Router::bind() {
  Status s = impl_->http->bind();
  if (s) impl_->opt.port = impl_->http->port();
  return s;
}

int Router::port() const { return impl_->opt.port; }
int Router::grpc_port() const { return impl_->grpc_port; }
void Router::run() { impl_->http->run(); }
const Cluster& Router::cluster() const { return impl_->cluster; }

void Router::stop(int grace_ms) {
  std::call_once(impl_->stop_once, [this, grace_ms] {
    Impl& i = *impl_;
    i.http->begin_drain();  // new requests: 503
    std::unique_lock<std::mutex> l(i.mu_);
    i.stopping = true;
    i.cv_.notify_all();
    // Forwards in flight finish within the grace, then are cancelled.
    if (!i.cv_.wait_for(l, std::chrono::milliseconds(grace_ms), [&] { return i.forwarding == 0; }))
      for (const auto& f : i.active) f->try_cancel();
    i.cv_.wait(l, [&] { return i.forwarding == 0; });
    l.unlock();
    i.http->wait_idle(2000);  // what the forwards relayed is still being written
    i.http->stop();
    if (i.prober.joinable()) i.prober.join();
    if (i.reaper.joinable()) i.reaper.join();
    if (i.grpc_server) i.grpc_server->Shutdown(after_ms(500));
  });
}

}  // namespace hypic::router
