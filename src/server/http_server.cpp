#include "server/http_server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <functional>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "api/anthropic.h"
#include "api/http_front.h"
#include "api/http_util.h"
#include "api/request_tools.h"
#include "api/respond.h"
#include "checkpoint/safetensors.h"
#include "core/log.h"
#include "core/version.h"
#include "engine/prompt.h"
#include "engine/runner.h"
#include "kernels/system_info.h"
#include "kv/redis.h"
#include "server/admission.h"
#include "server/combine_service.h"
#include "server/jobs.h"
#include "server/metrics.h"
#include "server/segment_registry.h"
#include "server/ui_page.h"

namespace hypic::server {

using namespace api;  // the server speaks the API's types

using nlohmann::json;

namespace {

// Copies the fields of a completion's usage that the request log line shows at top level.
void log_usage(json& log, const json& usage) {
  log["usage"] = usage;
  if (auto h = usage.find("hypic"); h != usage.end())
    for (const char* k : {"ttft_ms", "segments_hit", "segments_missed"})
      if (h->contains(k)) log[k] = (*h)[k];
}

}  // namespace

constexpr std::chrono::seconds kWatchPeriod{1};

struct HttpServer::Impl {
  using Clock = SegmentRegistry::Clock;
  const Model& model;
  const Tokenizer& tok;
  ServerOptions opt;
  // Declared before the scheduler, whose workers use them (members die in reverse order).
  ServerMetrics metrics;
  std::unique_ptr<SegmentRegistry> registry;
  std::shared_ptr<SegmentStore> store;
  std::unique_ptr<cluster::Scatter> scatter;  // set when segment parallelism is configured
  std::unique_ptr<Runner> runner;
  std::unique_ptr<Jobs> jobs;  // what the scheduler's prefill threads run
  std::unique_ptr<Scheduler> scheduler;
  std::unique_ptr<Admission> admission;    // completions in, over HTTP and from a router
  std::unique_ptr<CombineServer> combine;  // after the admission: its calls use it
  std::unique_ptr<HttpFront> http;
  std::atomic<uint64_t> next_id{1};
  std::atomic<bool> stopping{false};
  std::once_flag stop_once;
  bool bound = false;  // bind() succeeded: there is something to drain
  // Shared records: a thread that looks every kWatchPeriod whether they forgot everything
  // (SegmentRegistry::republish_if_forgotten), so ids held only here come back without a lookup.
  std::thread watch;
  std::mutex watch_mu;
  std::condition_variable watch_cv;
  bool watch_stop = false;  // guarded by watch_mu

  Impl(const Model& m, const Tokenizer& t, ServerOptions o)
      : model(m), tok(t), opt(std::move(o)) {}
  ~Impl() { stop_watch(); }
  void start_watch() {
    watch = std::thread([this] {
      std::unique_lock<std::mutex> lk(watch_mu);
      while (!watch_stop) {
        lk.unlock();
        registry->republish_if_forgotten(Clock::now());
        lk.lock();
        watch_cv.wait_for(lk, kWatchPeriod, [this] { return watch_stop; });
      }
    });
  }
  void stop_watch() {
    {
      std::lock_guard<std::mutex> lk(watch_mu);
      watch_stop = true;
    }
    watch_cv.notify_all();
    if (watch.joinable()) watch.join();
  }

  // messages_body: the chat body of a POST /v1/messages (answered in Anthropic's shapes).
  void handle_completion(const HttpRequest& req, Reply reply, Endpoint ep, const std::string* messages_body = nullptr);
  void handle_messages(const HttpRequest& req, Reply reply);
  void handle_register(const HttpRequest& req, Reply reply);
  void handle_segment(const HttpRequest& req, Reply reply, bool del);
  void handle_segment_list(const HttpRequest& req, Reply reply);
  void handle_metrics(Reply reply);
  // POST /tokenize, /detokenize, GET /props (Admission::query).
  void handle_query(const HttpRequest& req, Reply reply);
  json props() const;
  std::optional<ApiError> query_salt(const HttpRequest& req, std::string* salt) const;
  void setup_routes();
  // Writes the memory tier's entries to the disk tier (bounded by opt.flush_timeout_ms).
  void flush_cache();
  void log_line(const json& j) {
    if (opt.log_requests) log_json_line(dump(j));
  }
};

std::optional<ApiError> HttpServer::Impl::query_salt(const HttpRequest& req,
                                                     std::string* salt) const {
  *salt = req.param("cache_salt");
  if (salt->size() > opt.limits.max_salt_bytes)
    return bad_request("'cache_salt' longer than " + std::to_string(opt.limits.max_salt_bytes) + " bytes",
                       "cache_salt", "invalid_value");
  return std::nullopt;
}

void HttpServer::Impl::handle_messages(const HttpRequest& req, Reply reply) {
  auto chat = messages_to_chat(req.body, opt.limits);
  if (auto* e = std::get_if<ApiError>(&chat)) {
    admission->finished(e->http_status, json{{"path", req.path}, {"status", e->http_status}, {"error", e->code}});
    return reply(anthropic_error_reply(*e));
  }
  handle_completion(req, std::move(reply), Endpoint::kChat, &std::get<std::string>(chat));
}

void HttpServer::Impl::handle_completion(const HttpRequest& req, Reply reply, Endpoint ep, const std::string* messages_body) {
  const Timer arrival;
  ReplyMeta m;
  m.chat = ep == Endpoint::kChat;
  m.anthropic = messages_body != nullptr;
  m.id = (m.anthropic ? "msg_" : m.chat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id++);
  m.model = opt.model_name;
  json log{{"id", m.id}, {"path", req.path}};
  // The request's log line and metrics, once it ended (the log as it is when this is called).
  auto done = [this, &log, arrival] {
    return ReplyDone([this, log, arrival](int status, const json& usage, const std::string& code) mutable {
      log["status"] = status;
      log["ms"] = arrival.ms();
      if (!code.empty()) log["error"] = code;
      if (!usage.is_null()) log_usage(log, usage);
      admission->finished(status, log);
    });
  };
  ApiRequest r;
  PromptParts parts;
  const auto error = [&m](const ApiError& e) { return m.anthropic ? anthropic_error_reply(e) : error_reply(e); };
  if (auto e = admission->prepare(messages_body ? *messages_body : req.body, ep, &r, &parts)) {
    done()(e->http_status, nullptr, e->code);
    return reply(error(*e));
  }
  m.stream = r.stream;
  m.include_usage = r.include_usage;
  m.choices = r.n;
  log["stream"] = r.stream;
  log["mode"] = pic_mode_name(r.mode);
  // The front watches the socket: a client that leaves cancels the job (before its prefill,
  // or at its next token).
  auto admitted = admission->submit(CompletionJob{std::move(r), std::move(parts), req.client_gone(), {}}, arrival);
  if (auto* e = std::get_if<ApiError>(&admitted)) {
    done()(e->http_status, nullptr, e->code);
    return reply(error(*e));
  }
  m.created = std::time(nullptr);
  reply_completion(std::move(reply), std::get<std::shared_ptr<Ticket>>(std::move(admitted)), std::move(m), done());
}

void HttpServer::Impl::handle_register(const HttpRequest& req, Reply reply) {
  const Timer arrival;
  json log{{"event", "segment.register"}, {"path", req.path}};
  auto fail = [this, reply, arrival](json log, const ApiError& e) {
    log["status"] = e.http_status;
    log["error"] = e.code;
    log["ms"] = arrival.ms();
    log_line(log);  // before the answer, as for completions
    reply(error_reply(e));
  };
  SegmentRequest sr;
  if (auto e = parse_segment_request(req.body, opt.limits, &sr)) return fail(log, *e);
  if (!sr.model.empty() && sr.model != opt.model_name) return fail(log, model_not_found(sr.model, opt.model_name));
  // Tokenised exactly as an inline segment part is, so the two share one cache entry.
  std::vector<int32_t> ids = tok.encode(sr.text, /*parse_special=*/false);
  const int64_t ctx = model.config().max_position_embeddings;
  if (ids.empty()) return fail(log, bad_request("'text' tokenises to nothing", "text", "invalid_value"));
  if (int64_t(ids.size()) >= ctx)
    return fail(log, bad_request("the segment has " + std::to_string(ids.size()) + " tokens; a prompt holding it needs more than the model's context of " +
                                     std::to_string(ctx) + " tokens; split it into smaller segments",
                                 "text", "context_length_exceeded"));
  const auto now = Clock::now();
  admission->sweep(now);
  if (auto e = capacity_error(*registry, registry->would_admit(0, now), 0)) return fail(log, *e);  // before building
  log["ttl"] = sr.ttl_seconds ? json(*sr.ttl_seconds) : json(nullptr);
  auto admitted = admission->submit(RegistrationJob{std::move(ids), sr.cache_salt, sr.seam, sr.ttl_seconds}, arrival);
  if (auto* e = std::get_if<ApiError>(&admitted)) return fail(log, *e);
  when_finished(std::get<std::shared_ptr<Ticket>>(admitted), [this, reply, log, arrival, fail](std::string, Outcome o) mutable {
    if (o.error) return fail(log, *o.error);
    const json seg = segment_json(*o.segment);  // a registration without an error has one
    for (const char* k : {"id", "tokens", "cached", "bytes", "seam"}) log[k] = seg[k];
    log["status"] = 200;
    log["ms"] = arrival.ms();
    log_line(log);
    reply(json_reply(seg));
  });
}

void HttpServer::Impl::handle_segment(const HttpRequest& req, Reply reply, bool del) {
  const std::string sid = req.matches.size() > 1 ? req.matches[1] : std::string();
  std::string salt;
  if (auto e = query_salt(req, &salt)) return reply(error_reply(*e));
  const auto now = Clock::now();
  admission->sweep(now);
  if (!del) {
    Status down;
    SegmentRegistry::Ptr s = registry->find(sid, salt, now, &down);
    if (!down.is_ok()) return reply(error_reply(registry_unavailable(sid, down)));
    if (!s) return reply(error_reply(segment_not_found(sid)));
    return reply(json_reply(segment_json(segment_info(*s))));
  }
  Status why;
  const auto erased = registry->erase(sid, salt, now, &why);
  std::optional<ApiError> err;
  if (erased == SegmentRegistry::Erased::kUnknown) err = segment_not_found(sid);
  if (erased == SegmentRegistry::Erased::kUnavailable) err = record_write_error(why, "deleted");
  json log{{"event", "segment.delete"}, {"id", sid}, {"status", err ? err->http_status : 200}};
  if (!why.is_ok()) log["error"] = why.to_string();
  log_line(log);
  if (err) return reply(error_reply(*err));
  reply(json_reply(json{{"id", sid}, {"object", "segment.deleted"}, {"deleted", true}}));
}

void HttpServer::Impl::handle_segment_list(const HttpRequest& req, Reply reply) {
  std::string salt;
  if (auto e = query_salt(req, &salt)) return reply(error_reply(*e));
  const auto now = Clock::now();
  admission->sweep(now);
  json data = json::array();
  for (const auto& s : registry->list(salt, now)) data.push_back(segment_json(segment_info(*s)));
  reply(json_reply(json{{"object", "list"}, {"data", data}}));
}

void HttpServer::Impl::handle_metrics(Reply reply) {
  const auto now = Clock::now();
  admission->sweep(now);
  ServerMetrics::Live live;
  live.queue_depth = scheduler->queued();
  live.running = scheduler->running();
  const auto t = registry->totals(now);
  live.registered_segments = t.count;
  live.registered_bytes = t.bytes;
  if (registry->options().records && registry->options().records->shared()) {
    live.registry_forgot = t.store_forgot;
    live.registry_republished = t.republished;
  }
  live.cache = store->stats();
  if (const auto& r = store->options().remote) live.remote = r->stats();
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = metrics.render(live);
  reply(std::move(r));
}

void HttpServer::Impl::handle_query(const HttpRequest& req, Reply reply) {
  auto r = admission->query(req.path, req.body);
  if (auto* e = std::get_if<ApiError>(&r)) return reply(error_reply(*e));
  reply(json_reply(std::get<json>(r)));
}

// GET /props: the settings this server runs with, as they took effect (no key, no store address).
json HttpServer::Impl::props() const {
  const ModelConfig& c = model.config();
  const RequestLimits& l = opt.limits;
  json autos = json::array();
  for (auto [on, name] : {std::pair{opt.auto_segments.separator, "separator"}, {opt.auto_segments.parts, "parts"},
                          {opt.auto_segments.tools, "tools"}})
    if (on) autos.push_back(name);
  return json{
      {"model", opt.model_name},
      {"architecture", c.arch_name()},
      {"model_type", c.model_type},
      {"layers", c.num_hidden_layers},
      {"vocab_size", c.vocab_size},
      {"context_tokens", c.max_position_embeddings},
      {"compute_dtype", dtype_name(model.compute_type())},
      {"model_fingerprint", model.fingerprint()},
      {"defaults", {{"max_tokens", l.default_max_tokens}, {"seam", ApiRequest{}.seam}, {"mode", pic_mode_name(ApiRequest{}.mode)}}},
      {"limits", {{"max_tokens", l.max_tokens}, {"max_body_bytes", l.max_body_bytes}, {"max_messages", l.max_messages},
                  {"max_segments", l.max_segments}, {"max_choices", l.max_choices}, {"max_seam", l.max_seam},
                  {"max_segment_ttl_s", l.max_segment_ttl_s}}},
      {"auto_segments", autos},
      {"segment_separator", opt.auto_segments.sep},
      {"reasoning", opt.reasoning != nullptr},
      {"scheduler", {{"workers", opt.scheduler.workers}, {"max_queue", opt.scheduler.max_queue},
                     {"max_batch", opt.scheduler.max_batch}}},
      {"cache", {{"mem_bytes", opt.cache_mem_bytes}, {"disk", !opt.cache_dir.empty()},
                 {"shared_store", !opt.segment_store.empty()}}},
      {"registered_segments", {{"max_segments", opt.max_registered_segments},
                               {"max_bytes", opt.registered_mem_bytes ? opt.registered_mem_bytes : opt.cache_mem_bytes / 2}}},
      {"scatter", !opt.scatter.workers.empty() || opt.scatter.local_lanes > 1},
      {"api_key_required", !opt.api_key.empty()},
      {"drain_timeout_ms", opt.drain_timeout_ms},
      {"version", version()},
      {"system", kernels::system_info_json()}};
}

void HttpServer::Impl::setup_routes() {
  HttpFrontOptions fo = opt.http;
  fo.host = opt.host;
  fo.port = opt.port;
  fo.api_key = opt.api_key;
  fo.max_body_bytes = opt.limits.max_body_bytes;
  http = std::make_unique<HttpFront>(fo);
  const RouteOptions cheap{/*inline_ok=*/true, /*json_body=*/false};
  const RouteOptions json_body{/*inline_ok=*/false, /*json_body=*/true};
  http->route("GET", "/health", [](const HttpRequest&, Reply reply) { reply(json_reply(json{{"status", "ok"}})); }, cheap);
  http->route("GET", "/metrics", [this](const HttpRequest&, Reply reply) { handle_metrics(std::move(reply)); });
  const json model_object{{"id", opt.model_name}, {"object", "model"}, {"created", 0}, {"owned_by", "hypic"}};
  http->route("GET", "/v1/models", [model_object](const HttpRequest&, Reply reply) {
    reply(json_reply(json{{"object", "list"}, {"data", json::array({model_object})}}));
  }, cheap);
  http->route("GET", "/v1/models/{path}", [this, model_object](const HttpRequest& req, Reply reply) {
    if (req.matches[1] == opt.model_name) return reply(json_reply(model_object));
    reply(error_reply(model_not_found(req.matches[1], opt.model_name)));
  }, cheap);
  http->route("GET", "/", [](const HttpRequest&, Reply reply) {
    HttpResponse r;
    r.content_type = "text/html; charset=utf-8";
    r.body = ui_page_html();
    r.set("Cache-Control", "no-cache");
    reply(std::move(r));
  }, cheap);
  http->route("GET", "/version", [](const HttpRequest&, Reply reply) {
    reply(json_reply(version_json()));
  }, cheap);
  auto query = [this](const HttpRequest& req, Reply reply) { handle_query(req, std::move(reply)); };
  http->route("GET", "/props", query);
  http->route("POST", "/tokenize", query, json_body);
  http->route("POST", "/detokenize", query, json_body);
  http->route("POST", "/v1/chat/completions", [this](const HttpRequest& req, Reply reply) {
    handle_completion(req, std::move(reply), Endpoint::kChat);
  }, json_body);
  http->route("POST", "/v1/completions", [this](const HttpRequest& req, Reply reply) {
    handle_completion(req, std::move(reply), Endpoint::kCompletions);
  }, json_body);
  http->route("POST", kMessagesPath, [this](const HttpRequest& req, Reply reply) {
    handle_messages(req, std::move(reply));
  }, json_body);
  http->route("POST", "/v1/segments", [this](const HttpRequest& req, Reply reply) {
    handle_register(req, std::move(reply));
  }, json_body);
  http->route("GET", "/v1/segments", [this](const HttpRequest& req, Reply reply) {
    handle_segment_list(req, std::move(reply));
  });
  http->route("GET", "/v1/segments/{id}", [this](const HttpRequest& req, Reply reply) {
    handle_segment(req, std::move(reply), /*del=*/false);
  });
  http->route("DELETE", "/v1/segments/{id}", [this](const HttpRequest& req, Reply reply) {
    handle_segment(req, std::move(reply), /*del=*/true);
  });
}

namespace {

// Bytes of entry files deleted per try when the registry's database finds the disk full: a
// record is tokens × 4 bytes plus a few WAL pages.
constexpr size_t kRegistryRoomBytes = size_t(1) << 20;

// The registry database in `dir`. A 0-byte file beside entry files is a registry that lost its
// contents (a crash while it was created, a truncation), not a new one: refused, naming it.
Result<std::unique_ptr<SegmentRecords>> open_registry_file(const std::string& dir, const SegmentStore& store) {
  const std::string path = (std::filesystem::path(dir) / kRegistryFile).string();
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  const size_t entries = store.stats().disk_entries;
  if (!ec && size == 0 && entries > 0)
    return corrupt("the segment registry '" + path + "' is empty (0 bytes) but " + dir + " holds " +
                   std::to_string(entries) + " entry files: its registrations were lost (a crash or a "
                   "truncation). Restore the file from a backup, or delete it to start with no registrations "
                   "(the entry files stay as cache)");
  return open_sqlite_records(path);
}

}  // namespace

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { stop(); }

Result<std::unique_ptr<HttpServer>> HttpServer::create(const Model& model, const Tokenizer& tok,
                                                       ServerOptions opt) {
  SegmentStore::Options so;
  so.mem_budget_bytes = opt.cache_mem_bytes;
  so.disk_dir = opt.cache_dir;
  std::shared_ptr<kv::Redis> redis;
  if (!opt.segment_store.empty()) {
    auto r = kv::open_redis(opt.segment_store);
    if (!r) return r.status().with_context("--segment-store");
    redis = std::move(r).value();
    auto tier = redis_tier(RedisTierOptions{}, redis);
    if (!tier) return tier.status();
    so.remote = std::move(tier).value();
    if (auto ping = redis->command({"PING"}); !ping)
      HYPIC_LOG_WARN("--segment-store: %s; serving without it until it answers (registrations get 503 meanwhile)",
                     ping.status().to_string().c_str());
  }
  auto opened = SegmentStore::open(so);
  if (!opened) return opened.status().with_context("opening the segment cache");
  std::shared_ptr<SegmentStore> store = std::move(opened).value();
  auto impl = std::make_unique<Impl>(model, tok, std::move(opt));
  SegmentRegistry::Options ro;
  ro.max_bytes = impl->opt.registered_mem_bytes > 0 ? impl->opt.registered_mem_bytes
                                                    : impl->opt.cache_mem_bytes / 2;
  ro.max_segments = std::max(0, impl->opt.max_registered_segments);
  ro.model = model.fingerprint();
  if (redis) {  // registrations outlive the process and are every instance's
    ro.records = open_redis_records(redis);
  } else if (!impl->opt.cache_dir.empty()) {  // registrations outlive the process
    auto rec = open_registry_file(impl->opt.cache_dir, *store);
    if (!rec) return rec.status();
    ro.records = std::move(rec).value();
    ro.make_room = [store = std::weak_ptr<SegmentStore>(store)] {
      auto s = store.lock();
      return s ? s->shed_disk(kRegistryRoomBytes) : 0;
    };
  }
  impl->registry = std::make_unique<SegmentRegistry>(ro);
  impl->store = store;
  impl->opt.scatter.creds = impl->opt.creds;
  const bool parallel = !impl->opt.scatter.workers.empty() || impl->opt.scatter.local_lanes > 1;
  if (parallel || impl->opt.grpc_port >= 0)  // a router may send workers with each request
    impl->scatter = std::make_unique<cluster::Scatter>(model, impl->store, impl->opt.scatter);
  impl->runner = std::make_unique<Runner>(model, impl->store,
                                          std::make_shared<PrefixCache>(impl->opt.cache_mem_bytes),
                                          impl->scatter.get());
  Impl* p = impl.get();
  Jobs::Options jo;
  jo.parallel = parallel;
  jo.debug_delay_ms = impl->opt.debug_delay_ms;
  jo.debug_piece_delay_ms = impl->opt.debug_piece_delay_ms;
  jo.store = impl->store.get();
  jo.tok = &tok;
  impl->jobs = std::make_unique<Jobs>(*impl->runner, *impl->registry, impl->metrics, jo,
                                      [p] { return p->scheduler->cutting(); });
  impl->scheduler = std::make_unique<Scheduler>(
      impl->opt.scheduler, [jobs = impl->jobs.get()](const Scheduler::Job& j) { return jobs->run(j); },
      &model, &tok);
  Admission::Options ao;
  ao.model_name = impl->opt.model_name;
  ao.limits = impl->opt.limits;
  ao.auto_segments = impl->opt.auto_segments;
  ao.reasoning = impl->opt.reasoning;
  ao.max_batch = impl->opt.scheduler.max_batch;
  ao.max_queue = impl->opt.scheduler.max_queue;
  ao.log_requests = impl->opt.log_requests;
  ao.props = impl->props();
  impl->admission = std::make_unique<Admission>(model, tok, *impl->registry, *impl->scheduler, impl->metrics,
                                                *impl->store, std::move(ao));
  if (ro.records && !ro.records->shared()) {  // shared ones are resolved when used
    auto recs = ro.records->load(ro.model, int64_t(std::time(nullptr)));
    if (!recs) return recs.status().with_context("reading the registered segments");
    auto restored = impl->jobs->restore(*recs);
    if (!restored) return restored.status();
  }
  impl->setup_routes();
  if (impl->opt.grpc_port >= 0) {
    auto cs = CombineServer::start(impl->opt.host, impl->opt.grpc_port, impl->opt.limits.max_body_bytes, *impl->admission,
                                   impl->opt.creds);
    if (!cs) return cs.status();
    impl->combine = std::move(cs).value();
    impl->opt.grpc_port = impl->combine->port();
  }
  if (ro.records && ro.records->shared()) impl->start_watch();
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

Status HttpServer::bind() {
  Status s = impl_->http->bind();
  if (s) impl_->opt.port = impl_->http->port(), impl_->bound = true;
  return s;
}

int HttpServer::port() const { return impl_->opt.port; }

int HttpServer::grpc_port() const { return impl_->opt.grpc_port; }

void HttpServer::run() { impl_->http->run(); }

void HttpServer::stop() {
  std::call_once(impl_->stop_once, [this] {
    Impl& i = *impl_;
    const Timer t;
    i.stopping = true;
    i.http->begin_drain();  // new requests: 503; requests in flight go on
    const int cut = i.scheduler->shutdown(std::chrono::milliseconds(std::max(0, i.opt.drain_timeout_ms)));
    if (i.combine) i.combine->shutdown(1000);
    // What the cut jobs produced is still being written: a moment for that, then close.
    i.http->wait_idle(2000);
    i.http->stop();
    if (i.opt.log_requests && i.bound)
      i.log_line(json{{"event", "drain"}, {"ms", t.ms()}, {"cut", cut}, {"drain_timeout_s", i.opt.drain_timeout_ms / 1000.0}});
    i.stop_watch();
    i.flush_cache();
  });
}

void HttpServer::Impl::flush_cache() {
  if (store->options().disk_dir.empty()) return;
  // Warm restart: what is only in memory goes to the disk tier, whose index the next start reads.
  const Timer t;
  double last = -1e9;
  const auto rep = store->flush(Clock::now() + std::chrono::milliseconds(std::max(0, opt.flush_timeout_ms)),
                                [&](size_t done, size_t total) {
                                  if (t.ms() - last < 1000) return;
                                  last = t.ms();
                                  HYPIC_LOG_INFO("warm restart: %zu of %zu cache entries written to %s", done, total,
                                                 store->options().disk_dir.c_str());
                                });
  if (opt.log_requests)
    log_line(json{{"event", "cache.flush"}, {"ms", t.ms()}, {"entries", rep.candidates}, {"written", rep.written},
                  {"failed", rep.failed}, {"bytes", rep.bytes}, {"timed_out", rep.timed_out}});
}

}  // namespace hypic::server
