#include "server/admission.h"

#include <cstdio>

#include "api/http_util.h"
#include "api/request_tools.h"
#include "api/tokenize.h"
#include "checkpoint/safetensors.h"
#include "core/log.h"
#include "engine/prompt.h"
#include "server/engine_request.h"
#include "server/jobs.h"

namespace hypic::server {

using namespace api;  // the server speaks the API's types

using nlohmann::json;

Admission::Admission(const Model& model, const Tokenizer& tok, SegmentRegistry& registry, Scheduler& scheduler,
                     ServerMetrics& metrics, const SegmentStore& store, Options opt)
    : model_(model), tok_(tok), chat_(model_chat_template(model.config())), registry_(registry),
      scheduler_(scheduler), metrics_(metrics), store_(store), opt_(std::move(opt)) {}

std::optional<ApiError> Admission::prepare(std::string_view body, Endpoint ep, ApiRequest* r,
                                           PromptParts* parts) const {
  if (auto e = parse_request(body, ep, opt_.limits, r)) return e;
  if (r->model != opt_.model_name) return model_not_found(r->model, opt_.model_name);
  if (auto e = apply_auto_segments(r, opt_.auto_segments, opt_.limits)) return e;
  if (auto e = request_grammar(chat_, r)) return e;
  // A reply constrained from its first token (a schema, a required call) has no room for
  // reasoning: its block is written closed.
  if (ep == Endpoint::kChat) {
    r->reasoning = opt_.reasoning;
    r->thinking = r->reasoning && r->enable_thinking.value_or(true) && !(r->grammar && r->grammar_trigger.empty());
  }
  // Registered segments referenced by id: tokens from the tenant's registration.
  const auto now = SegmentRegistry::Clock::now();
  sweep(now);
  const SegmentResolver resolve = [this, r, now](const std::string& sid, std::vector<int32_t>* ids)
      -> std::optional<ApiError> {
    Status down;
    SegmentRegistry::Ptr s = registry_.find(sid, r->cache_salt, now, &down);
    if (!down.is_ok()) return registry_unavailable(sid, down);
    if (!s) return segment_not_found(sid);
    *ids = s->tokens;
    return std::nullopt;
  };
  const int64_t ctx = model_.config().max_position_embeddings;
  return build_prompt(tok_, chat_, *r, ctx - r->max_tokens, parts, resolve);
}

std::variant<ApiError, std::shared_ptr<Ticket>> Admission::submit(Work work, const Timer& arrival) const {
  Scheduler::Rejection why = Scheduler::Rejection::kNone;
  auto ticket = scheduler_.submit(std::move(work), arrival, &why);
  if (ticket) return ticket;
  return why == Scheduler::Rejection::kQueueFull ? overloaded_error() : shutting_down_error();
}

void Admission::sweep(SegmentRegistry::Clock::time_point now) const {
  for (const std::string& id : registry_.sweep(now)) log(json{{"event", "segment.expire"}, {"id", id}});
}

void Admission::log(const json& line) const {
  if (opt_.log_requests) log_json_line(dump(line));
}

void Admission::finished(int status, const json& line) const {
  log(line);
  metrics_.count_request(status);
}

cluster::pb::InstanceLoad Admission::load() const {
  cluster::pb::InstanceLoad l;
  l.set_model_name(opt_.model_name);
  l.set_model_fingerprint(model_.fingerprint());
  l.set_dtype(safetensors_dtype_name(model_.compute_type()));
  l.set_running(scheduler_.running());
  l.set_queued(scheduler_.queued());
  l.set_max_batch(opt_.max_batch);
  l.set_max_queue(opt_.max_queue);
  l.set_cache_bytes(store_.stats().mem_bytes);
  return l;
}

std::variant<ApiError, json> Admission::query(std::string_view path, std::string_view body) const {
  if (path == "/props") return opt_.props;
  if (path == "/detokenize") {
    json out;
    if (auto e = detokenize(body, opt_.limits, opt_.model_name, tok_, &out)) return *e;
    return out;
  }
  if (path != "/tokenize") return make_error(404, "no operation " + std::string(path), "invalid_request_error", "not_found");
  TokenizeRequest t;
  if (auto e = parse_tokenize(body, opt_.limits, opt_.model_name, &t)) return *e;
  std::vector<int32_t> ids;
  if (t.text) {
    ids = tok_.encode(*t.text, t.parse_special);
  } else {
    // The chat as /v1/chat/completions builds it (template, tools, segments by id, auto segments).
    ApiRequest r;
    PromptParts parts;
    if (auto e = prepare(t.chat.dump(), Endpoint::kChat, &r, &parts)) return *e;
    ids = parts.concatenated();
  }
  return tokenize_response(tok_, t, ids, model_.config().max_position_embeddings);
}

}  // namespace hypic::server
