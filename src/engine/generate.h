// Single-request generation: prefill the prompt, then decode with sampling until EOS, a stop
// string or max_tokens. The library entry point the CLI (and later the server) wrap.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/timer.h"
#include "engine/sampler.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace hypic {

struct GenerateOptions {
  SamplingParams sampling;
  int max_tokens = 256;
  std::vector<std::string> stop;  // stop strings; the match is not part of the output
  bool stop_at_eos = true;        // config eos ids and <|im_end|> / <|endoftext|> end it
};

struct GenerateResult {
  std::string text;
  std::vector<int32_t> tokens;  // generated ids (including a final EOS, if any)
  std::string finish_reason;    // "stop" or "length"
  int64_t prompt_tokens = 0;
  double ttft_ms = 0;           // prompt in -> first token sampled
  double prefill_ms = 0;
  double decode_ms = 0;         // after the first token
};

// Called with each new piece of text as it becomes final (stop strings held back until
// they can no longer match). Return false to cancel.
using TextCallback = std::function<bool(const std::string&)>;

// Holds back text that might be the start of a stop string.
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // Appends text; returns the part that is now safe to emit. Sets stopped() on a match.
  std::string push(const std::string& text);
  std::string flush();  // at the end: what is still held back
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

std::vector<int32_t> eos_ids(const ModelConfig& cfg, const Tokenizer& tok);

// The decode loop from a prefilled state: `logits` are those of the prompt's last token;
// TTFT is measured from `start` (the request's arrival). Fills out's generation fields.
Status decode(const Model& model, const Tokenizer& tok, SeqState& state,
              std::vector<float> logits, const GenerateOptions& opt, const TextCallback& on_text,
              const Timer& start, GenerateResult* out);

Result<GenerateResult> generate(const Model& model, const Tokenizer& tok,
                                const std::vector<int32_t>& prompt, const GenerateOptions& opt,
                                const TextCallback& on_text = {});

}  // namespace hypic
