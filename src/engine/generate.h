// Single-request generation: prefill the prompt, then decode with sampling until EOS, a stop
// string or max_tokens. The library entry point the CLI (and later the server) wrap.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/timer.h"
#include "engine/logprobs.h"
#include "engine/sampler.h"
#include "engine/token_constraint.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace hypic {

struct GenerateOptions {
  SamplingParams sampling;
  int max_tokens = 256;
  std::vector<std::string> stop;  // stop strings; the match is not part of the output
  bool stop_at_eos = true;        // config eos ids and <|im_end|> / <|endoftext|> end it
  // -1: none; 0..kMaxTopLogprobs: each output token's logprob and that many alternatives.
  int logprobs = -1;
  // With logprobs: called just before each piece of text goes to on_text, with the logprobs
  // of the tokens that piece came from (streaming them along with the text).
  std::function<void(std::vector<PositionLogprobs>)> on_logprobs;
  // Constrained decoding (engine/token_constraint.h): the text is a sentence of this grammar
  // (ended by an end-of-sequence token once complete, or cut by max_tokens). Null: free text.
  std::shared_ptr<const grammar::Grammar> grammar;
  // With a grammar: applies only after this text appears (TokenConstraint's lazy mode), and
  // with a gate only after the gate's text has appeared before it.
  std::string grammar_trigger, grammar_gate;
};

struct GenerateResult {
  std::string text;
  std::vector<int32_t> tokens;  // generated ids (including a final EOS, if any)
  // With GenerateOptions::logprobs >= 0: one per token of `text` (not the final EOS).
  std::vector<PositionLogprobs> logprobs;
  std::string finish_reason;    // "stop" or "length"
  std::string stop_sequence;    // the stop string that ended it, if one did
  int64_t prompt_tokens = 0;
  double ttft_ms = 0;           // prompt in -> first token sampled
  double prefill_ms = 0;
  double decode_ms = 0;         // after the first token
  int64_t full_masks = 0;       // with a grammar: tokens that needed the full vocabulary mask
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
  const std::string& matched() const { return matched_; }  // the stop string that matched

 private:
  std::vector<std::string> stops_;
  std::string matched_;
  std::string pending_;
  bool stopped_ = false;
};

// The ids generation stops on: the config's eos_token_id and the end tokens of the model's
// chat template (those its tokenizer has).
std::vector<int32_t> eos_ids(const ModelConfig& cfg, const Tokenizer& tok);

// The per-token bookkeeping of one sequence's decode loop: sampling, EOS, stop strings,
// streaming through on_text, max_tokens and the context limit. decode() and DecodeBatch
// both drive one, so a sequence behaves the same alone or batched. The model call is the
// caller's:
//   DecodeCursor cur(...);
//   while (cur.next(logits, state.pos)) logits = <forward cur.token() on state>;
//   Status s = cur.finish();
class DecodeCursor {
 public:
  // Fills the generation fields of *out (text, tokens, finish_reason, ttft_ms, decode_ms);
  // out must outlive the cursor. TTFT is measured from `start`. on_text may be empty.
  DecodeCursor(const ModelConfig& cfg, const Tokenizer& tok, const GenerateOptions& opt,
               TextCallback on_text, const Timer& start, GenerateResult* out);
  DecodeCursor(const DecodeCursor&) = delete;
  DecodeCursor& operator=(const DecodeCursor&) = delete;

  // Samples the next token from `logits` ([V]: those of the last token the state consumed,
  // `pos` = state.pos) and accepts it. True: the sequence goes on — feed token() to the
  // model and call again with its logits. False: it has ended (then call finish()).
  bool next(const float* logits, int64_t pos) { return !ended_ && accept(sample(logits), pos); }
  // next() in two halves, so a batch can sample its sequences in parallel: sample() touches
  // only this cursor's sampler; accept() records, streams and decides (call in order).
  int32_t sample(const float* logits);
  bool accept(int32_t id, int64_t pos);

  bool ended() const { return ended_; }  // true from the start when max_tokens == 0
  int32_t token() const { return last_; }  // the last accepted token
  // Once, after the end: releases held-back text (unless stopped or cancelled), sets
  // decode_ms. kCancelled when on_text returned false, else ok.
  Status finish();

 private:
  bool end() {
    ended_ = true;
    return false;
  }
  // Sends a piece of text (after its tokens' logprobs); false if on_text cancels.
  bool emit(const std::string& piece);

  int64_t vocab_, context_;
  GenerateOptions opt_;
  Tokenizer tok_;                    // token bytes for logprobs
  PositionLogprobs pending_lp_;      // of the token sample() chose, for accept()
  std::vector<int32_t> eos_;
  Sampler sampler_;
  std::optional<TokenConstraint> constraint_;  // with opt.grammar
  StopMatcher stop_;
  IncrementalDecoder dec_;
  TextCallback on_text_;
  Timer start_, decode_timer_;  // request arrival; first token
  GenerateResult* out_;
  int sampled_ = 0;  // tokens accepted so far
  size_t lp_sent_ = 0;  // out_->logprobs already given to opt_.on_logprobs
  int32_t last_ = -1;
  bool ended_ = false, cancelled_ = false;
};

// The decode loop from a prefilled state: `logits` are those of the prompt's last token;
// TTFT is measured from `start` (the request's arrival). Fills out's generation fields.
Status decode(const Model& model, const Tokenizer& tok, SeqState& state,
              std::vector<float> logits, const GenerateOptions& opt, const TextCallback& on_text,
              const Timer& start, GenerateResult* out);

Result<GenerateResult> generate(const Model& model, const Tokenizer& tok,
                                const std::vector<int32_t>& prompt, const GenerateOptions& opt,
                                const TextCallback& on_text = {});

}  // namespace hypic
