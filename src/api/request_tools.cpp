#include "api/request_tools.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "core/text.h"
#include "grammar/json_schema.h"
#include "tokenizer/chat_template.h"

namespace hypic::api {

using nlohmann::json;
using OJson = nlohmann::ordered_json;

namespace {

ApiError type_error(const std::string& param, const char* want, const json& v) {
  return bad_request("'" + param + "' must be " + want + ", got " + (v.is_null() ? "null" : std::string("a ") + v.type_name()),
                     param, "invalid_type");
}

ApiError schema_error(const std::string& param, const Status& s) {
  return bad_request("'" + param + "': " + s.message(), param, "invalid_schema");
}

// The string at o[key]; `absent` when missing, "" (never a valid value here) when not a string.
// (json::value() throws on a present key of another type: a request must never make it.)
template <typename J>
std::string string_field(const J& o, const char* key, const char* absent = "") {
  auto it = o.find(key);
  if (it == o.end()) return absent;
  return it->is_string() ? it->template get<std::string>() : std::string();
}

bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > kMaxToolNameBytes) return false;
  for (char c : n)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return false;
  return true;
}

std::optional<ApiError> parse_tools(const OJson& tools, ApiRequest* r) {
  if (!tools.is_array()) return type_error("tools", "an array of tools", json());
  if (tools.size() > kMaxTools)
    return bad_request("at most " + std::to_string(kMaxTools) + " tools", "tools", "invalid_value");
  std::set<std::string> seen;
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string p = "tools[" + std::to_string(i) + "]";
    const OJson& t = tools[i];
    if (!t.is_object()) return bad_request("'" + p + "' must be an object", p, "invalid_type");
    if (string_field(t, "type") != "function")
      return bad_request("'" + p + ".type' must be \"function\"", p + ".type", "invalid_value");
    auto f = t.find("function");
    if (f == t.end() || !f->is_object())
      return bad_request("'" + p + ".function' must be an object", p + ".function", "invalid_type");
    auto n = f->find("name");
    if (n == f->end() || !n->is_string() || !valid_name(n->get<std::string>()))
      return bad_request("'" + p + ".function.name' must be 1 to 64 letters, digits, '_' or '-'", p + ".function.name",
                         "invalid_value");
    ToolDef d;
    d.name = n->get<std::string>();
    if (!seen.insert(d.name).second)
      return bad_request("two tools are named '" + d.name + "'", p + ".function.name", "invalid_value");
    if (auto desc = f->find("description"); desc != f->end() && !desc->is_null() && !desc->is_string())
      return bad_request("'" + p + ".function.description' must be a string", p + ".function.description", "invalid_type");
    if (auto s = f->find("strict"); s != f->end() && !s->is_null() && !s->is_boolean())
      return bad_request("'" + p + ".function.strict' must be a boolean", p + ".function.strict", "invalid_type");
    if (auto params = f->find("parameters"); params != f->end() && !params->is_null()) {
      if (!params->is_object())
        return bad_request("'" + p + ".function.parameters' must be a JSON schema object", p + ".function.parameters", "invalid_type");
      if (Status s = grammar::check_json_schema(*params); !s) return schema_error(p + ".function.parameters", s);
      d.parameters = *params;
    }
    d.rendered = python_json(t);
    r->tools.push_back(std::move(d));
  }
  return std::nullopt;
}

std::optional<ApiError> parse_tool_choice(const json& v, ApiRequest* r) {
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "auto") r->tool_choice = ToolChoice::kAuto;
    else if (s == "none") r->tool_choice = ToolChoice::kNone;
    else if (s == "required") r->tool_choice = ToolChoice::kRequired;
    else return bad_request("'tool_choice' must be \"auto\", \"none\", \"required\" or a named function", "tool_choice", "invalid_value");
  } else if (v.is_object()) {
    auto f = v.find("function");
    if (string_field(v, "type") != "function" || f == v.end() || !f->is_object() || !f->contains("name") ||
        !(*f)["name"].is_string())
      return bad_request("a named 'tool_choice' is {\"type\": \"function\", \"function\": {\"name\": ...}}", "tool_choice", "invalid_value");
    r->tool_choice = ToolChoice::kNamed;
    r->tool_choice_name = (*f)["name"].get<std::string>();
  } else {
    return type_error("tool_choice", "a string or an object", v);
  }
  if ((r->tool_choice == ToolChoice::kRequired || r->tool_choice == ToolChoice::kNamed) && r->tools.empty())
    return bad_request("'tool_choice' requires a tool call but 'tools' is empty", "tool_choice", "invalid_value");
  if (r->tool_choice == ToolChoice::kNamed) {
    bool known = false;
    for (const ToolDef& t : r->tools) known |= t.name == r->tool_choice_name;
    if (!known)
      return bad_request("'tool_choice' names '" + r->tool_choice_name.substr(0, 64) + "', which is not one of 'tools'",
                         "tool_choice", "invalid_value");
  }
  return std::nullopt;
}

std::optional<ApiError> parse_response_format(const OJson& v, ApiRequest* r) {
  if (!v.is_object()) return bad_request("'response_format' must be an object", "response_format", "invalid_type");
  const std::string type = string_field(v, "type");
  if (type == "text") return std::nullopt;
  if (type == "json_object") {
    r->response_format = ResponseFormat::kJsonObject;
    return std::nullopt;
  }
  if (type != "json_schema")
    return bad_request("'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"", "response_format.type",
                       "invalid_value");
  auto js = v.find("json_schema");
  if (js == v.end() || !js->is_object())
    return bad_request("'response_format.json_schema' must be an object with a 'name' and a 'schema'", "response_format.json_schema",
                       "missing_required_parameter");
  auto n = js->find("name");
  if (n == js->end() || !n->is_string() || !valid_name(n->get<std::string>()))
    return bad_request("'response_format.json_schema.name' must be 1 to 64 letters, digits, '_' or '-'",
                       "response_format.json_schema.name", "invalid_value");
  if (auto s = js->find("strict"); s != js->end() && !s->is_null() && !s->is_boolean())
    return bad_request("'response_format.json_schema.strict' must be a boolean", "response_format.json_schema.strict", "invalid_type");
  r->response_format = ResponseFormat::kJsonSchema;
  if (auto s = js->find("schema"); s != js->end() && !s->is_null()) {
    if (!s->is_object())
      return bad_request("'response_format.json_schema.schema' must be a JSON schema object", "response_format.json_schema.schema",
                         "invalid_type");
    if (Status st = grammar::check_json_schema(*s); !st) return schema_error("response_format.json_schema.schema", st);
    r->response_schema = *s;
  }
  return std::nullopt;
}

// A value of a call's arguments as Qwen3.5's template writes it in a <parameter> element:
// a string as it is, objects and lists as JSON, the rest as Python prints them.
std::string xml_value(const OJson& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return "None";
  return python_json(v);
}

// The call between the format's call_open and call_close. Arguments that are not a JSON
// object cannot be written as XML elements: they are written in the JSON form.
std::string call_body(const ToolFormat& f, const ToolCall& c) {
  const OJson args = OJson::parse(c.arguments, nullptr, /*allow_exceptions=*/false);
  if (f.calls == ToolFormat::Calls::kXml && args.is_object()) {
    std::string body = "<function=" + c.name + ">\n";
    for (const auto& [k, v] : args.items()) body += "<parameter=" + k + ">\n" + xml_value(v) + "\n</parameter>\n";
    return body + "</function>";
  }
  return "{\"name\": \"" + c.name + "\", \"arguments\": " + c.arguments + "}";
}

std::string text_of(const Message& m) {
  std::string s;
  for (const ContentPart& p : m.parts) s += p.text;
  return s;
}

}  // namespace

std::optional<ApiError> parse_tool_fields(const json& j, std::string_view body, ApiRequest* r) {
  const auto present = [&](const char* k) { return j.contains(k) && !j[k].is_null(); };
  if (present("tools") || present("response_format")) {
    // Key order matters here (schema properties, the rendered tools): read the body again in order.
    const OJson o = OJson::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
    if (present("tools")) {
      if (!j["tools"].is_array()) return type_error("tools", "an array of tools", j["tools"]);
      if (auto e = parse_tools(o["tools"], r)) return e;
    }
    if (present("response_format"))
      if (auto e = parse_response_format(o["response_format"], r)) return e;
  }
  if (present("tool_choice"))
    if (auto e = parse_tool_choice(j["tool_choice"], r)) return e;
  if (present("parallel_tool_calls")) {
    if (!j["parallel_tool_calls"].is_boolean()) return type_error("parallel_tool_calls", "a boolean", j["parallel_tool_calls"]);
    r->parallel_tool_calls = j["parallel_tool_calls"].get<bool>();
  }
  if (r->response_format != ResponseFormat::kText &&
      (r->tool_choice == ToolChoice::kRequired || r->tool_choice == ToolChoice::kNamed))
    return bad_request("a JSON 'response_format' cannot be combined with a required or named 'tool_choice'", "response_format",
                       "invalid_value");
  return std::nullopt;
}

std::optional<ApiError> parse_message_tool_fields(const json& m, const std::string& pm, Message* msg) {
  if (msg->role == Role::kTool) {
    auto id = m.find("tool_call_id");
    if (id == m.end() || id->is_null())
      return bad_request("'" + pm + ".tool_call_id' is required in a tool message", pm + ".tool_call_id", "missing_required_parameter");
    if (!id->is_string() || id->get<std::string>().empty())
      return bad_request("'" + pm + ".tool_call_id' must be a non-empty string", pm + ".tool_call_id", "invalid_type");
    msg->tool_call_id = id->get<std::string>();
    return std::nullopt;
  }
  auto calls = m.find("tool_calls");
  if (calls == m.end() || calls->is_null()) return std::nullopt;
  if (msg->role != Role::kAssistant)
    return bad_request("only assistant messages have 'tool_calls'", pm + ".tool_calls", "invalid_value");
  if (!calls->is_array()) return type_error(pm + ".tool_calls", "an array", *calls);
  for (size_t i = 0; i < calls->size(); ++i) {
    const std::string p = pm + ".tool_calls[" + std::to_string(i) + "]";
    const json& c = (*calls)[i];
    if (!c.is_object()) return type_error(p, "an object", c);
    auto f = c.find("function");
    if (!c.contains("id") || !c["id"].is_string() || c["id"].get<std::string>().empty())
      return bad_request("'" + p + ".id' must be a non-empty string", p + ".id", "invalid_value");
    if (string_field(c, "type", "function") != "function")
      return bad_request("'" + p + ".type' must be \"function\"", p + ".type", "invalid_value");
    if (f == c.end() || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string() ||
        !f->contains("arguments") || !(*f)["arguments"].is_string())
      return bad_request("'" + p + ".function' must be {\"name\": string, \"arguments\": string}", p + ".function", "invalid_value");
    msg->tool_calls.push_back({c["id"].get<std::string>(), (*f)["name"].get<std::string>(), (*f)["arguments"].get<std::string>()});
  }
  return std::nullopt;
}

std::optional<ApiError> check_tool_messages(const std::vector<Message>& msgs) {
  const Message* caller = nullptr;  // the assistant message the current run of tool messages answers
  for (size_t i = 0; i < msgs.size(); ++i) {
    const Message& m = msgs[i];
    if (m.role != Role::kTool) {
      caller = m.role == Role::kAssistant && !m.tool_calls.empty() ? &m : nullptr;
      continue;
    }
    const std::string p = "messages[" + std::to_string(i) + "]";
    bool answers = false;
    for (const ToolCall& c : caller ? caller->tool_calls : std::vector<ToolCall>{}) answers |= c.id == m.tool_call_id;
    if (!answers)
      return bad_request("a tool message must answer a call of the assistant message before it; '" + p +
                             ".tool_call_id' names no such call", p + ".tool_call_id", "invalid_value");
  }
  return std::nullopt;
}

namespace {

// An assistant message's reasoning and content apart, as Qwen3.5's template reads them: its
// reasoning_content, else the text between "<think>" and "</think>" in its content.
void split_reasoning(const Message& m, std::string* reasoning, std::string* content) {
  *reasoning = m.reasoning;
  if (!m.reasoning.empty()) return;
  const size_t close = content->find("</think>");
  if (close == std::string::npos) return;
  std::string before = content->substr(0, close);
  const size_t open = before.rfind("<think>");
  if (open != std::string::npos) before = before.substr(open + 7);
  *reasoning = before;
  const size_t after = content->rfind("</think>") + 8;
  *content = content->substr(std::min(content->find_first_not_of('\n', after), content->size()));
}

}  // namespace

std::optional<ApiError> template_messages(const ChatTemplate& chat, const ApiRequest& r, std::vector<Message>* out) {
  out->clear();
  const ToolFormat* f = chat.tool_format();
  bool needs_format = r.uses_tools();
  for (const Message& m : r.messages) needs_format |= m.role == Role::kTool || !m.tool_calls.empty();
  if (needs_format && !f)
    return bad_request("tool calling is not available for this model's chat format ('" + std::string(chat.name()) +
                           "') in hypic yet; send the request without tools and tool messages",
                       "tools", "unsupported_value");
  // With reasoning, assistant turns after the last user query keep theirs; earlier ones lose it.
  size_t last_query = 0;
  for (size_t i = 0; i < r.messages.size(); ++i)
    if (r.messages[i].role == Role::kUser) last_query = i;
  for (size_t i = 0; i < r.messages.size(); ++i) {
    const Message& m = r.messages[i];
    std::string content = text_of(m);
    if (r.reasoning && m.role == Role::kAssistant) {
      std::string reasoning;
      split_reasoning(m, &reasoning, &content);
      Message a = m;
      a.parts = {{i > last_query ? r.reasoning->open + std::string(trim_space(reasoning)) + r.reasoning->close + content : content, false, ""}};
      a.reasoning.clear();
      out->push_back(std::move(a));
    } else if (m.role != Role::kTool) {
      out->push_back(m);
    }
    if (m.role == Role::kTool) {
      const bool first = i == 0 || r.messages[i - 1].role != Role::kTool;
      if (first) out->push_back(Message{Role::kUser, {}, {}, "", ""});
      out->back().parts.push_back({(first ? "" : f->response_separator) + f->response_open + text_of(m) + f->response_close,
                                   r.segment_tool_results, ""});  // (only a trailing run is ever marked)
      continue;
    }
    if (m.tool_calls.empty()) continue;
    Message& a = out->back();
    std::string calls;
    for (size_t k = 0; k < m.tool_calls.size(); ++k) {
      if (k > 0) calls += f->call_separator;
      else if (!content.empty()) calls += f->text_call_separator;
      calls += f->call_open + call_body(*f, m.tool_calls[k]) + f->call_close;
    }
    a.parts.push_back({calls, false, ""});
    a.tool_calls.clear();
  }
  if (!r.uses_tools()) return std::nullopt;
  // head, each tool (as a segment with segment_tools), tail.
  std::vector<ContentPart> tools{{f->preamble_head, false, ""}};
  for (const ToolDef& t : r.tools) {
    if (r.segment_tools) tools.push_back({"\n" + t.rendered, true, ""});
    else tools.back().text += "\n" + t.rendered;
  }
  if (r.segment_tools) tools.push_back({"", false, ""});
  tools.back().text += f->preamble_tail;
  const bool system = !out->empty() && out->front().role == Role::kSystem;
  if (!system) {
    out->insert(out->begin(), Message{Role::kSystem, std::move(tools), {}, "", ""});
  } else if (f->tools_first) {  // the tools, then the system message's text
    std::vector<ContentPart>& parts = out->front().parts;
    if (!text_of(out->front()).empty()) tools.back().text += "\n\n";
    parts.insert(parts.begin(), tools.begin(), tools.end());
  } else {
    tools.front().text = "\n\n" + tools.front().text;
    out->front().parts.insert(out->front().parts.end(), tools.begin(), tools.end());
  }
  return std::nullopt;
}

std::optional<ApiError> request_grammar(const ChatTemplate& chat, ApiRequest* r) {
  r->grammar.reset();
  if (r->response_format == ResponseFormat::kJsonObject) {
    r->grammar = grammar::json_object_grammar();
  } else if (r->response_format == ResponseFormat::kJsonSchema) {
    if (r->response_schema.is_null()) {
      r->grammar = grammar::json_object_grammar();
    } else {
      auto g = grammar::json_schema_grammar(r->response_schema);
      if (!g) return schema_error("response_format.json_schema.schema", g.status());
      r->grammar = *g;
    }
  }
  if (!r->uses_tools()) return std::nullopt;
  const ToolFormat* f = chat.tool_format();
  if (!f) return bad_request("tool calling is not available for this model's chat format in hypic yet", "tools", "unsupported_value");
  r->tool_call_open = f->call_open;
  r->tool_call_close = f->call_close;
  const bool xml = f->calls == ToolFormat::Calls::kXml;
  if (r->tool_choice == ToolChoice::kAuto && !r->grammar) {
    // Free text, but a call the model starts (its open tag: the trigger) is held to the
    // grammar of one call of any tool until its close tag.
    std::string trigger = f->call_open;
    while (!trigger.empty() && std::isspace(static_cast<unsigned char>(trigger.back()))) trigger.pop_back();
    std::vector<grammar::ToolSpec> all;
    for (const ToolDef& t : r->tools) all.push_back({t.name, t.parameters});
    auto g = grammar::tool_call_grammar({f->call_open.substr(trigger.size()), f->call_close, f->call_separator, xml}, all, false);
    if (!g) return schema_error("tools", g.status());
    r->grammar = *g;
    r->grammar_trigger = trigger;
    return std::nullopt;
  }
  if (r->tool_choice != ToolChoice::kRequired && r->tool_choice != ToolChoice::kNamed) return std::nullopt;
  std::vector<grammar::ToolSpec> specs;
  for (const ToolDef& t : r->tools)
    if (r->tool_choice == ToolChoice::kRequired || t.name == r->tool_choice_name) specs.push_back({t.name, t.parameters});
  auto g = grammar::tool_call_grammar({f->call_open, f->call_close, f->call_separator, xml}, specs, r->parallel_tool_calls);
  if (!g) return schema_error("tools", g.status());
  r->grammar = *g;
  return std::nullopt;
}

}  // namespace hypic::api
