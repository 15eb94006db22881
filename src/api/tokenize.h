// POST /tokenize and /detokenize in the shapes of llama-server and of vLLM's OpenAI server
// (either one's field names are taken):
//   /tokenize    {"content" | "prompt": TEXT, "parse_special"?: true, "with_pieces"?: false,
//                 "return_token_strs"?: false, "add_special" | "add_special_tokens"?: bool,
//                 "model"?: NAME}
//             or {"messages": [...], "tools"?, …: a chat request's fields} — the chat template
//                 applied as /v1/chat/completions applies it, with the assistant's header (the
//                 ids the model is given; add_generation_prompt false is refused)
//             → {"tokens": [ID…] | [{"id", "piece"}…] (with_pieces), "count", "max_model_len",
//                 "token_strs"?: [vocabulary form…] (return_token_strs)}
//   /detokenize  {"tokens": [ID…], "model"?: NAME} → {"content": TEXT, "prompt": TEXT}
// hypic's models add no special tokens to plain text (their tokenizers add none), so
// add_special(_tokens) is accepted and changes nothing; parse_special false keeps special
// tokens' text as text (llama-server's meaning).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/request.h"
#include "tokenizer/tokenizer.h"

namespace hypic::api {

struct TokenizeRequest {
  std::string model;            // "" when absent
  std::optional<std::string> text;  // the plain form
  nlohmann::json chat;          // the chat form: a chat request's body (model and max_tokens set)
  bool parse_special = true;
  bool with_pieces = false;
  bool token_strs = false;
};

// The body of POST /tokenize: errors name the field (a missing text, a wrong type, both forms
// at once, a field neither peer takes). `model` names the served model (the chat form's).
std::optional<ApiError> parse_tokenize(std::string_view body, const RequestLimits& lim, const std::string& model,
                                       TokenizeRequest* out);

// The response to a tokenize request whose ids are `ids`.
nlohmann::json tokenize_response(const Tokenizer& tok, const TokenizeRequest& r, const std::vector<int32_t>& ids,
                                 int64_t max_model_len);

// POST /detokenize: the response, or an error naming the field or the first id the vocabulary
// lacks.
std::optional<ApiError> detokenize(std::string_view body, const RequestLimits& lim, const std::string& model,
                                   const Tokenizer& tok, nlohmann::json* response);

}  // namespace hypic::api
