// A validated API request (api/request.h) as the engine takes it: its prompt laid out as
// PIC parts (prefix, segments, suffix) in the model's chat format, and its sampling and stop
// options. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "api/request.h"
#include "engine/generate.h"
#include "engine/tokenized_request.h"

namespace hypic {
class ChatTemplate;
class Tokenizer;
}

namespace hypic::server {

// Sampling / stop options for the engine from a validated request.
GenerateOptions generate_options(const api::ApiRequest& r);

// Chat messages -> prompt parts, each message a turn of `chat`. System messages form the
// prefix turn; in the last user message, parts marked as segments become independent
// segments, text before the first one joins the prefix and text after the last one the
// suffix. Earlier turns are prefix. Text between two segments is not allowed (no place for
// it in the layout): 400.
// Completions prompt -> all of it in the suffix (plain prompt ids, no template).
// `max_prompt_tokens` (the context minus max_tokens) is checked after tokenisation.
// A registered-segment reference takes its tokens from `resolve` (its error, e.g.
// segment_not_found, is returned with the part's param filled in); without a resolver a
// reference is answered segment_not_found.
using SegmentResolver =
    std::function<std::optional<api::ApiError>(const std::string& id, std::vector<int32_t>* tokens)>;
std::optional<api::ApiError> build_prompt(const Tokenizer& tok, const ChatTemplate& chat,
                                     const api::ApiRequest& r, int64_t max_prompt_tokens,
                                     PromptParts* out, const SegmentResolver& resolve = {});

}  // namespace hypic::server
