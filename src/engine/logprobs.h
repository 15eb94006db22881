// Log-probabilities of generated tokens (the API's `logprobs` / `top_logprobs`): the model's
// own distribution, log_softmax of the raw logits (before temperature, top-k or top-p), so
// they do not depend on how the token was sampled.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/model.h"
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

// Prefills `prompt` into `st` (the full forward, in chunks) and scores it: one entry per prompt
// token, each the logprob of that token given the ones before (the first has none: NaN, no
// alternatives). *last_logits: the last token's logits, for decoding on. `cancelled` is
// polled between chunks (kCancelled).
Status score_prompt(const Model& model, const Tokenizer& tok, SeqState& st, const std::vector<int32_t>& prompt, int top,
                    std::vector<PositionLogprobs>* out, std::vector<float>* last_logits,
                    const std::function<bool()>& cancelled = {});

}  // namespace hypic
