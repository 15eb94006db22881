// Tool calling on the OpenAI API: the request's tools and tool choice, and the model's tool
// calls read back out of its text (whole, or as a stream of pieces).
//
// A reply is text with call blocks in the model's format (tokenizer/chat_template.h
// ToolFormat: Qwen3 writes "<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>",
// Qwen3.5 "<tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n...
// </function>\n</tool_call>"; either body is read whatever the format). A block that parses,
// names a declared tool and has an object of arguments (JSON: an object or a string holding
// one; XML: each value typed by the tool's schema — strings as they are, numbers, booleans
// (True / true), objects and lists as JSON) becomes a tool call; any other block stays text,
// so malformed output comes back as content, never an error — except in a reply cut by
// max_tokens, whose unterminated last block (or the start of its tag) is dropped: a fragment of
// a call is neither.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace hypic::api {

struct ToolCall {
  std::string id;         // "call_..." (ours on output; the client's in history)
  std::string name;
  std::string arguments;  // JSON text of an object
};

struct ToolDef {
  std::string name;
  nlohmann::ordered_json parameters;  // a JSON schema (grammar/json_schema.h subset); null: any object
  // The tool object as the client sent it, written as Python's json.dumps writes it (the
  // chat templates' tojson): what goes into the prompt.
  std::string rendered;
};

enum class ToolChoice { kAuto, kNone, kRequired, kNamed };
enum class ResponseFormat { kText, kJsonObject, kJsonSchema };

// json.dumps(v, ensure_ascii=False): ", " and ": " separators, keys in the given order.
std::string python_json(const nlohmann::ordered_json& v);

// Reads calls out of a reply as it streams. feed() the text pieces in order and then finish();
// each returns what became final: content text and whole calls, in order. Text that might be
// the start of a call block is held back until it is known.
class ToolCallReader {
 public:
  struct Event {
    bool is_call = false;
    std::string text;  // content (is_call false)
    ToolCall call;     // is_call true
  };
  ToolCallReader(std::string open, std::string close, std::vector<ToolDef> tools)
      : open_(std::move(open)), close_(std::move(close)), tools_(std::move(tools)) {}
  std::vector<Event> feed(std::string_view text);
  // `cut`: the reply was cut by max_tokens (an unfinished block at its end is dropped).
  std::vector<Event> finish(bool cut);
  int calls() const { return calls_; }

 private:
  void take(std::vector<Event>* out, bool at_end);
  void add_text(std::vector<Event>* out, std::string text);
  std::string open_, close_;
  std::vector<ToolDef> tools_;
  std::string buf_;       // not yet final
  std::string held_ws_;   // trailing whitespace of the content so far
  bool at_start_ = true;  // no content since the start or the last call
  bool inside_ = false;   // buf_ is inside a call block
  int calls_ = 0;
  bool cut_ = false;  // finish(true): the reply was cut
};

// A whole reply: content (text outside calls, trimmed; "" when none) and the calls; the
// same as the events of one ToolCallReader fed the whole text (`cut`: as finish's).
struct ParsedReply {
  std::string content;
  std::vector<ToolCall> calls;
};
ParsedReply read_tool_calls(std::string_view text, const std::string& open, const std::string& close,
                            const std::vector<ToolDef>& tools, bool cut);

// A fresh call id: "call_" and 24 random hex digits.
std::string new_tool_call_id();

}  // namespace hypic::api
