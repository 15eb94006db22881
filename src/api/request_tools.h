// Tool calling and structured output on /v1/chat/completions: parsing `tools`, `tool_choice`,
// `parallel_tool_calls`, `response_format` and the tool fields of messages (assistant
// `tool_calls`, tool `tool_call_id`); writing them into the model's chat format; and the
// grammar that sampling is constrained to.
//
//   tool_choice "auto" (the default with tools): tools in the prompt, free text; call blocks
//     in the reply become tool_calls (api/tool_calls.h); once the model writes a call's open
//     tag, the rest of that call is held to the grammar of one call (a lazy grammar).
//   "none": the tools are left out of the prompt; the reply is text.
//   "required" / {"type": "function", "function": {"name": N}}: the reply is one or more
//     calls (one when parallel_tool_calls is false) of any tool / of N, enforced by a grammar.
//   response_format json_object / json_schema: the reply is such JSON, enforced by a grammar
//     (not combinable with a required or named tool choice; with tools and "auto" the JSON
//     constraint wins and no call can be made).
// Thread-safe: pure functions.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/request.h"

namespace hypic::api {

// Limits on what a request may declare.
inline constexpr size_t kMaxTools = 128;
inline constexpr size_t kMaxToolNameBytes = 64;

// `tools`, `tool_choice`, `parallel_tool_calls`, `response_format` of a chat body `j` (its
// text `body`, re-read in key order when it has tools or a schema: the order of a schema's
// properties is the order the model writes them in).
std::optional<ApiError> parse_tool_fields(const nlohmann::json& j, std::string_view body, ApiRequest* r);

// The tool fields of message `m` (path `pm`) into *msg (its role already set): an assistant's
// `tool_calls`, a tool message's `tool_call_id`.
std::optional<ApiError> parse_message_tool_fields(const nlohmann::json& m, const std::string& pm, Message* msg);

// Each tool message must answer a call of the assistant message before it (other tool
// messages between them allowed).
std::optional<ApiError> check_tool_messages(const std::vector<Message>& msgs);

// The conversation as the chat template writes it: the tools in the system turn (a system
// message made when there is none), an assistant's calls after its text, consecutive tool
// messages as one user turn of tool responses. 400 when the model's format has no tools here.
std::optional<ApiError> template_messages(const ChatTemplate& chat, const ApiRequest& r, std::vector<Message>* out);

// Sets r->grammar (and the call delimiters) for the request's tool choice and response format.
std::optional<ApiError> request_grammar(const ChatTemplate& chat, ApiRequest* r);

}  // namespace hypic::api
