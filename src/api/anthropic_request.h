// POST /v1/messages's body as the equivalent chat completions body (api/anthropic.h says how
// it maps); the request parser's dependencies only.
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include "api/request.h"

namespace hypic::api {

// The chat completions body for a Messages body, or the error (400 / 413).
std::variant<ApiError, std::string> messages_to_chat(std::string_view body, const RequestLimits& lim);

}  // namespace hypic::api
