#include "api/tool_calls.h"

#include <algorithm>
#include <cstdio>
#include <random>

#include "core/text.h"

namespace hypic::api {

using OJson = nlohmann::ordered_json;

namespace {

void python_json_to(const OJson& v, std::string* out) {
  switch (v.type()) {
    case OJson::value_t::object: {
      *out += '{';
      bool first = true;
      for (const auto& [k, x] : v.items()) {
        if (!first) *out += ", ";
        first = false;
        *out += OJson(k).dump(-1, ' ', false, OJson::error_handler_t::replace);
        *out += ": ";
        python_json_to(x, out);
      }
      *out += '}';
      return;
    }
    case OJson::value_t::array: {
      *out += '[';
      for (size_t i = 0; i < v.size(); ++i) {
        if (i) *out += ", ";
        python_json_to(v[i], out);
      }
      *out += ']';
      return;
    }
    default:
      *out += v.dump(-1, ' ', false, OJson::error_handler_t::replace);
  }
}

const ToolDef* find_tool(const std::vector<ToolDef>& tools, std::string_view name) {
  for (const ToolDef& t : tools)
    if (t.name == name) return &t;
  return nullptr;
}

// An XML parameter's text as the value its schema says (as vLLM's Qwen3-Coder parser reads
// them): a string as it is; a number, boolean, object or list parsed (True / False too);
// without a type, JSON if it parses, else the text.
OJson typed_value(const std::string& text, const OJson* schema) {
  std::string type;
  if (schema && schema->is_object() && schema->contains("type") && (*schema)["type"].is_string())
    type = (*schema)["type"].get<std::string>();
  if (type == "string") return text;
  if (type == "boolean" || type.empty()) {
    if (text == "True" || text == "true") return true;
    if (text == "False" || text == "false") return false;
  }
  if (type.empty() && text == "None") return nullptr;
  OJson v = OJson::parse(text, nullptr, /*allow_exceptions=*/false);
  return v.is_discarded() ? OJson(text) : v;
}

// <function=NAME>\n(<parameter=KEY>\nVALUE\n</parameter>\n)*</function> -> name, arguments.
bool parse_xml_call(std::string_view body, const std::vector<ToolDef>& tools, std::string* name, OJson* args) {
  const std::string_view fn = "<function=", pe = "<parameter=", pc = "</parameter>", fc = "</function>";
  if (body.substr(0, fn.size()) != fn) return false;
  const size_t gt = body.find('>');
  if (gt == std::string_view::npos) return false;
  *name = std::string(body.substr(fn.size(), gt - fn.size()));
  const ToolDef* tool = find_tool(tools, *name);
  if (!tool) return false;
  const OJson* props = tool->parameters.is_object() && tool->parameters.contains("properties") ? &tool->parameters["properties"] : nullptr;
  *args = OJson::object();
  std::string_view rest = trim_space(body.substr(gt + 1));
  while (rest.substr(0, pe.size()) == pe) {
    const size_t k = rest.find('>');
    const size_t end = rest.find(pc);
    if (k == std::string_view::npos || end == std::string_view::npos || end < k) return false;
    const std::string key(rest.substr(pe.size(), k - pe.size()));
    std::string_view value = rest.substr(k + 1, end - k - 1);
    if (!value.empty() && value.front() == '\n') value.remove_prefix(1);
    if (!value.empty() && value.back() == '\n') value.remove_suffix(1);
    const OJson* schema = props && props->is_object() && props->contains(key) ? &(*props)[key] : nullptr;
    (*args)[key] = typed_value(std::string(value), schema);
    rest = trim_space(rest.substr(end + pc.size()));
  }
  return rest == fc;
}

// The call in a block's text, if it is one: {"name": declared, "arguments": object or a
// string holding one}, or the XML form.
bool parse_call(std::string_view block, const std::vector<ToolDef>& tools, ToolCall* call) {
  std::string name;
  OJson args;
  if (!parse_xml_call(trim_space(block), tools, &name, &args)) {
    const OJson j = OJson::parse(trim_space(block), nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return false;
    auto n = j.find("name");
    if (n == j.end() || !n->is_string() || !find_tool(tools, n->get<std::string>())) return false;
    name = n->get<std::string>();
    args = OJson::object();
    if (auto a = j.find("arguments"); a != j.end()) {
      args = a->is_string() ? OJson::parse(a->get<std::string>(), nullptr, false) : *a;
      if (!args.is_object()) return false;
    }
  }
  call->id = new_tool_call_id();
  call->name = std::move(name);
  call->arguments = args.dump(-1, ' ', false, OJson::error_handler_t::replace);
  return true;
}

// The length of the longest suffix of s that is a proper prefix of p.
size_t partial_prefix(std::string_view s, std::string_view p) {
  for (size_t n = std::min(s.size(), p.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == p.substr(0, n)) return n;
  return 0;
}

}  // namespace

std::string python_json(const OJson& v) {
  std::string out;
  python_json_to(v, &out);
  return out;
}

std::string new_tool_call_id() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  char buf[32];
  std::snprintf(buf, sizeof buf, "call_%016llx%08llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng() & 0xffffffffULL));
  return buf;
}

// Content is trimmed as a whole: leading whitespace (at the start and after a call) is
// dropped; trailing whitespace is held until more text follows it, and dropped before a call
// and at the end. So the streamed pieces add up to exactly the non-streamed content.
void ToolCallReader::add_text(std::vector<Event>* out, std::string text) {
  if (at_start_) {
    const size_t b = text.find_first_not_of(" \n\t\r");
    text.erase(0, b == std::string::npos ? text.size() : b);
    if (text.empty()) return;
    at_start_ = false;
  }
  const size_t e = text.find_last_not_of(" \n\t\r");
  if (e == std::string::npos) {
    held_ws_ += text;
    return;
  }
  Event ev;
  ev.text = std::exchange(held_ws_, "") + text.substr(0, e + 1);
  held_ws_ = text.substr(e + 1);
  out->push_back(std::move(ev));
}

void ToolCallReader::take(std::vector<Event>* out, bool at_end) {
  for (;;) {
    if (!inside_) {
      const size_t p = buf_.find(open_);
      if (p == std::string::npos) {
        // The start of a block, held back: text at the end, unless the reply was cut there.
        const size_t held = partial_prefix(buf_, open_);
        add_text(out, buf_.substr(0, buf_.size() - (at_end && !cut_ ? 0 : held)));
        buf_.erase(0, buf_.size() - (at_end ? 0 : held));
        return;
      }
      add_text(out, buf_.substr(0, p));
      buf_.erase(0, p + open_.size());
      inside_ = true;
    }
    const size_t q = buf_.find(close_);
    if (q == std::string::npos) {
      if (at_end) {  // unterminated: text as written, or nothing when the reply was cut inside it
        if (!cut_) add_text(out, open_ + buf_);
        buf_.clear();
        inside_ = false;
      }
      return;
    }
    Event ev;
    if (parse_call(std::string_view(buf_).substr(0, q), tools_, &ev.call)) {
      ev.is_call = true;
      held_ws_.clear();
      at_start_ = true;
      ++calls_;
      out->push_back(std::move(ev));
    } else {
      add_text(out, open_ + buf_.substr(0, q + close_.size()));
    }
    buf_.erase(0, q + close_.size());
    inside_ = false;
  }
}

std::vector<ToolCallReader::Event> ToolCallReader::feed(std::string_view text) {
  buf_ += text;
  std::vector<Event> out;
  take(&out, false);
  return out;
}

std::vector<ToolCallReader::Event> ToolCallReader::finish(bool cut) {
  std::vector<Event> out;
  cut_ = cut;
  take(&out, true);
  held_ws_.clear();
  return out;
}

ParsedReply read_tool_calls(std::string_view text, const std::string& open, const std::string& close,
                            const std::vector<ToolDef>& tools, bool cut) {
  ToolCallReader r(open, close, tools);
  ParsedReply out;
  auto add = [&](std::vector<ToolCallReader::Event> evs) {
    for (auto& e : evs) {
      if (e.is_call) out.calls.push_back(std::move(e.call));
      else out.content += e.text;
    }
  };
  add(r.feed(text));
  add(r.finish(cut));
  return out;
}

}  // namespace hypic::api
