// The Messages body's translation (api/anthropic_request.h). Only the request parser's
// dependencies: the fuzz target links it without the HTTP front.
#include "api/anthropic_request.h"

#include <nlohmann/json.hpp>

namespace hypic::server {

using nlohmann::json;

namespace {

ApiError bad(const std::string& msg, const std::string& param) { return bad_request(msg, param, "invalid_value"); }
ApiError unsupported(const std::string& msg, const std::string& param, const char* code) {
  return bad_request(msg, param, code);
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
      return unsupported("content blocks of type '" + type + "' are not supported yet (text blocks only)", at,
                         "unsupported_value");
    if (!b.contains("text") || !b["text"].is_string()) return bad("'" + at + ".text' must be a string", at + ".text");
    if (auto c = b.find("cache_control"); c != b.end() && !c->is_null()) {
      if (!c->is_object() || c->value("type", "") != "ephemeral")
        return bad("'" + at + ".cache_control' must be {\"type\": \"ephemeral\"}", at + ".cache_control");
    }
    for (const auto& [k, v] : b.items())
      if (k != "type" && k != "text" && k != "cache_control" && k != "citations")
        return unsupported("'" + at + "." + k + "' is not supported", at + "." + k, "unsupported_parameter");
  }
  return content;
}

}  // namespace

std::variant<ApiError, std::string> messages_to_chat(std::string_view body, const RequestLimits& lim) {
  if (body.size() > lim.max_body_bytes) {
    ApiError e = bad_request("the request body is larger than " + std::to_string(lim.max_body_bytes) + " bytes", "",
                             "request_too_large");
    e.http_status = 413;
    return e;
  }
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
      return unsupported("'" + k + "' is not supported" + (tools ? " yet (tool use is planned)" : "") + "; remove it", k,
                         "unsupported_parameter");
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
      return unsupported("a final assistant message (a prefilled answer) is not supported yet", at, "unsupported_value");
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
  return chat.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace hypic::server
