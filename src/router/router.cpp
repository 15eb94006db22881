// hypic router: affinity keys, forwarding (one thread per request in flight), the reaper,
// and the lifecycle. HTTP routes: router_http.cpp; membership and probes: router_members.cpp.
#include "router/router_impl.h"

namespace hypic::router {

using detail::after_ms;

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

json parse_or_null(const std::string& text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  return j.is_discarded() ? json(nullptr) : j;
}

// The job's result as the instance's server built it: texts and calls collected per choice
// from the events, finish reasons, logprobs and usage from the final event.
api::Outcome final_outcome(const pb::Final& fin, const std::vector<std::string>& texts,
                              const std::vector<std::string>& reasonings,
                              const std::vector<std::vector<api::ToolCall>>& calls, const std::string& addr) {
  const size_t n = std::max<size_t>(1, std::max<size_t>(fin.choices_size(), texts.size()));
  api::Outcome o;
  api::CompletionResult& r = o.completion.emplace();
  for (size_t i = 0; i < n; ++i) {
    const bool own = int(i) < fin.choices_size();
    api::ChoiceResult& c = r.choices.emplace_back();
    c.text = i < texts.size() ? texts[i] : "";
    c.reasoning = i < reasonings.size() ? reasonings[i] : "";
    c.finish_reason = own ? fin.choices(int(i)).finish_reason() : fin.finish_reason();
    const std::string& lp = own ? fin.choices(int(i)).logprobs_json() : (i == 0 ? fin.logprobs_json() : std::string());
    if (!lp.empty()) c.logprobs = parse_or_null(lp);
    if (i < calls.size()) c.tool_calls = calls[i];
  }
  r.usage = api::usage_from_pb(fin.usage());
  r.usage.instance = addr;
  return o;
}

}  // namespace

std::vector<SegKey> affinity_keys(const api::ApiRequest& r, const std::map<std::string, int64_t>& id_bytes) {
  std::vector<SegKey> keys;
  const bool pic = r.mode == PicMode::kHypic || r.mode == PicMode::kNaive;
  const std::string mode = pic_mode_name(r.mode);
  const std::string seg_ns = r.cache_salt + '\0' + std::to_string(r.seam) + '\0' + mode;
  std::string chain;  // the prompt's other text, in order (parts separated by NUL)
  if (r.endpoint == api::Endpoint::kCompletions)
    chain = r.prompt_tokens.empty() ? r.prompt
                                    : std::string(reinterpret_cast<const char*>(r.prompt_tokens.data()),
                                                  r.prompt_tokens.size() * sizeof(int32_t));
  for (const api::Message& m : r.messages)
    for (const api::ContentPart& p : m.parts) {
      if (!p.segment_id.empty() && pic) {
        const auto it = id_bytes.find(p.segment_id);
        keys.push_back({hash_text(3, seg_ns, p.segment_id), it != id_bytes.end() ? it->second : kUnknownSegmentBytes});
      } else if (!p.segment_id.empty()) {
        chain += "\1" + p.segment_id + '\0';
      } else if (p.segment && pic) {
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

void Router::Impl::reap_loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stopping) {
    cv_.wait_for(l, std::chrono::milliseconds(50));
    const auto now = Forward::Clock::now();
    for (const auto& f : active) {
      if (f->ticket->cancelled() || (f->client_gone && f->client_gone())) f->try_cancel();
      else f->cancel_if_late(now);
    }
  }
}

void Router::Impl::run_forward(std::shared_ptr<Forward> f, std::string body, api::Endpoint ep,
                               std::vector<SegKey> keys, std::string id) {
  std::set<std::string> tried;
  std::optional<api::Outcome> outcome;
  std::optional<api::Outcome> last_busy;  // the last 429 / 503 an instance answered
  std::string last_error = "no instance is available (none has joined or answered a health check)";
  bool busy = false;  // healthy instances exist, but all are full or answered 429 / 503
  bool late = false;  // the last attempt was cut for sending nothing in time
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
    req.set_endpoint(ep == api::Endpoint::kChat ? pb::GenerateRequest::CHAT : pb::GenerateRequest::COMPLETIONS);
    req.set_openai_body(body);
    for (const std::string& w : cluster.healthy_workers()) req.add_scatter_workers(w);
    req.set_request_id(id);
    grpc::ClientContext ctx;
    opt.creds->authorize(&ctx);
    if (!f->begin_attempt(&ctx, opt.first_byte_timeout_ms)) break;
    cluster.begin(addr);
    auto reader = combine_stub(addr)->Generate(&ctx, req);
    pb::GenerateEvent ev;
    bool relayed = false;  // the client has received some of this attempt's output (a stream)
    // Per choice: the whole text, reasoning and tool calls (the non-streaming body).
    std::vector<std::string> texts(1), reasonings(1);
    std::vector<std::vector<api::ToolCall>> calls(1);
    bool heard = false;  // some event of this attempt arrived
    while (reader->Read(&ev)) {
      heard = true;
      f->event_arrived(opt.idle_timeout_ms);
      if (ev.has_working()) continue;
      const size_t ch = size_t(std::clamp(ev.choice(), 0, 1023));
      if (ch >= texts.size()) {
        texts.resize(ch + 1);
        reasonings.resize(ch + 1);
        calls.resize(ch + 1);
      }
      // A non-streaming client gets the whole body at the end: pieces are only collected.
      if (ev.has_tool_call_json()) {
        api::ToolCall c;
        int index = 0;
        if (api::tool_call_from_json(parse_or_null(ev.tool_call_json()), &c, &index)) {
          calls[ch].push_back(c);
          relayed |= f->stream;
          if (f->stream && !f->ticket->push_call(std::move(c), index, int(ch))) f->try_cancel();
        }
      } else if (ev.has_reasoning()) {
        reasonings[ch] += ev.reasoning();
        relayed |= f->stream;
        if (f->stream && !f->ticket->push_reasoning(ev.reasoning(), int(ch))) f->try_cancel();
      } else if (ev.has_text()) {
        texts[ch] += ev.text();
        relayed |= f->stream;
        json lp;
        if (!ev.piece_logprobs_json().empty()) lp = json::parse(ev.piece_logprobs_json(), nullptr, false);
        if (lp.is_discarded()) lp = nullptr;
        if (f->stream && !f->ticket->push_text(ev.text(), std::move(lp), int(ch))) f->try_cancel();
      } else if (ev.has_final()) {
        outcome = final_outcome(ev.final(), texts, reasonings, calls, addr);
      } else if (ev.has_error()) {
        api::Outcome o;
        o.error = api::error_from_pb(ev.error());
        outcome = std::move(o);
      }
    }
    const grpc::Status st = reader->Finish();
    cluster.end(addr);
    late = f->end_attempt();
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
    if (late) {  // the instance stopped answering (stopped, hung, cut off)
      char why[160];
      std::snprintf(why, sizeof why, " sent nothing for %g s (the router's %s)",
                    (heard ? opt.idle_timeout_ms : opt.first_byte_timeout_ms) / 1000.0,
                    heard ? "--idle-timeout" : "--first-byte-timeout");
      last_error = "instance " + addr + why;
      log_line(json{{"event", "forward.timeout"}, {"id", id}, {"instance", addr}, {"relayed", relayed}});
      cluster.forward_failed(addr, Cluster::Clock::now());
      tried.insert(addr);
      if (relayed) break;  // the client has part of a stream: it ends with the error
      continue;
    }
    if (f->ticket->cancelled() || st.error_code() == grpc::StatusCode::CANCELLED) {
      outcome = api::Outcome::failed(cut_or_cancelled());
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
  if (!outcome && cancelled) outcome = api::Outcome::failed(cut_or_cancelled());
  if (!outcome && last_busy) outcome = std::move(last_busy);
  if (!outcome && busy)
    outcome = api::Outcome::failed(api::make_error(429, "every instance is busy (at its request limit); retry later",
                                                         "rate_limit_error", "overloaded"));
  if (!outcome && late) outcome = api::Outcome::failed(make_error(504, last_error, "server_error", "instance_timeout"));
  if (!outcome) {
    const bool none = tried.empty();
    outcome = api::Outcome::failed(make_error(none ? 503 : 502, last_error + (none ? "; start `hypic serve --join` instances or pass --instances" : ""),
                                                 "server_error", none ? "no_instance" : "instance_failed"));
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

Router::Router(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Router::~Router() { stop(0); }

Result<std::unique_ptr<Router>> Router::create(RouterOptions opt) {
  if (opt.instances.empty() && opt.grpc_port < 0)
    return invalid_argument("the router needs instances: list them (--instances) or let them join (--grpc-port)");
  for (const auto* list : {&opt.instances, &opt.workers})
    for (const std::string& a : *list)
      if (a.find(':') == std::string::npos) return invalid_argument("member address '" + a + "' is not host:port");
  auto impl = std::make_unique<Impl>(std::move(opt));
  if (!impl->opt.segment_store.empty()) {
    auto redis = kv::open_redis(impl->opt.segment_store);
    if (!redis) return redis.status().with_context("--segment-store");
    impl->records = open_redis_records(std::move(redis).value());
  }
  for (const std::string& a : impl->opt.instances) impl->cluster.add_static(Role::kInstance, a);
  for (const std::string& a : impl->opt.workers) impl->cluster.add_static(Role::kWorker, a);
  if (impl->opt.grpc_port >= 0) {
    impl->service = Impl::make_service(impl.get());
    grpc::ServerBuilder b;
    b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    b.AddListeningPort(host_port(impl->opt.host, impl->opt.grpc_port), impl->opt.creds->server(), &impl->grpc_port);
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
