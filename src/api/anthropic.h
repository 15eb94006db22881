// Anthropic's Messages API (POST /v1/messages) on the chat machinery. A Messages body is
// translated into the equivalent chat completions body (system blocks into a system message,
// content blocks into parts; a text block of the last user message with
// "cache_control": {"type": "ephemeral"} becomes a segment, as do unmarked blocks between two
// such), so parsing, limits, segments and scheduling are the chat path's; the answer is
// written in Anthropic's shapes: a `message` object, or the SSE events message_start,
// content_block_start, ping, content_block_delta..., content_block_stop, message_delta,
// message_stop; errors as {"type": "error", "error": {"type", "message"}}.
//
// Tools: `tools` ({name, description, input_schema}) and `tool_choice` (auto / any / tool /
// none, disable_parallel_tool_use) map onto the chat fields; an assistant's tool_use blocks
// become its tool_calls and a user's tool_result blocks tool messages (before its text). The
// reply's calls come back as tool_use blocks (input: the arguments object), stop_reason
// "tool_use"; streamed as a content block each (content_block_start with input {}, one
// input_json_delta, content_block_stop).
//
// Not yet: images and documents, server tools, an assistant message last (prefill): each a
// 400 naming the field.
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "api/anthropic_request.h"
#include "api/respond.h"

namespace hypic::api {

// The route of Anthropic's Messages API: the front answers its own errors there in this shape.
inline constexpr const char* kMessagesPath = "/v1/messages";

// An error response in Anthropic's shape (status kept; its type from the status).
HttpResponse anthropic_error_reply(const ApiError& e);

// reply_completion's Anthropic form (meta.stream: the SSE events).
void reply_messages(Reply reply, std::shared_ptr<Ticket> ticket, ReplyMeta meta, ReplyDone done);

}  // namespace hypic::api
