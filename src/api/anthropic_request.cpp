// The Messages body's translation (api/anthropic_request.h). Only the request parser's
// dependencies: the fuzz target links it without the HTTP front.
#include "api/anthropic_request.h"

#include <nlohmann/json.hpp>

namespace hypic::api {

// Ordered: a tool's input_schema keeps its properties' order (the order a model writes them).
using json = nlohmann::ordered_json;

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
    if (type == "tool_use" || type == "tool_result" || type == "thinking") continue;  // checked with their message
    if (type != "text")
      return unsupported("content blocks of type '" + type + "' are not supported yet (text, thinking, tool_use and tool_result "
                         "blocks)", at, "unsupported_value");
    if (!b.contains("text") || !b["text"].is_string()) return bad("'" + at + ".text' must be a string", at + ".text");
    if (auto c = b.find("cache_control"); c != b.end() && !c->is_null()) {
      if (!c->is_object() || !c->contains("type") || (*c)["type"] != "ephemeral")
        return bad("'" + at + ".cache_control' must be {\"type\": \"ephemeral\"}", at + ".cache_control");
    }
    for (const auto& [k, v] : b.items())
      if (k != "type" && k != "text" && k != "cache_control" && k != "citations")
        return unsupported("'" + at + "." + k + "' is not supported", at + "." + k, "unsupported_parameter");
  }
  return content;
}

// `tools` as OpenAI tools: {name, description?, input_schema} -> {"type": "function",
// "function": {name, description, parameters}}.
std::variant<ApiError, json> tools_of(const json& tools) {
  if (!tools.is_array()) return bad("'tools' must be an array of tools", "tools");
  json out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string()) return bad("'" + at + ".name' must be a string", at + ".name");
    if (t.contains("type") && !t["type"].is_null() && t["type"] != "custom")
      return unsupported("server tools ('" + at + ".type') are not supported; declare client tools with an input_schema", at + ".type",
                         "unsupported_value");
    json f{{"name", t["name"]}};
    if (t.contains("description")) f["description"] = t["description"];
    if (!t.contains("input_schema")) return bad("'" + at + ".input_schema' is required", at + ".input_schema");
    f["parameters"] = t["input_schema"];
    out.push_back(json{{"type", "function"}, {"function", std::move(f)}});
  }
  return out;
}

// tool_choice {"type": auto | any | tool (+ name) | none, "disable_parallel_tool_use"?} onto chat.
std::optional<ApiError> tool_choice_of(const json& c, json* chat) {
  if (!c.is_object() || !c.contains("type") || !c["type"].is_string())
    return bad("'tool_choice' must be {\"type\": \"auto\" | \"any\" | \"tool\" | \"none\"}", "tool_choice");
  const std::string type = c["type"];
  if (type == "auto" || type == "none") (*chat)["tool_choice"] = type;
  else if (type == "any") (*chat)["tool_choice"] = "required";
  else if (type == "tool") (*chat)["tool_choice"] = json{{"type", "function"}, {"function", {{"name", c.contains("name") ? c["name"] : json()}}}};
  else return bad("'tool_choice.type' must be auto, any, tool or none", "tool_choice.type");
  if (auto d = c.find("disable_parallel_tool_use"); d != c.end() && !d->is_null()) {
    if (!d->is_boolean()) return bad("'tool_choice.disable_parallel_tool_use' must be a boolean", "tool_choice.disable_parallel_tool_use");
    if (type != "none") (*chat)["parallel_tool_calls"] = !d->get<bool>();
  }
  return std::nullopt;
}

// The text of a tool_result's content: a string or text blocks.
std::optional<std::string> result_text(const json& content) {
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return std::nullopt;
  std::string text;
  for (const json& b : content) {
    if (!b.is_object() || !b.contains("type") || b["type"] != "text" || !b.contains("text") || !b["text"].is_string()) return std::nullopt;
    text += b["text"].get<std::string>();
  }
  return text;
}

// `thinking`: {"type": "enabled", "budget_tokens": N} (N >= 1024 and below max_tokens, as
// Anthropic requires) or {"type": "disabled"}. hypic does not stop the reasoning at the budget:
// max_tokens bounds the whole reply.
std::optional<ApiError> thinking_of(const json& t, const json& body, bool* on) {
  if (!t.is_object() || !t.contains("type") || !t["type"].is_string())
    return bad("'thinking' must be {\"type\": \"enabled\", \"budget_tokens\": N} or {\"type\": \"disabled\"}", "thinking");
  for (const auto& [k, v] : t.items())
    if (k != "type" && k != "budget_tokens") return unsupported("'thinking." + k + "' is not supported", "thinking." + k, "unsupported_parameter");
  const std::string type = t["type"];
  if (type == "disabled") return std::nullopt;
  if (type != "enabled") return bad("'thinking.type' must be enabled or disabled", "thinking.type");
  const json& b = t.contains("budget_tokens") ? t["budget_tokens"] : json();
  if (!b.is_number_integer() || b.get<int64_t>() < 1024)
    return bad("'thinking.budget_tokens' must be an integer of at least 1024", "thinking.budget_tokens");
  const json& mt = body.contains("max_tokens") ? body["max_tokens"] : json();
  if (mt.is_number_integer() && b.get<int64_t>() >= mt.get<int64_t>())
    return bad("'thinking.budget_tokens' must be less than max_tokens", "thinking.budget_tokens");
  *on = true;
  return std::nullopt;
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
    } else if (k == "tools") {
      if (v.is_null()) continue;
      auto t = tools_of(v);
      if (auto* e = std::get_if<ApiError>(&t)) return *e;
      chat["tools"] = std::move(std::get<json>(t));
    } else if (k == "tool_choice") {
      if (v.is_null()) continue;
      if (auto e = tool_choice_of(v, &chat)) return *e;
    } else if (k != "messages" && k != "system" && k != "thinking") {
      return unsupported("'" + k + "' is not supported; remove it", k, "unsupported_parameter");
    }
  }
  // Extended thinking only when asked for (Anthropic's default is none): a model whose
  // template thinks otherwise answers with its reasoning block closed.
  bool thinking = false;
  if (auto t = j.find("thinking"); t != j.end() && !t->is_null()) {
    if (auto e = thinking_of(*t, j, &thinking)) return *e;
  }
  chat["chat_template_kwargs"] = {{"enable_thinking", thinking}};
  // A null max_tokens is as missing (Anthropic's API requires a number).
  if (auto m = j.find("max_tokens"); m == j.end() || m->is_null()) return bad("'max_tokens' is required", "max_tokens");
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
    const json& all = std::get<json>(b);
    // tool_use blocks (assistant) become its tool_calls; tool_result blocks (user) become tool
    // messages before the user's text.
    json blocks = json::array(), calls = json::array();
    std::string reasoning;
    for (size_t k = 0; k < all.size(); ++k) {
      const json& x = all[k];
      const std::string bt = x["type"];
      const std::string bat = at + ".content[" + std::to_string(k) + "]";
      if (bt == "text") {
        blocks.push_back(x);
      } else if (bt == "thinking") {  // the reasoning of an earlier reply: the template decides what stays
        if (role != "assistant") return bad("'" + bat + "': thinking blocks belong to assistant messages", bat);
        if (!x.contains("thinking") || !x["thinking"].is_string())
          return bad("'" + bat + ".thinking' must be a string", bat + ".thinking");
        reasoning += x["thinking"].get<std::string>();
      } else if (bt == "tool_use") {
        if (role != "assistant") return bad("'" + bat + "': tool_use blocks belong to assistant messages", bat);
        if (!x.contains("id") || !x["id"].is_string() || !x.contains("name") || !x["name"].is_string() ||
            !x.contains("input") || !x["input"].is_object())
          return bad("'" + bat + "' must be {\"type\": \"tool_use\", \"id\", \"name\", \"input\": {...}}", bat);
        calls.push_back(json{{"id", x["id"]}, {"type", "function"},
                             {"function", {{"name", x["name"]}, {"arguments", x["input"].dump(-1, ' ', false, json::error_handler_t::replace)}}}});
      } else {  // tool_result
        if (role != "user") return bad("'" + bat + "': tool_result blocks belong to user messages", bat);
        if (!x.contains("tool_use_id") || !x["tool_use_id"].is_string())
          return bad("'" + bat + ".tool_use_id' must be a string", bat + ".tool_use_id");
        std::optional<std::string> text = result_text(x.contains("content") ? x["content"] : json());
        if (!text) return bad("'" + bat + ".content' must be a string or text blocks", bat + ".content");
        if (x.contains("is_error") && x["is_error"] == true) text = "Error: " + *text;
        msgs.push_back(json{{"role", "tool"}, {"tool_call_id", x["tool_use_id"]}, {"content", *text}});
      }
    }
    if (blocks.empty() && calls.empty() && reasoning.empty()) continue;  // tool results only
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
    json out{{"role", role}, {"content", parts.empty() ? json() : std::move(parts)}};
    if (!calls.empty()) out["tool_calls"] = std::move(calls);
    if (!reasoning.empty()) {
      out["reasoning_content"] = reasoning;
      if (out["content"].is_null() && calls.empty()) out["content"] = "";
    }
    msgs.push_back(std::move(out));
  }
  chat["messages"] = std::move(msgs);
  return chat.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace hypic::api
