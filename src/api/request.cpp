#include "api/request.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <span>

#include "api/request_tools.h"
#include "tokenizer/chat_template.h"

namespace hypic::api {

using nlohmann::json;

json ApiError::to_json() const {
  json e{{"message", message}, {"type", type}};
  e["param"] = param.empty() ? json(nullptr) : json(param);
  e["code"] = code.empty() ? json(nullptr) : json(code);
  return json{{"error", e}};
}

ApiError bad_request(std::string message, std::string param, std::string code) {
  ApiError e;
  e.http_status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

int ApiRequest::segment_count() const {
  int n = 0;
  for (const auto& m : messages)
    for (const auto& p : m.parts) n += p.segment ? 1 : 0;
  return n;
}

namespace {

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number";
    case json::value_t::binary: return "binary";
    case json::value_t::discarded: return "invalid";
  }
  return "invalid";
}

}  // namespace

ApiError wrong_type(const std::string& param, const char* want, const json& v) {
  return bad_request("'" + param + "' must be " + want + ", got " + type_name(v), param,
                     "invalid_type");
}

namespace {

// Integer-valued JSON number (1 and 1.0 both accepted) within [lo, hi].
std::optional<ApiError> get_int(const json& v, const std::string& param, int64_t lo, int64_t hi,
                                int64_t* out) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > uint64_t(hi)) return bad_request("'" + param + "' must be at most " + std::to_string(hi), param, "invalid_value");
    *out = int64_t(u);
  } else if (v.is_number_integer()) {
    *out = v.get<int64_t>();
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    // double(INT64_MAX) rounds up to 2^63, which int64_t cannot hold: that bound is exclusive.
    if (!std::isfinite(d) || d != std::floor(d) || d < double(lo) || d > double(hi) || d >= 9223372036854775808.0)
      return bad_request("'" + param + "' must be an integer in [" + std::to_string(lo) + ", " +
                             std::to_string(hi) + "]", param, "invalid_value");
    *out = int64_t(d);
  } else {
    return wrong_type(param, "an integer", v);
  }
  if (*out < lo || *out > hi)
    return bad_request("'" + param + "' must be an integer in [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "]", param, "invalid_value");
  return std::nullopt;
}

std::optional<ApiError> get_num(const json& v, const std::string& param, double lo, double hi,
                                double* out) {
  if (!v.is_number()) return wrong_type(param, "a number", v);
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || d > hi)
    return bad_request("'" + param + "' must be a number in [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "]", param, "invalid_value");
  *out = d;
  return std::nullopt;
}

std::optional<ApiError> get_bool(const json& v, const std::string& param, bool* out) {
  if (!v.is_boolean()) return wrong_type(param, "a boolean", v);
  *out = v.get<bool>();
  return std::nullopt;
}

bool is_segment_marker(const json& part) {
  if (auto it = part.find("hypic_segment"); it != part.end() && it->is_boolean() && it->get<bool>())
    return true;
  if (auto it = part.find("cache_control"); it != part.end() && it->is_object()) {
    auto t = it->find("type");
    return t != it->end() && t->is_string() && t->get<std::string>() == "segment";
  }
  return false;
}

std::optional<ApiError> parse_segment_ref(const json& p, const std::string& pp,
                                          const RequestLimits& lim, Message* m) {
  auto id = p.find("segment_id");
  if (id == p.end() || id->is_null())
    return bad_request("'" + pp + ".segment_id' is required", pp + ".segment_id", "missing_required_parameter");
  if (!id->is_string()) return wrong_type(pp + ".segment_id", "a string", *id);
  std::string s = id->get<std::string>();
  if (s.empty() || s.size() > lim.max_segment_id_bytes)
    return bad_request("'" + pp + ".segment_id' must be a segment id from POST /v1/segments (1 to " +
                           std::to_string(lim.max_segment_id_bytes) + " bytes)", pp + ".segment_id", "invalid_value");
  if (p.contains("text"))
    return bad_request("a 'segment' part takes no 'text': the registered segment's text is used", pp + ".text", "invalid_value");
  m->parts.push_back({"", true, std::move(s)});
  return std::nullopt;
}

std::optional<ApiError> parse_content(const json& c, const std::string& param,
                                      const RequestLimits& lim, Message* m) {
  if (c.is_string()) {
    m->parts.push_back({c.get<std::string>(), false, ""});
    return std::nullopt;
  }
  if (!c.is_array()) return wrong_type(param, "a string or an array of content parts", c);
  if (c.empty()) return bad_request("'" + param + "' must not be empty", param, "invalid_value");
  for (size_t j = 0; j < c.size(); ++j) {
    const json& p = c[j];
    const std::string pp = param + "[" + std::to_string(j) + "]";
    if (!p.is_object()) return wrong_type(pp, "an object", p);
    auto t = p.find("type");
    if (t == p.end() || t->is_null()) return bad_request("'" + pp + ".type' is required", pp + ".type", "missing_required_parameter");
    if (!t->is_string()) return wrong_type(pp + ".type", "a string", *t);
    if (t->get<std::string>() == "segment") {
      if (auto e = parse_segment_ref(p, pp, lim, m)) return e;
      continue;
    }
    if (t->get<std::string>() != "text")
      return bad_request("content part type '" + t->get<std::string>() +
                             "' is not supported; only 'text' and 'segment' parts are", pp + ".type", "invalid_value");
    auto x = p.find("text");
    if (x == p.end() || x->is_null()) return bad_request("'" + pp + ".text' is required", pp + ".text", "missing_required_parameter");
    if (!x->is_string()) return wrong_type(pp + ".text", "a string", *x);
    if (auto h = p.find("hypic_segment"); h != p.end() && !h->is_boolean())
      return wrong_type(pp + ".hypic_segment", "a boolean", *h);
    if (auto cc = p.find("cache_control"); cc != p.end()) {
      if (!cc->is_object()) return wrong_type(pp + ".cache_control", "an object", *cc);
      auto ct = cc->find("type");
      if (ct == cc->end() || !ct->is_string())
        return bad_request("'" + pp + ".cache_control.type' must be a string", pp + ".cache_control.type", "invalid_type");
      const std::string cts = ct->get<std::string>();
      // "ephemeral" (Anthropic's value) is accepted and means nothing special here.
      if (cts != "segment" && cts != "ephemeral")
        return bad_request("cache_control type must be 'segment' or 'ephemeral'", pp + ".cache_control.type", "invalid_value");
    }
    m->parts.push_back({x->get<std::string>(), is_segment_marker(p), ""});
  }
  return std::nullopt;
}

// Chat: logprobs (a boolean) and top_logprobs (0-20, needs logprobs); completions: logprobs
// (a count of alternatives, 0-20; null or absent: none) and echo (prompt logprobs: not yet).
std::optional<ApiError> parse_logprobs(const json& j, Endpoint ep, ApiRequest* r) {
  auto lp = j.find("logprobs");
  const bool has_lp = lp != j.end() && !lp->is_null();
  if (ep == Endpoint::kCompletions) {
    if (auto e = j.find("echo"); e != j.end() && !e->is_null()) {
      if (!e->is_boolean()) return wrong_type("echo", "a boolean", *e);
      r->echo = e->get<bool>();
    }
    if (!has_lp) return std::nullopt;
    int64_t n = 0;
    if (lp->is_boolean()) return wrong_type("logprobs", "an integer (how many alternatives, 0 to 20)", *lp);
    if (auto e = get_int(*lp, "logprobs", 0, kMaxTopLogprobs, &n)) return e;
    r->logprobs = int(n);
    return std::nullopt;
  }
  auto top = j.find("top_logprobs");
  const bool has_top = top != j.end() && !top->is_null();
  if (has_lp && !lp->is_boolean()) return wrong_type("logprobs", "a boolean", *lp);
  const bool on = has_lp && lp->get<bool>();
  int64_t k = 0;
  if (has_top) {
    if (auto e = get_int(*top, "top_logprobs", 0, kMaxTopLogprobs, &k)) return e;
    if (!on) return bad_request("'top_logprobs' needs 'logprobs': true", "top_logprobs", "invalid_value");
  }
  if (on) r->logprobs = int(k);
  return std::nullopt;
}

// A completions prompt as OpenAI accepts it: a string, or token ids; and either as the only
// element of an array. A batch (several prompts) is refused: one request per prompt.
std::optional<ApiError> parse_prompt(const json& p, ApiRequest* r) {
  const auto is_ids = [](const json& v) {
    return v.is_array() && !v.empty() && std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_number_integer(); });
  };
  const json* one = &p;
  if (p.is_array() && !p.empty() && (p[0].is_string() || p[0].is_array())) {
    if (p.size() != 1)
      return bad_request("batched prompts (an array of " + std::to_string(p.size()) +
                             " prompts) are not supported; send one request per prompt", "prompt", "unsupported_value");
    one = &p[0];
  }
  if (one->is_string()) {
    r->prompt = one->get<std::string>();
    return std::nullopt;
  }
  if (!is_ids(*one))
    return bad_request("'prompt' must be a string or an array of token ids (integers), got " +
                           std::string(one->is_array() && one->empty() ? "an empty array" : one->type_name()),
                       "prompt", "invalid_type");
  r->prompt_tokens.reserve(one->size());
  for (const json& x : *one) {
    if (!x.is_number_unsigned() || x.get<uint64_t>() > uint64_t(INT32_MAX))
      return bad_request("token id " + x.dump() + " in 'prompt' is not a valid token id", "prompt", "invalid_value");
    r->prompt_tokens.push_back(int32_t(x.get<uint64_t>()));
  }
  return std::nullopt;
}

std::optional<ApiError> parse_messages(const json& v, const RequestLimits& lim, ApiRequest* r) {
  if (!v.is_array()) return wrong_type("messages", "an array", v);
  if (v.empty()) return bad_request("'messages' must contain at least one message", "messages", "invalid_value");
  if (v.size() > size_t(lim.max_messages))
    return bad_request("too many messages (at most " + std::to_string(lim.max_messages) + ")", "messages", "invalid_value");
  for (size_t i = 0; i < v.size(); ++i) {
    const json& m = v[i];
    const std::string pm = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return wrong_type(pm, "an object", m);
    auto role = m.find("role");
    if (role == m.end() || role->is_null()) return bad_request("'" + pm + ".role' is required", pm + ".role", "missing_required_parameter");
    if (!role->is_string()) return wrong_type(pm + ".role", "a string", *role);
    Message msg;
    const std::string rs = role->get<std::string>();
    if (rs == "system" || rs == "developer") msg.role = Role::kSystem;
    else if (rs == "user") msg.role = Role::kUser;
    else if (rs == "assistant") msg.role = Role::kAssistant;
    else if (rs == "tool") msg.role = Role::kTool;
    else
      return bad_request("role '" + rs + "' is not supported (system, developer, user, assistant, tool)", pm + ".role", "invalid_value");
    if (auto e = parse_message_tool_fields(m, pm, &msg)) return e;
    for (const char* key : {"reasoning_content", "reasoning"}) {  // vLLM's and llama-server's name, OpenRouter's
      auto rc = m.find(key);
      if (rc == m.end() || rc->is_null()) continue;
      if (msg.role != Role::kAssistant)
        return bad_request("only assistant messages have '" + std::string(key) + "'", pm + "." + key, "invalid_value");
      if (!rc->is_string()) return wrong_type(pm + "." + key, "a string", *rc);
      msg.reasoning = rc->get<std::string>();
    }
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
      if (msg.tool_calls.empty())  // an assistant message of calls only may have no content
        return bad_request("'" + pm + ".content' is required", pm + ".content", "missing_required_parameter");
    } else if (auto e = parse_content(*content, pm + ".content", lim, &msg)) {
      return e;
    }
    if (msg.role != Role::kUser)
      for (size_t j = 0; j < msg.parts.size(); ++j)
        if (msg.parts[j].segment)
          return bad_request("only user content can be marked as a segment", pm + ".content[" + std::to_string(j) + "]", "invalid_value");
    r->messages.push_back(std::move(msg));
  }
  if (r->messages.back().role != Role::kUser && r->messages.back().role != Role::kTool)
    return bad_request("the last message must be from the user (or a tool result)", "messages", "invalid_value");
  if (auto e = check_tool_messages(r->messages)) return e;
  for (size_t i = 0; i + 1 < r->messages.size(); ++i)
    for (size_t j = 0; j < r->messages[i].parts.size(); ++j)
      if (r->messages[i].parts[j].segment)
        return bad_request("segments are only supported in the last user message", "messages[" + std::to_string(i) + "].content[" + std::to_string(j) + "]", "invalid_value");
  // Text between two segments has no place in the prefix/segments/suffix layout.
  const auto& parts = r->messages.back().parts;
  int first = -1, last = -1;
  for (int j = 0; j < int(parts.size()); ++j)
    if (parts[j].segment) { if (first < 0) first = j; last = j; }
  for (int j = first + 1; first >= 0 && j < last; ++j)
    if (!parts[j].segment)
      return bad_request("text between two segment parts is not supported; mark it as a segment or move it",
                         "messages[" + std::to_string(r->messages.size() - 1) + "].content[" + std::to_string(j) + "]", "invalid_value");
  for (int j = first; first >= 0 && j <= last; ++j)
    if (parts[j].text.empty() && parts[j].segment_id.empty())
      return bad_request("a segment must not be empty", "messages[" + std::to_string(r->messages.size() - 1) + "].content[" + std::to_string(j) + "]", "invalid_value");
  if (r->segment_count() > lim.max_segments)
    return bad_request("too many segments (at most " + std::to_string(lim.max_segments) + ")", "messages", "too_many_segments");
  return std::nullopt;
}

std::optional<ApiError> parse_stop(const json& v, const RequestLimits& lim, ApiRequest* r) {
  if (v.is_null()) return std::nullopt;
  auto add = [&](const json& s, const std::string& param) -> std::optional<ApiError> {
    if (!s.is_string()) return wrong_type(param, "a string", s);
    std::string t = s.get<std::string>();
    if (t.empty()) return bad_request("stop strings must not be empty", param, "invalid_value");
    if (t.size() > lim.max_stop_bytes)
      return bad_request("stop string longer than " + std::to_string(lim.max_stop_bytes) + " bytes", param, "invalid_value");
    r->stop.push_back(std::move(t));
    return std::nullopt;
  };
  if (v.is_string()) return add(v, "stop");
  if (!v.is_array()) return wrong_type("stop", "a string or an array of strings", v);
  if (v.size() > size_t(lim.max_stop))
    return bad_request("at most " + std::to_string(lim.max_stop) + " stop sequences", "stop", "invalid_value");
  for (size_t i = 0; i < v.size(); ++i)
    if (auto e = add(v[i], "stop[" + std::to_string(i) + "]")) return e;
  return std::nullopt;
}

ApiError unsupported(const std::string& param, const std::string& why) {
  return bad_request("'" + param + "' is not supported by hypic" + why, param, "unsupported_parameter");
}

bool is_zero_number(const json& v) { return v.is_number() && v.get<double>() == 0.0; }
bool is_empty(const json& v) {
  return v.is_string() ? v.get_ref<const std::string&>().empty() : (v.is_array() || v.is_object()) && v.empty();
}

// Fields of the OpenAI API that hypic does not implement are accepted only at values that
// change nothing (null, or the API's default); any other value, and any field the API does
// not have, is 400 unsupported_parameter naming it, so a client never believes it worked.
std::optional<ApiError> check_fields(const json& j, Endpoint ep) {
  using Noop = bool (*)(const json&);
  struct Field {
    const char* name;
    Noop noop;  // null: implemented (parsed below)
  };
  static const Field kChat[] = {
      {"model", nullptr}, {"messages", nullptr}, {"max_tokens", nullptr}, {"max_completion_tokens", nullptr},
      {"temperature", nullptr}, {"top_p", nullptr}, {"top_k", nullptr}, {"seed", nullptr}, {"n", nullptr},
      {"stop", nullptr}, {"stream", nullptr}, {"stream_options", nullptr}, {"cache_salt", nullptr},
      {"user", nullptr}, {"logprobs", nullptr}, {"hypic", nullptr}, {"chat_template_kwargs", nullptr},
      {"presence_penalty", is_zero_number}, {"frequency_penalty", is_zero_number},
      {"logit_bias", is_empty}, {"top_logprobs", nullptr}, {"tools", nullptr}, {"functions", is_empty},
      {"tool_choice", nullptr}, {"function_call", [](const json& v) { return v == "none"; }},
      {"parallel_tool_calls", nullptr}, {"response_format", nullptr},
      {"store", [](const json& v) { return v == false; }}, {"metadata", is_empty},
      {"service_tier", [](const json& v) { return v == "auto" || v == "default"; }},
      {"modalities", [](const json& v) { return v == json::array({"text"}); }},
      {"audio", nullptr}, {"prediction", nullptr}, {"reasoning_effort", nullptr}, {"web_search_options", nullptr},
  };
  static const Field kCompletions[] = {
      {"model", nullptr}, {"prompt", nullptr}, {"max_tokens", nullptr}, {"temperature", nullptr}, {"top_p", nullptr},
      {"top_k", nullptr}, {"seed", nullptr}, {"n", nullptr}, {"stop", nullptr}, {"stream", nullptr},
      {"stream_options", nullptr}, {"cache_salt", nullptr}, {"user", nullptr}, {"logprobs", nullptr}, {"echo", nullptr},
      {"hypic", nullptr},
      {"presence_penalty", is_zero_number}, {"frequency_penalty", is_zero_number}, {"logit_bias", is_empty},
      {"best_of", [](const json& v) { return v == 1; }}, {"suffix", is_empty},
  };
  // Known fields with no no-op value (everything but null is unsupported).
  static const char* kNoValue[] = {"audio", "prediction", "reasoning_effort", "web_search_options"};
  const bool chat = ep == Endpoint::kChat;
  for (const auto& item : j.items()) {
    const std::string& key = item.key();
    const json& v = item.value();
    const Field* f = nullptr;
    for (const Field& x : chat ? std::span<const Field>(kChat) : std::span<const Field>(kCompletions))
      if (key == x.name) f = &x;
    if (!f)
      return unsupported(key, std::string(" (not a field of the ") + (chat ? "chat completions" : "completions") +
                                  " API that hypic implements); remove it");
    if (v.is_null()) continue;
    const bool no_value = std::find_if(std::begin(kNoValue), std::end(kNoValue), [&](const char* n) { return key == n; }) != std::end(kNoValue);
    if (no_value || (f->noop && !f->noop(v)))
      return unsupported(key, key == "functions" || key == "function_call"
                                  ? " (the deprecated form of tool calling); send 'tools' and 'tool_choice' instead"
                                  : "; remove it or send its default");
  }
  return std::nullopt;
}

std::optional<ApiError> parse_object(const json& j, std::string_view body, Endpoint ep, const RequestLimits& lim,
                                     ApiRequest* r) {
  if (!j.is_object()) return bad_request("the request body must be a JSON object", "", "invalid_json");
  auto model = j.find("model");
  if (model == j.end() || model->is_null()) return bad_request("'model' is required", "model", "missing_required_parameter");
  if (!model->is_string()) return wrong_type("model", "a string", *model);
  r->model = model->get<std::string>();
  if (ep == Endpoint::kChat) {
    auto m = j.find("messages");
    if (m == j.end() || m->is_null()) return bad_request("'messages' is required", "messages", "missing_required_parameter");
    if (auto e = parse_messages(*m, lim, r)) return e;
  } else {
    auto p = j.find("prompt");
    if (p == j.end() || p->is_null()) return bad_request("'prompt' is required", "prompt", "missing_required_parameter");
    if (auto e = parse_prompt(*p, r)) return e;
    if (r->prompt.empty() && r->prompt_tokens.empty())
      return bad_request("'prompt' must not be empty", "prompt", "invalid_value");
  }
  if (auto e = check_fields(j, ep)) return e;
  // max_completion_tokens wins over the deprecated max_tokens when both are given.
  r->max_tokens = lim.default_max_tokens;
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    int64_t v = 0;
    if (auto e = get_int(*it, key, 0, lim.max_tokens, &v)) return e;  // 0: completions with echo only
    r->max_tokens = int(v);
  }
  if (auto it = j.find("temperature"); it != j.end() && !it->is_null())
    if (auto e = get_num(*it, "temperature", 0.0, 2.0, &r->temperature)) return e;
  if (auto it = j.find("top_p"); it != j.end() && !it->is_null())
    if (auto e = get_num(*it, "top_p", 0.0, 1.0, &r->top_p)) return e;
  if (r->top_p <= 0.0) return bad_request("'top_p' must be greater than 0", "top_p", "invalid_value");
  if (auto it = j.find("top_k"); it != j.end() && !it->is_null()) {  // an extension, as in vLLM
    int64_t k = 0;
    if (auto e = get_int(*it, "top_k", -1, 1 << 20, &k)) return e;
    r->top_k = k < 0 ? 0 : int(k);  // -1 (vLLM) and 0: off
  }
  if (auto it = j.find("seed"); it != j.end() && !it->is_null()) {
    int64_t s = 0;
    if (auto e = get_int(*it, "seed", INT64_MIN, INT64_MAX, &s)) return e;
    r->seed = uint64_t(s);
  }
  if (auto it = j.find("n"); it != j.end() && !it->is_null()) {
    int64_t n = 0;
    if (auto e = get_int(*it, "n", 1, lim.max_choices, &n)) return e;
    r->n = int(n);
  }
  if (auto it = j.find("stop"); it != j.end())
    if (auto e = parse_stop(*it, lim, r)) return e;
  if (auto it = j.find("stream"); it != j.end() && !it->is_null())
    if (auto e = get_bool(*it, "stream", &r->stream)) return e;
  if (auto it = j.find("stream_options"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return wrong_type("stream_options", "an object", *it);
    if (!r->stream)
      return bad_request("'stream_options' is only allowed when 'stream' is true", "stream_options", "invalid_value");
    if (auto u = it->find("include_usage"); u != it->end() && !u->is_null())
      if (auto e = get_bool(*u, "stream_options.include_usage", &r->include_usage)) return e;
  }
  if (auto it = j.find("cache_salt"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return wrong_type("cache_salt", "a string", *it);
    r->cache_salt = it->get<std::string>();
    if (r->cache_salt.size() > lim.max_salt_bytes)
      return bad_request("'cache_salt' longer than " + std::to_string(lim.max_salt_bytes) + " bytes", "cache_salt", "invalid_value");
  }
  if (auto it = j.find("user"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return wrong_type("user", "a string", *it);
    r->user = it->get<std::string>();
  }
  if (auto e = parse_logprobs(j, ep, r)) return e;
  if (ep == Endpoint::kChat)
    if (auto e = parse_tool_fields(j, body, r)) return e;
  // vLLM's and llama-server's: keyword arguments of the chat template; hypic's templates
  // take enable_thinking (and ignore the rest, as a template ignores variables it never reads).
  if (auto it = j.find("chat_template_kwargs"); ep == Endpoint::kChat && it != j.end() && !it->is_null()) {
    if (!it->is_object()) return wrong_type("chat_template_kwargs", "an object", *it);
    if (auto t = it->find("enable_thinking"); t != it->end() && !t->is_null()) {
      bool on = true;
      if (auto e = get_bool(*t, "chat_template_kwargs.enable_thinking", &on)) return e;
      r->enable_thinking = on;
    }
  }
  if (auto it = j.find("hypic"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) return wrong_type("hypic", "an object", *it);
    for (const auto& [k, v] : it->items())
      if (k != "mode" && k != "seam" && k != "auto_segments")
        return unsupported("hypic." + k, " (the 'hypic' object takes 'mode', 'seam' and 'auto_segments'); remove it");
    if (auto m = it->find("mode"); m != it->end() && !m->is_null()) {
      if (!m->is_string()) return wrong_type("hypic.mode", "a string", *m);
      if (!parse_pic_mode(m->get<std::string>(), &r->mode))
        return bad_request("'hypic.mode' must be full, prefix, hypic or naive", "hypic.mode", "invalid_value");
    }
    if (auto s = it->find("seam"); s != it->end() && !s->is_null()) {
      int64_t v = 0;
      if (auto e = get_int(*s, "hypic.seam", 0, lim.max_seam, &v)) return e;
      r->seam = int(v);
    }
    if (auto a = it->find("auto_segments"); a != it->end() && !a->is_null()) {
      // false: none; true: the server's (--auto-segments, else "separator"); a list of modes.
      if (a->is_boolean()) {
        r->auto_segments = a->get<bool>() ? "default" : "off";
      } else if (a->is_array()) {
        std::string list;
        for (const json& m : *a) {
          if (!m.is_string() || (m != "separator" && m != "parts" && m != "tools"))
            return bad_request("'hypic.auto_segments' lists \"separator\", \"parts\" and / or \"tools\"", "hypic.auto_segments",
                               "invalid_value");
          list += (list.empty() ? "" : ",") + m.get<std::string>();
        }
        r->auto_segments = list.empty() ? "off" : list;
      } else {
        return wrong_type("hypic.auto_segments", "a boolean or a list of modes", *a);
      }
    }
  }
  if (r->max_tokens == 0 && !r->echo)
    return bad_request("'max_tokens' must be at least 1 (0 is for completions with 'echo': scoring the prompt only)",
                       j.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens", "invalid_value");
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_request(std::string_view body, Endpoint ep,
                                      const RequestLimits& limits, ApiRequest* out) {
  *out = ApiRequest{};
  out->endpoint = ep;
  json j;
  if (auto e = parse_json_body(body, limits, &j, /*object=*/false)) return e;
  return parse_object(j, body, ep, limits, out);
}

std::optional<ApiError> parse_json_body(std::string_view body, const RequestLimits& lim, json* out, bool object) {
  if (body.size() > lim.max_body_bytes) {
    ApiError e = bad_request("request body larger than " + std::to_string(lim.max_body_bytes) + " bytes", "", "request_too_large");
    e.http_status = 413;
    return e;
  }
  // No exceptions: a parse failure (syntax, invalid UTF-8, lone surrogate escapes) gives a
  // discarded value. nlohmann's parser is iterative, so deep nesting cannot overflow the stack.
  *out = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded())
    return bad_request("the request body is not valid JSON (or not valid UTF-8)", "", "invalid_json");
  if (object && !out->is_object()) return bad_request("the request body must be a JSON object", "", "invalid_json");
  return std::nullopt;
}

std::optional<ApiError> parse_segment_request(std::string_view body, const RequestLimits& lim,
                                              SegmentRequest* out) {
  *out = SegmentRequest{};
  json j;
  if (auto e = parse_json_body(body, lim, &j)) return e;
  // An unknown field is refused, not ignored: a misspelt cache_salt would register the
  // segment unsalted, visible to every tenant.
  for (const auto& item : j.items())
    if (!std::set<std::string_view>{"model", "text", "ttl", "cache_salt", "seam"}.count(item.key()))
      return unsupported(item.key(), " (POST /v1/segments takes model, text, ttl, cache_salt and seam); remove it");
  if (auto it = j.find("model"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return wrong_type("model", "a string", *it);
    out->model = it->get<std::string>();
  }
  auto text = j.find("text");
  if (text == j.end() || text->is_null()) return bad_request("'text' is required", "text", "missing_required_parameter");
  if (!text->is_string()) return wrong_type("text", "a string", *text);
  out->text = text->get<std::string>();
  if (out->text.empty()) return bad_request("'text' must not be empty", "text", "invalid_value");
  if (auto it = j.find("ttl"); it != j.end() && !it->is_null()) {
    int64_t v = 0;
    if (auto e = get_int(*it, "ttl", 1, lim.max_segment_ttl_s, &v)) {
      e->message += " (seconds; omit it to keep the segment until DELETE)";
      return e;
    }
    out->ttl_seconds = v;
  }
  if (auto it = j.find("cache_salt"); it != j.end() && !it->is_null()) {
    if (!it->is_string()) return wrong_type("cache_salt", "a string", *it);
    out->cache_salt = it->get<std::string>();
    if (out->cache_salt.size() > lim.max_salt_bytes)
      return bad_request("'cache_salt' longer than " + std::to_string(lim.max_salt_bytes) + " bytes", "cache_salt", "invalid_value");
  }
  if (auto it = j.find("seam"); it != j.end() && !it->is_null()) {
    int64_t v = 0;
    if (auto e = get_int(*it, "seam", 0, lim.max_seam, &v)) return e;
    out->seam = int(v);
  }
  return std::nullopt;
}

ApiError segment_not_found(const std::string& id, std::string param) {
  // Echo at most 64 bytes of a client-chosen id (dumped with invalid UTF-8 replaced).
  const std::string shown = id.size() > 64 ? id.substr(0, 64) + "..." : id;
  ApiError e = bad_request("segment '" + shown + "' not found (unknown, expired or deleted; or registered under another cache_salt); register it with POST /v1/segments",
                           std::move(param), "segment_not_found");
  e.http_status = 404;
  return e;
}

std::string_view role_name(Role r) {
  switch (r) {
    case Role::kSystem: return "system";
    case Role::kUser: return "user";
    case Role::kAssistant: return "assistant";
    case Role::kTool: return "tool";
  }
  return "user";
}


std::string prompt_text(const ChatTemplate& chat, const ApiRequest& r) {
  if (r.endpoint == Endpoint::kCompletions) return r.prompt;
  std::vector<Message> turns;
  if (template_messages(chat, r, &turns)) return {};  // not writable in this format
  std::vector<ChatMessage> msgs;
  msgs.reserve(turns.size());
  for (const auto& m : turns) {
    ChatMessage& c = msgs.emplace_back();
    c.role = role_name(m.role);
    for (const auto& p : m.parts) c.content += p.text;
  }
  return chat.render(msgs, /*add_generation_prompt=*/true);
}

}  // namespace hypic::api
