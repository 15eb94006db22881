#include "api/anthropic.h"

#include "api/http_util.h"

namespace hypic::server {

using nlohmann::json;

namespace {

ApiError bad(const std::string& msg, const std::string& param) {
  return make_error(400, msg, "invalid_request_error", "invalid_value", param);
}

// Content as text blocks: a string, or an array of {"type": "text", "text", "cache_control"?}.
std::variant<ApiError, json> blocks_of(const json& content, const std::string& where) {
  if (content.is_string()) return json::array({json{{"type", "text"}, {"text", content}}});
  if (!content.is_array() || content.empty()) return bad("'" + where + "' must be a string or a non-empty array of content blocks", where);
  for (size_t i = 0; i < content.size(); ++i) {
    const json& b = content[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!b.is_object() || !b.contains("type") || !b["type"].is_string()) return bad("'" + at + "' must be a content block", at);
    const std::string type = b["type"];
    if (type != "text")
      return make_error(400, "content blocks of type '" + type + "' are not supported yet (text blocks only)",
                        "invalid_request_error", "unsupported_value", at);
    if (!b.contains("text") || !b["text"].is_string()) return bad("'" + at + ".text' must be a string", at + ".text");
    if (auto c = b.find("cache_control"); c != b.end() && !c->is_null()) {
      if (!c->is_object() || c->value("type", "") != "ephemeral")
        return bad("'" + at + ".cache_control' must be {\"type\": \"ephemeral\"}", at + ".cache_control");
    }
    for (const auto& [k, v] : b.items())
      if (k != "type" && k != "text" && k != "cache_control" && k != "citations")
        return make_error(400, "'" + at + "." + k + "' is not supported", "invalid_request_error", "unsupported_parameter", at + "." + k);
  }
  return content;
}

const char* error_type(int status) {
  switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503: return "overloaded_error";
    default: return "api_error";
  }
}

json error_json(int status, const std::string& message) {
  return json{{"type", "error"}, {"error", {{"type", error_type(status)}, {"message", message}}}};
}

std::string stop_reason(const json& result) {
  if (result.value("finish_reason", "") == "length") return "max_tokens";
  return result.contains("stop_sequence") ? "stop_sequence" : "end_turn";
}

// Anthropic's usage from the chat usage: input tokens not read from or written to a cache,
// and those that were.
json usage_of(const json& u) {
  const int64_t prompt = u.value("prompt_tokens", int64_t(0));
  const int64_t read = u.contains("prompt_tokens_details") ? u["prompt_tokens_details"].value("cached_tokens", int64_t(0)) : 0;
  const int64_t written = u.contains("hypic") ? u["hypic"].value("cached_new_tokens", int64_t(0)) : 0;
  return json{{"input_tokens", std::max<int64_t>(0, prompt - read - written)},
              {"output_tokens", u.value("completion_tokens", int64_t(0))},
              {"cache_creation_input_tokens", written},
              {"cache_read_input_tokens", read},
              {"hypic", u.contains("hypic") ? u["hypic"] : json(nullptr)}};
}

json message_json(const ReplyMeta& m, const std::string& text, const json& result) {
  json content = json::array();
  if (!text.empty() || result.is_null()) content.push_back(json{{"type", "text"}, {"text", text}});
  return json{{"id", m.id}, {"type", "message"}, {"role", "assistant"}, {"model", m.model}, {"content", content},
              {"stop_reason", result.is_null() ? json(nullptr) : json(stop_reason(result))},
              {"stop_sequence", result.contains("stop_sequence") ? result["stop_sequence"] : json(nullptr)},
              {"usage", result.contains("usage") ? usage_of(result["usage"])
                                                 : json{{"input_tokens", 0}, {"output_tokens", 0}}}};
}

std::string sse(const char* name, const json& data) { return std::string("event: ") + name + "\ndata: " + dump(data) + "\n\n"; }

class MessagesStream final : public TicketBodyStream {
 public:
  MessagesStream(std::shared_ptr<Ticket> t, ReplyMeta m, ReplyDone done)
      : TicketBodyStream(std::move(t), std::move(done)), m_(std::move(m)) {}

 private:
  void start(std::string* out) override {
    *out += sse("message_start", json{{"type", "message_start"}, {"message", message_json(m_, "", nullptr)}});
  }
  void piece(const std::string& text, json, std::string* out) override {
    open_block(out);
    *out += sse("content_block_delta", json{{"type", "content_block_delta"}, {"index", 0},
                                            {"delta", {{"type", "text_delta"}, {"text", text}}}});
  }
  void open_block(std::string* out) {
    if (block_open_) return;
    block_open_ = true;
    *out += sse("content_block_start", json{{"type", "content_block_start"}, {"index", 0},
                                            {"content_block", {{"type", "text"}, {"text", ""}}}});
    *out += sse("ping", json{{"type", "ping"}});
  }
  void finish(const Outcome& o, std::string* out) override {
    if (!o.result.is_null() && o.result.contains("finish_reason")) {
      open_block(out);
      *out += sse("content_block_stop", json{{"type", "content_block_stop"}, {"index", 0}});
      *out += sse("message_delta", json{{"type", "message_delta"},
                                        {"delta", {{"stop_reason", stop_reason(o.result)},
                                                   {"stop_sequence", o.result.contains("stop_sequence") ? o.result["stop_sequence"] : json(nullptr)}}},
                                        {"usage", usage_of(o.result["usage"])}});
    }
    if (o.error) {
      *out += sse("error", error_json(o.error->http_status, o.error->message));
      end()(o.error->http_status, nullptr, o.error->code);
      return;
    }
    *out += sse("message_stop", json{{"type", "message_stop"}});
    end()(200, o.result["usage"], "");
  }

  ReplyMeta m_;
  bool block_open_ = false;
};

}  // namespace

std::variant<ApiError, std::string> messages_to_chat(std::string_view body, const RequestLimits& lim) {
  if (body.size() > lim.max_body_bytes)
    return make_error(413, "the request body is larger than " + std::to_string(lim.max_body_bytes) + " bytes",
                      "invalid_request_error", "request_too_large");
  const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return bad("the request body must be a JSON object", "");
  json chat = json::object();
  for (const auto& [k, v] : j.items()) {
    if (k == "model" || k == "temperature" || k == "top_p" || k == "top_k" || k == "stream" || k == "cache_salt" ||
        k == "hypic") {
      chat[k] = v;
    } else if (k == "max_tokens") {
      chat["max_tokens"] = v;
    } else if (k == "stop_sequences") {
      chat["stop"] = v;
    } else if (k == "metadata") {
      if (!v.is_null() && !v.is_object()) return bad("'metadata' must be an object", "metadata");
    } else if (k != "messages" && k != "system") {
      const bool tools = k == "tools" || k == "tool_choice";
      return make_error(400, "'" + k + "' is not supported" + (tools ? " yet (tool use is planned)" : "") + "; remove it",
                        "invalid_request_error", "unsupported_parameter", k);
    }
  }
  if (!j.contains("max_tokens")) return bad("'max_tokens' is required", "max_tokens");
  json msgs = json::array();
  if (auto s = j.find("system"); s != j.end() && !s->is_null()) {
    auto b = blocks_of(*s, "system");
    if (auto* e = std::get_if<ApiError>(&b)) return *e;
    std::string text;
    for (const json& x : std::get<json>(b)) text += x["text"].get<std::string>();
    msgs.push_back(json{{"role", "system"}, {"content", text}});
  }
  auto m = j.find("messages");
  if (m == j.end() || !m->is_array() || m->empty()) return bad("'messages' must be a non-empty array", "messages");
  for (size_t i = 0; i < m->size(); ++i) {
    const json& msg = (*m)[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!msg.is_object() || !msg.contains("role") || !msg["role"].is_string()) return bad("'" + at + "' needs a role", at + ".role");
    const std::string role = msg["role"];
    if (role != "user" && role != "assistant") return bad("'" + at + ".role' must be user or assistant", at + ".role");
    if (!msg.contains("content")) return bad("'" + at + ".content' is required", at + ".content");
    auto b = blocks_of(msg["content"], at + ".content");
    if (auto* e = std::get_if<ApiError>(&b)) return *e;
    const bool last = i + 1 == m->size();
    if (last && role != "user")
      return make_error(400, "a final assistant message (a prefilled answer) is not supported yet", "invalid_request_error",
                        "unsupported_value", at);
    const json& blocks = std::get<json>(b);
    // The last user message: blocks marked cache_control are segments, and so are the blocks between two of them.
    int first = -1, lastm = -1;
    for (int k = 0; last && k < int(blocks.size()); ++k)
      if (blocks[k].contains("cache_control") && !blocks[k]["cache_control"].is_null()) {
        if (first < 0) first = k;
        lastm = k;
      }
    json parts = json::array();
    for (int k = 0; k < int(blocks.size()); ++k) {
      json p{{"type", "text"}, {"text", blocks[k]["text"]}};
      if (first >= 0 && k >= first && k <= lastm && !blocks[k]["text"].get<std::string>().empty())
        p["cache_control"] = {{"type", "segment"}};
      parts.push_back(std::move(p));
    }
    msgs.push_back(json{{"role", role}, {"content", std::move(parts)}});
  }
  chat["messages"] = std::move(msgs);
  return dump(chat);
}

HttpResponse anthropic_error_reply(const ApiError& e) { return json_reply(error_json(e.http_status, e.message), e.http_status); }

void reply_messages(Reply reply, std::shared_ptr<Ticket> ticket, ReplyMeta m, ReplyDone done) {
  if (!m.stream) {
    return when_finished(std::move(ticket), [reply, m, done](std::string text, Outcome o) {
      if (o.error) {
        done(o.error->http_status, nullptr, o.error->code);
        return reply(anthropic_error_reply(*o.error));
      }
      json body = message_json(m, o.result.value("text", text), o.result);
      done(200, o.result["usage"], "");
      reply(json_reply(body));
    });
  }
  reply(sse_response(std::make_shared<MessagesStream>(std::move(ticket), std::move(m), std::move(done))));
}

}  // namespace hypic::server
