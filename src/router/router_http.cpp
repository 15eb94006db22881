// The router's HTTP routes: completions (parsed, checked, forwarded), /tokenize, /detokenize and
// /props (forwarded to an instance), /metrics, /v1/cluster.
#include "router/router_impl.h"

namespace hypic::router {

void Router::Impl::handle_completion(const HttpRequest& req, Reply reply, api::Endpoint ep,
                                     const std::string* messages_body) {
  const Timer arrival;
  api::ReplyMeta m;
  m.chat = ep == api::Endpoint::kChat;
  m.anthropic = messages_body != nullptr;
  m.id = (m.anthropic ? "msg_r" : m.chat ? "chatcmpl-r" : "cmpl-r") + std::to_string(next_id++);
  const std::string& body = messages_body ? *messages_body : req.body;
  json log{{"id", m.id}, {"path", req.path}};
  auto done = [this, &log, arrival] {
    return api::ReplyDone([this, log, arrival](int status, const json& usage, const std::string& code) mutable {
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
    reply(m.anthropic ? api::anthropic_error_reply(e) : error_reply(e));
    done()(e.http_status, nullptr, e.code);
  };
  api::ApiRequest r;
  if (auto e = api::parse_request(body, ep, opt.limits, &r)) return fail(*e);
  const std::string served = served_model();
  if (served.empty())
    return fail(make_error(503, "no instance is available (none has joined or answered a health check); start `hypic serve --join` instances or pass --instances",
                           "server_error", "no_instance"));
  if (r.model != served) return fail(api::model_not_found(r.model, served));
  std::map<std::string, int64_t> id_bytes;
  if (auto e = resolve_ids(r, &id_bytes)) return fail(*e);
  m.model = served;
  m.stream = r.stream;
  m.include_usage = r.include_usage;
  m.choices = r.n;
  m.created = std::time(nullptr);
  log["stream"] = r.stream;
  log["mode"] = pic_mode_name(r.mode);
  auto f = std::make_shared<Forward>();
  f->ticket = std::make_shared<api::Ticket>();
  f->client_gone = req.client_gone();
  f->stream = r.stream;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stopping) return fail(api::shutting_down_error());
    active.insert(f);
    forwarding += 1;
  }
  std::thread(&Impl::run_forward, this, f, body, ep, affinity_keys(r, id_bytes), m.id).detach();
  api::reply_completion(std::move(reply), f->ticket, std::move(m), done());
}

std::optional<ApiError> Router::Impl::resolve_ids(const api::ApiRequest& r, std::map<std::string, int64_t>* bytes) {
  const int64_t now = int64_t(std::time(nullptr));
  for (const auto& msg : r.messages)
    for (const auto& p : msg.parts) {
      if (p.segment_id.empty() || bytes->count(p.segment_id)) continue;
      if (!records)
        return api::bad_request("registered segments ('segment_id') are per instance unless the cluster shares a registry: "
                                   "start the router and every instance with --segment-store redis://HOST:PORT, or send the "
                                   "text as an inline segment (cache_control), which the router routes by cache affinity",
                                   "messages", "unsupported_via_router");
      auto rec = records->get(p.segment_id, now);
      if (!rec) {  // the registry does not answer: route without the weight, the instance decides
        HYPIC_LOG_DEBUG("router: %s", rec.status().to_string().c_str());
        (*bytes)[p.segment_id] = kUnknownSegmentBytes;
      } else if (!*rec || (*rec)->salt != r.cache_salt) {
        return api::segment_not_found(p.segment_id);
      } else {
        (*bytes)[p.segment_id] = int64_t((*rec)->tokens.size()) * 4;
      }
    }
  return std::nullopt;
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

// The read-only operations: answered by a healthy instance (the least busy; they serve one
// model), the next one tried when the call fails. /props gains the router's own view.
void Router::Impl::handle_query(const HttpRequest& req, Reply reply) {
  std::set<std::string> tried;
  std::string last = "no instance is available (none has joined or answered a health check)";
  for (int attempt = 0; attempt < opt.max_attempts; ++attempt) {
    const MemberState* pick = nullptr;
    const std::vector<MemberState> members = cluster.snapshot();
    for (const MemberState& mb : members)
      if (mb.role == Role::kInstance && mb.healthy && !tried.count(mb.address) && (!pick || mb.inflight < pick->inflight))
        pick = &mb;
    if (!pick) break;
    const std::string addr = pick->address;
    tried.insert(addr);
    pb::QueryRequest q;
    q.set_path(req.path);
    q.set_body(req.body);
    pb::QueryReply a;
    grpc::ClientContext ctx;
    opt.creds->authorize(&ctx);
    ctx.set_deadline(detail::after_ms(opt.first_byte_timeout_ms));
    const grpc::Status st = combine_stub(addr)->Query(&ctx, q, &a);
    if (!st.ok()) {
      last = "instance " + addr + " did not answer: " + st.error_message();
      continue;
    }
    if (a.has_error()) return reply(error_reply(api::error_from_pb(a.error())));
    json body = json::parse(a.json(), nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded()) {
      last = "instance " + addr + " answered a body that is not JSON";
      continue;
    }
    if (req.path == "/props") {
      body["api_key_required"] = !opt.api_key.empty();
      body["router"] = {{"instance", addr}, {"members", members.size()}, {"version", api::version_json()}};
    }
    return reply(json_reply(body));
  }
  reply(error_reply(make_error(503, last, "server_error", "no_instance")));
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
  api::HttpFrontOptions fo = opt.http;
  fo.host = opt.host;
  fo.port = opt.port;
  fo.api_key = opt.api_key;
  fo.max_body_bytes = opt.limits.max_body_bytes;
  http = std::make_unique<api::HttpFront>(fo);
  const api::RouteOptions cheap{/*inline_ok=*/true, /*json_body=*/false};
  const api::RouteOptions json_body{/*inline_ok=*/false, /*json_body=*/true};
  http->route("GET", "/health", [this](const HttpRequest&, Reply reply) {
    if (served_model().empty()) return reply(error_reply(make_error(503, "no healthy instance", "server_error", "no_instance")));
    reply(json_reply(json{{"status", "ok"}}));
  }, cheap);
  http->route("GET", "/metrics", [this](const HttpRequest&, Reply reply) {
    api::HttpResponse r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = metrics_text();
    reply(std::move(r));
  });
  http->route("GET", "/v1/cluster", [this](const HttpRequest&, Reply reply) { reply(json_reply(cluster_json())); });
  http->route("GET", "/version", [](const HttpRequest&, Reply reply) { reply(json_reply(api::version_json())); }, cheap);
  auto query = [this](const HttpRequest& req, Reply reply) { handle_query(req, std::move(reply)); };
  http->route("GET", "/props", query);
  http->route("POST", "/tokenize", query, json_body);
  http->route("POST", "/detokenize", query, json_body);
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
    reply(error_reply(api::model_not_found(req.matches[1], name)));
  }, cheap);
  http->route("POST", "/v1/chat/completions", [this](const HttpRequest& req, Reply reply) {
    handle_completion(req, std::move(reply), api::Endpoint::kChat);
  }, json_body);
  http->route("POST", "/v1/completions", [this](const HttpRequest& req, Reply reply) {
    handle_completion(req, std::move(reply), api::Endpoint::kCompletions);
  }, json_body);
  // Anthropic's Messages API: translated here, forwarded as chat, answered in its shapes.
  http->route("POST", api::kMessagesPath, [this](const HttpRequest& req, Reply reply) {
    auto chat = api::messages_to_chat(req.body, opt.limits);
    if (auto* e = std::get_if<ApiError>(&chat)) {
      count(e->http_status);
      log_line(json{{"path", req.path}, {"status", e->http_status}, {"error", e->code}});
      return reply(api::anthropic_error_reply(*e));
    }
    handle_completion(req, std::move(reply), api::Endpoint::kChat, &std::get<std::string>(chat));
  }, json_body);
  auto per_instance = [](const HttpRequest&, Reply reply) {
    reply(error_reply(api::bad_request("segment registration is per instance (its ids are that instance's): register on an "
                                          "instance directly, or send the text as an inline segment, which the router routes by cache affinity",
                                          "", "unsupported_via_router")));
  };
  http->route("POST", "/v1/segments", per_instance, json_body);
  http->route("GET", "/v1/segments", per_instance, cheap);
  http->route("GET", "/v1/segments/{id}", per_instance, cheap);
  http->route("DELETE", "/v1/segments/{id}", per_instance, cheap);
}

}  // namespace hypic::router
