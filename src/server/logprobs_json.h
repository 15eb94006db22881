// The `logprobs` object of a choice, in the shape of each endpoint (OpenAI's API): chat's
// {"content": [{token, logprob, bytes, top_logprobs: [...]}], "refusal": null}, completions'
// {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}], "text_offset"}. A token that
// is part of a UTF-8 character is its bytes, shown with U+FFFD where they are incomplete.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "api/request.h"
#include "engine/logprobs.h"

namespace hypic::server {

// `offset`: completions' text_offset of the first token (a stream's later pieces).
nlohmann::json logprobs_json(const std::vector<PositionLogprobs>& lp, api::Endpoint ep, size_t offset = 0);

}  // namespace hypic::server
