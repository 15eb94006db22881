// Log-probabilities of generated tokens (the API's `logprobs` / `top_logprobs`): the model's
// own distribution, log_softmax of the raw logits (before temperature, top-k or top-p), so
// they do not depend on how the token was sampled.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace hypic {

struct TokenLogprob {
  int32_t id = -1;
  std::string bytes;  // the token's raw bytes (may be part of a UTF-8 character)
  float logprob = 0;
};

// One generated position: the chosen token and the `top` most likely ones (most likely
// first; ties by lower id).
struct PositionLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;
};

// The most tokens a request may ask alternatives for (OpenAI's top_logprobs limit).
inline constexpr int kMaxTopLogprobs = 20;

// logits: [V]. `top` in 0..kMaxTopLogprobs.
PositionLogprobs logprobs_at(const float* logits, int64_t V, int32_t chosen, int top, const Tokenizer& tok);

}  // namespace hypic
