// OpenAI-compatible request parsing and validation (/v1/chat/completions, /v1/completions,
// POST /v1/segments). Nothing here knows the engine (server/engine_request.h maps a
// validated request onto its prompt layout), so the router parses requests without a model.
//
// Every violation is an ApiError: the OpenAI error object (message, type, param, code) plus
// the HTTP status to answer with. Parsing never throws and never aborts, whatever the bytes.
// Threading: pure functions, safe to call concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/tool_calls.h"
#include "core/pic_mode.h"

namespace hypic {
class ChatTemplate;
struct ReasoningFormat;
namespace grammar {
class Grammar;
}
}

namespace hypic::api {

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" -> null
  std::string code;   // "" -> null
  // {"error": {"message", "type", "param", "code"}}
  nlohmann::json to_json() const;
};

ApiError bad_request(std::string message, std::string param = "", std::string code = "");
// '<param>' must be <want>, got <v's type>.
ApiError wrong_type(const std::string& param, const char* want, const nlohmann::json& v);

enum class Endpoint { kChat, kCompletions };
enum class Role { kSystem, kUser, kAssistant, kTool };

// A content part of a chat message. Three forms:
//   {"type": "text", "text": "..."}                                   plain text
//   {"type": "text", "text": "...", "cache_control": {"type": "segment"}}  (or
//     "hypic_segment": true)                                          an inline segment
//   {"type": "segment", "segment_id": "seg_..."}                      a registered segment
//     (POST /v1/segments): segment = true, text empty; build_prompt's resolver supplies its
//     tokens. Allowed wherever an inline segment is (the last user message) and counted by
//     max_segments.
struct ContentPart {
  std::string text;
  bool segment = false;
  std::string segment_id;  // non-empty: a reference to a registered segment
};

struct Message {
  Role role = Role::kUser;
  std::vector<ContentPart> parts;
  std::vector<ToolCall> tool_calls;  // an assistant message's calls (history)
  std::string tool_call_id;          // a tool message: the call it answers
  std::string reasoning;             // an assistant message's reasoning_content (history)
};

struct RequestLimits {
  size_t max_body_bytes = 8u << 20;
  int max_messages = 256;
  int max_segments = 64;
  int max_choices = 16;           // upper bound for n
  int max_stop = 4;
  size_t max_stop_bytes = 256;
  int max_tokens = 4096;          // upper bound for max_tokens
  int default_max_tokens = 256;
  int max_seam = 1024;
  size_t max_salt_bytes = 256;
  int64_t max_segment_ttl_s = 30 * 86400;  // POST /v1/segments "ttl"
  size_t max_segment_id_bytes = 64;
};

// POST /v1/segments: {"text", "ttl"?, "cache_salt"?, "seam"?, "model"?}.
struct SegmentRequest {
  std::string model;  // "" when absent (then any served model)
  std::string text;
  std::string cache_salt;
  int seam = 8;       // as ApiRequest's default, so that plain requests hit the entry
  std::optional<int64_t> ttl_seconds;  // none: kept until DELETE
};

// The most alternatives a request may ask for per token (OpenAI's top_logprobs limit).
inline constexpr int kMaxTopLogprobs = 20;

struct ApiRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;
  std::vector<Message> messages;  // chat
  std::string prompt;             // completions: text (empty when given as token ids)
  std::vector<int32_t> prompt_tokens;  // completions: token ids (checked against the vocabulary later)
  // Completions with automatic segments (api/auto_segments.h): the prompt's segments, in
  // order, before `prompt` (then the text after the last one).
  std::vector<std::string> prompt_segments;
  // hypic.auto_segments as asked: none (the server's default), "off", "default" (true) or
  // a list ("separator,parts"); auto_segments_made: the segments apply_auto_segments made.
  std::optional<std::string> auto_segments;
  int auto_segments_made = 0;
  // Set by apply_auto_segments: each tool description / each trailing tool result is written
  // as a segment (api/request_tools.h template_messages).
  bool segment_tools = false;
  bool segment_tool_results = false;
  // Completions: the answer starts with the prompt (and, with logprobs, the prompt tokens'
  // logprobs: the prompt is then prefilled in full mode, every position scored).
  bool echo = false;
  // -1: no logprobs; else each output token's logprob and this many alternatives (chat:
  // logprobs + top_logprobs; completions: logprobs).
  int logprobs = -1;
  int max_tokens = 0;             // resolved (default applied)
  int n = 1;                      // choices: one prefill, a sequence each
  double temperature = 1.0;       // OpenAI default
  double top_p = 1.0;
  int top_k = 0;                  // extension (as vLLM): 0 or -1 off
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  std::string cache_salt;
  PicMode mode = PicMode::kHypic;
  int seam = 8;
  std::string user;
  // Chat: tools (api/request_tools.h). tool_choice_name: the function of ToolChoice::kNamed.
  std::vector<ToolDef> tools;
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_name;
  bool parallel_tool_calls = true;
  // response_format; response_schema: json_schema's "schema" (null: any JSON object).
  ResponseFormat response_format = ResponseFormat::kText;
  nlohmann::ordered_json response_schema;
  // Tools go into the prompt and calls are read out of the reply (tools given, choice not none).
  bool uses_tools() const { return !tools.empty() && tool_choice != ToolChoice::kNone; }
  // Chat: chat_template_kwargs.enable_thinking as asked (none: the server's default).
  std::optional<bool> enable_thinking;
  // Not parsed; set by the server: the model's reasoning format when its checkpoint thinks
  // (then history is written as the template writes it), and whether this reply starts
  // inside a reasoning block (its reasoning is returned apart from its content).
  const ReasoningFormat* reasoning = nullptr;
  bool thinking = false;
  // Not parsed; set by the server (request_grammar): what sampling is constrained to (null:
  // free text) and the model's call block delimiters (calls are read out of the reply).
  std::shared_ptr<const grammar::Grammar> grammar;
  std::string grammar_trigger;  // the grammar applies after this text (tool_choice auto)
  std::string tool_call_open, tool_call_close;
  int segment_count() const;
};

// A body as JSON (an object where `object`): 413 past lim.max_body_bytes, 400 when it is not
// JSON (or not UTF-8, or not an object).
std::optional<ApiError> parse_json_body(std::string_view body, const RequestLimits& lim, nlohmann::json* out,
                                        bool object = true);

// Parses and validates a request body. On failure returns the error (status 400 or 413).
// The model name is checked by the caller (404 for an unknown model).
std::optional<ApiError> parse_request(std::string_view body, Endpoint ep,
                                      const RequestLimits& limits, ApiRequest* out);

// Parses and validates a POST /v1/segments body (400 / 413 as above; the model name and the
// token count are checked by the caller).
std::optional<ApiError> parse_segment_request(std::string_view body, const RequestLimits& limits,
                                              SegmentRequest* out);

// The 404 for a segment id that is unknown, expired, deleted or registered under another
// cache_salt: one message for all of them, so that it never reveals another tenant's ids.
ApiError segment_not_found(const std::string& id, std::string param = "");

// The role as chat templates name it (a "developer" message is kSystem).
std::string_view role_name(Role r);

// The prompt text of a request: a chat rendered by `chat` with its generation prompt
// (segments in place; a registered segment's text is not kept, so a reference contributes
// nothing), a completions prompt as given (empty when given as token ids). For reference runs and logs.
std::string prompt_text(const ChatTemplate& chat, const ApiRequest& r);

}  // namespace hypic::api
