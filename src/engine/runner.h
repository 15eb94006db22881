// The request runner: one engine object between a tokenised request and its first token.
// It has the request's missed segments built beside the composition (a SegmentBuilder, when
// it has one and the request asks), composes, waits for the builds, and returns the
// prefilled sequence with the request's figures. `hypic run`, the server's jobs (`hypic
// serve`, its Combine service), `hypic eval` and the TTFT and scatter benches run requests
// through it; the server's decode thread continues from the prefilled sequence, `generate()`
// decodes it here.
//
// Threading: one Runner serves any number of requests at once (the Model is immutable, the
// store, the prefix cache and the builder are internally synchronised).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/prefix_cache.h"
#include "cache/segment_store.h"
#include "core/status.h"
#include "engine/compose.h"
#include "engine/generate.h"
#include "engine/logprobs.h"
#include "engine/segment_builder.h"
#include "engine/tokenized_request.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace hypic {

// What one request did, for its caller's output (the server's usage, `hypic run`'s JSON).
struct RequestFigures {
  PicMode mode = PicMode::kHypic;
  ComposeStats compose;
  std::optional<BuildFigures> build;  // set when a SegmentBuilder built its missed segments
  double ttft_ms = 0;                 // arrival -> first token, once it is sampled
  int64_t completion_tokens = 0;      // once generation has ended
};

struct RunOptions {
  // Mode, seam, salt, cancel hook, trace; `arriving` is the runner's to set.
  ComposeOptions compose;
  int64_t decode_tokens = 0;  // room in the state beyond the prompt: the tokens to generate
  // hypic / naive: the runner's builder (if it has one) builds the missed segments while the
  // composition runs; otherwise they are built in turn on the calling thread.
  bool parallel = false;
  // The builder's workers for this request (null: its own); must outlive prefill().
  const std::vector<std::string>* workers = nullptr;
};

struct Prefilled {
  SeqState state;
  std::vector<float> logits;  // [V], the prompt's last token
  RequestFigures figures;     // ttft_ms and completion_tokens not yet set
};

struct Completion {
  GenerateResult generation;
  RequestFigures figures;
};

class Runner {
 public:
  // `store` (hypic / naive) and `prefix_cache` (prefix mode) may be null where those modes
  // are not used; `builder` (may be null) must outlive the runner.
  Runner(const Model& model, std::shared_ptr<SegmentStore> store,
         std::shared_ptr<PrefixCache> prefix_cache, SegmentBuilder* builder = nullptr);

  const Model& model() const { return model_; }

  // The request prefilled into a fresh state. `req` must be keyed under opt.compose's seam
  // and salt (make_request). A cancel (ComposeOptions::cancelled) returns kCancelled; what
  // is still building is cancelled and nothing partial is stored.
  Result<Prefilled> prefill(const TokenizedRequest& req, const RunOptions& opt) const;

  // `prompt` prefilled in full with every position scored (echo with logprobs: a chunked full
  // forward, score_prompt, whatever opt.compose.mode says): *scored gets each token's logprob
  // and `top` alternatives, named by tok. Figures as a full-mode prefill; opt.compose.cancelled
  // is polled between chunks.
  Result<Prefilled> prefill_scored(const std::vector<int32_t>& prompt, const RunOptions& opt,
                                   const Tokenizer& tok, int top,
                                   std::vector<PositionLogprobs>* scored) const;

  // prefill(), then the decode loop on this thread (room for go.max_tokens; TTFT from the
  // call). For single-request callers.
  Result<Completion> generate(const TokenizedRequest& req, const RunOptions& opt,
                              const Tokenizer& tok, const GenerateOptions& go,
                              const TextCallback& on_text = {}) const;

  // A segment's entry for registration (/v1/segments): keyed under opt.seam and opt.salt,
  // found or built and stored, pinned. A segment too short to have a body has no entry: a
  // null Pin.
  Result<SegmentStore::Pin> entry_for(std::vector<int32_t> tokens, const ComposeOptions& opt) const;

 private:
  const Model& model_;
  Composer composer_;
  SegmentBuilder* builder_;
};

}  // namespace hypic
