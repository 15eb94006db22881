#include "server/http_server.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <thread>

#include "engine/compose.h"
#include "engine/generate.h"

namespace hypic::server {

using nlohmann::json;

namespace {

bool constant_time_equal(const std::string& a, const std::string& b) {
  unsigned char d = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) d |= uint8_t(a[i]) ^ uint8_t(i < b.size() ? b[i] : 0);
  return d == 0;
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.http_status;
  if (e.http_status == 429 || e.http_status == 503) res.set_header("Retry-After", "1");
  res.set_content(e.to_json().dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

ApiError make_error(int status, std::string msg, std::string type, std::string code,
                    std::string param = "") {
  ApiError e;
  e.http_status = status;
  e.message = std::move(msg);
  e.type = std::move(type);
  e.code = std::move(code);
  e.param = std::move(param);
  return e;
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

struct HttpServer::Impl {
  const Model& model;
  const Tokenizer& tok;
  ServerOptions opt;
  std::unique_ptr<Composer> composer;
  std::unique_ptr<Scheduler> scheduler;
  httplib::Server http;
  std::atomic<uint64_t> next_id{1};
  std::once_flag stop_once;

  Impl(const Model& m, const Tokenizer& t, ServerOptions o) : model(m), tok(t), opt(std::move(o)) {}

  Outcome run_job(const Scheduler::Job& job);
  void handle_completion(const httplib::Request& req, httplib::Response& res, Endpoint ep);
  void setup_routes();
  void log_line(const json& j) {
    if (opt.log_requests) std::fprintf(stderr, "%s\n", dump(j).c_str());
  }
};

Outcome HttpServer::Impl::run_job(const Scheduler::Job& job) {
  Outcome out;
  if (opt.debug_delay_ms > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(opt.debug_delay_ms));
  const ApiRequest& r = job.request;
  ComposeOptions co;
  co.mode = r.mode;
  co.seam = r.seam;
  co.salt = r.cache_salt;
  SeqState st = model.new_state(job.parts.total_tokens() + r.max_tokens + 1);
  std::vector<float> logits;
  ComposeStats cs;
  if (Status s = composer->prefill(job.parts, co, &st, &logits, &cs); !s) {
    out.error = s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kOutOfRange
                    ? bad_request(s.message())
                    : make_error(500, s.message(), "server_error", "internal_error");
    return out;
  }
  GenerateResult g;
  g.prompt_tokens = cs.prompt_tokens;
  const auto& ticket = job.ticket;
  Status d = decode(model, tok, st, std::move(logits), generate_options(r),
                    [&ticket](const std::string& t) { return ticket->push_text(t); }, job.arrival, &g);
  if (!d) {
    out.error = d.code() == StatusCode::kCancelled
                    ? make_error(499, "cancelled by the client", "invalid_request_error", "cancelled")
                    : make_error(500, d.message(), "server_error", "internal_error");
    return out;
  }
  const int64_t completion = int64_t(g.tokens.size());
  out.result = json{
      {"text", g.text},
      {"finish_reason", g.finish_reason},
      {"usage",
       {{"prompt_tokens", cs.prompt_tokens},
        {"completion_tokens", completion},
        {"total_tokens", cs.prompt_tokens + completion},
        {"prompt_tokens_details", {{"cached_tokens", cs.reused_tokens}}},
        {"hypic",
         {{"mode", pic_mode_name(r.mode)},
          {"segments_hit", cs.segments_hit},
          {"segments_missed", cs.segments_missed},
          {"reused_tokens", cs.reused_tokens},
          {"recomputed_tokens", cs.recomputed_tokens},
          {"seam_tokens", cs.seam_tokens},
          {"ttft_ms", g.ttft_ms}}}}}};
  return out;
}

void HttpServer::Impl::handle_completion(const httplib::Request& req, httplib::Response& res,
                                         Endpoint ep) {
  const Timer arrival;
  const bool chat = ep == Endpoint::kChat;
  const std::string id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id++);
  json log{{"id", id}, {"path", req.path}};
  auto fail = [&](const ApiError& e) {
    send_error(res, e);
    log["status"] = e.http_status;
    log["error"] = e.code;
    log["ms"] = arrival.ms();
    log_line(log);
  };
  ApiRequest r;
  if (auto e = parse_request(req.body, ep, opt.limits, &r)) return fail(*e);
  if (r.model != opt.model_name)
    return fail(make_error(404, "the model '" + r.model + "' does not exist; this server serves '" + opt.model_name + "'",
                           "invalid_request_error", "model_not_found", "model"));
  PromptParts parts;
  const int64_t ctx = model.config().max_position_embeddings;
  if (auto e = build_prompt(tok, r, ctx - r.max_tokens, &parts)) return fail(*e);
  Scheduler::Rejection why = Scheduler::Rejection::kNone;
  const bool stream = r.stream, include_usage = r.include_usage;
  log["stream"] = stream;
  log["mode"] = pic_mode_name(r.mode);
  auto ticket = scheduler->submit(std::move(r), std::move(parts), arrival, &why);
  if (!ticket) {
    if (why == Scheduler::Rejection::kQueueFull)
      return fail(make_error(429, "the server is busy (request queue full); retry later", "rate_limit_error", "overloaded"));
    return fail(make_error(503, "the server is shutting down", "server_error", "shutting_down"));
  }
  const std::time_t created = std::time(nullptr);
  const std::string model_name = opt.model_name;
  if (!stream) {
    std::string streamed;
    Outcome o = ticket->wait(&streamed);
    if (o.error) return fail(*o.error);
    json choice{{"index", 0}, {"finish_reason", o.result["finish_reason"]}, {"logprobs", nullptr}};
    if (chat) choice["message"] = {{"role", "assistant"}, {"content", o.result["text"]}};
    else choice["text"] = o.result["text"];
    json body{{"id", id}, {"object", chat ? "chat.completion" : "text_completion"},
              {"created", created}, {"model", model_name}, {"choices", json::array({choice})},
              {"usage", o.result["usage"]}};
    res.set_content(dump(body), "application/json");
    log["status"] = 200;
    log["usage"] = o.result["usage"];
    log["ms"] = arrival.ms();
    log_line(log);
    return;
  }
  // SSE: every event "data: {json}\n\n", then "data: [DONE]\n\n". Errors after the 200
  // header are sent as a data event holding the error object.
  auto chunk = [=](json delta_or_text, json finish) {
    json choice{{"index", 0}, {"finish_reason", finish}, {"logprobs", nullptr}};
    if (chat) choice["delta"] = std::move(delta_or_text);
    else choice["text"] = std::move(delta_or_text);
    return json{{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"},
                {"created", created}, {"model", model_name}, {"choices", json::array({choice})}};
  };
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, ticket, chunk, chat, include_usage, id, created, model_name, log, arrival](
          size_t, httplib::DataSink& sink) mutable {
        auto send = [&](const json& j) {
          const std::string s = "data: " + dump(j) + "\n\n";
          return sink.write(s.data(), s.size());
        };
        if (chat && !send(chunk(json{{"role", "assistant"}, {"content", ""}}, nullptr))) {
          ticket->cancel();
          return false;
        }
        std::string piece;
        Outcome o;
        while (ticket->next(&piece, &o)) {
          if (!send(chunk(chat ? json{{"content", piece}} : json(piece), nullptr))) {
            ticket->cancel();
            log["status"] = 499;
            log_line(log);
            return false;
          }
        }
        if (o.error) {
          send(o.error->to_json());
          log["status"] = o.error->http_status;
        } else {
          send(chunk(chat ? json::object() : json(""), o.result["finish_reason"]));
          if (include_usage)
            send(json{{"id", id}, {"object", chat ? "chat.completion.chunk" : "text_completion"},
                      {"created", created}, {"model", model_name}, {"choices", json::array()},
                      {"usage", o.result["usage"]}});
          log["status"] = 200;
          log["usage"] = o.result["usage"];
        }
        const std::string done = "data: [DONE]\n\n";
        sink.write(done.data(), done.size());
        sink.done();
        log["ms"] = arrival.ms();
        log_line(log);
        return true;
      },
      [ticket](bool success) {
        if (!success) ticket->cancel();
      });
}

void HttpServer::Impl::setup_routes() {
  http.set_payload_max_length(opt.limits.max_body_bytes);
  // Handlers block while their job waits or runs, so the pool needs a thread per admitted
  // job plus some to answer 429s and cheap routes. (httplib's own connection queue behind
  // the pool is unbounded: a per-connection limit is left for the next step.)
  const size_t threads = size_t(std::max(8, opt.scheduler.workers + opt.scheduler.max_queue + 4));
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (opt.api_key.empty() || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    const std::string h = req.get_header_value("Authorization");
    const std::string want = "Bearer " + opt.api_key;
    if (constant_time_equal(h, want)) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res, make_error(401, "missing or invalid API key (send 'Authorization: Bearer KEY')",
                               "invalid_request_error", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404)
      send_error(res, make_error(404, "unknown route " + req.method + " " + req.path, "invalid_request_error", "unknown_url"));
    else if (res.status == 413)
      send_error(res, make_error(413, "request body too large", "invalid_request_error", "request_too_large"));
    else
      send_error(res, make_error(res.status, "HTTP error " + std::to_string(res.status), "invalid_request_error", ""));
  });
  http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    json m{{"id", opt.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "hypic"}};
    res.set_content(dump(json{{"object", "list"}, {"data", json::array({m})}}), "application/json");
  });
  http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_completion(req, res, Endpoint::kChat);
  });
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_completion(req, res, Endpoint::kCompletions);
  });
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { stop(); }

Result<std::unique_ptr<HttpServer>> HttpServer::create(const Model& model, const Tokenizer& tok,
                                                       ServerOptions opt) {
  SegmentStore::Options so;
  so.mem_budget_bytes = opt.cache_mem_bytes;
  so.disk_dir = opt.cache_dir;
  auto store = SegmentStore::open(so);
  if (!store) return store.status().with_context("opening the segment cache");
  auto impl = std::make_unique<Impl>(model, tok, std::move(opt));
  impl->composer = std::make_unique<Composer>(
      model, std::shared_ptr<SegmentStore>(std::move(store).value()),
      std::make_shared<PrefixCache>(impl->opt.cache_mem_bytes));
  Impl* p = impl.get();
  impl->scheduler = std::make_unique<Scheduler>(
      impl->opt.scheduler, [p](const Scheduler::Job& j) { return p->run_job(j); });
  impl->setup_routes();
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

Status HttpServer::bind() {
  auto& o = impl_->opt;
  const bool ok = o.port == 0 ? (o.port = impl_->http.bind_to_any_port(o.host)) > 0
                              : impl_->http.bind_to_port(o.host, o.port);
  if (!ok)
    return io_error("cannot listen on " + o.host + ":" + std::to_string(o.port) +
                    " (in use, or not an address of this machine); pick another --port or --host");
  return Status::ok();
}

int HttpServer::port() const { return impl_->opt.port; }

void HttpServer::run() { impl_->http.listen_after_bind(); }

void HttpServer::stop() {
  std::call_once(impl_->stop_once, [this] {
    impl_->scheduler->shutdown();
    impl_->http.stop();
  });
}

}  // namespace hypic::server
