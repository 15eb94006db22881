#include "engine/runner.h"

#include "core/timer.h"

namespace hypic {

Runner::Runner(const Model& model, std::shared_ptr<SegmentStore> store,
               std::shared_ptr<PrefixCache> prefix_cache, SegmentBuilder* builder)
    : model_(model), composer_(model, std::move(store), std::move(prefix_cache)), builder_(builder) {}

Result<Prefilled> Runner::prefill(const TokenizedRequest& req, const RunOptions& opt) const {
  Prefilled p;
  p.figures.mode = opt.compose.mode;
  p.state = model_.new_state(req.total_tokens() + opt.decode_tokens + 1);
  ComposeOptions co = opt.compose;
  // Declared after `co`, so a call still running is cancelled (and joined) first.
  std::unique_ptr<BuildCall> call;
  const bool composes = co.mode == PicMode::kHypic || co.mode == PicMode::kNaive;
  if (builder_ && opt.parallel && composes) {
    call = builder_->start(req, opt.compose, opt.workers);
    co.arriving = &call->arriving();
  }
  HYPIC_RETURN_IF_ERROR(composer_.prefill(req, co, &p.state, &p.logits, &p.figures.compose));
  if (call) {
    // The pins only bridge the builds and the composition: released once both are done.
    HYPIC_RETURN_IF_ERROR(call->wait().status());
    p.figures.build = call->figures();
  }
  return p;
}

Result<Prefilled> Runner::prefill_scored(const std::vector<int32_t>& prompt, const RunOptions& opt,
                                         const Tokenizer& tok, int top,
                                         std::vector<PositionLogprobs>* scored) const {
  const Timer t;
  Prefilled p;
  p.state = model_.new_state(std::min<int64_t>(int64_t(prompt.size()) + opt.decode_tokens + 1,
                                               model_.config().max_position_embeddings));
  HYPIC_RETURN_IF_ERROR(score_prompt(model_, tok, p.state, prompt, top, scored, &p.logits,
                                     opt.compose.cancelled));
  p.figures.mode = PicMode::kFull;  // every position scored: the whole prompt computed
  p.figures.compose.prompt_tokens = int64_t(prompt.size());
  p.figures.compose.recomputed_tokens = int64_t(prompt.size());
  p.figures.compose.prefill_ms = t.ms();
  return p;
}

Result<Completion> Runner::generate(const TokenizedRequest& req, const RunOptions& opt,
                                    const Tokenizer& tok, const GenerateOptions& go,
                                    const TextCallback& on_text) const {
  const Timer t;
  RunOptions o = opt;
  o.decode_tokens = go.max_tokens;
  HYPIC_ASSIGN_OR_RETURN(Prefilled p, prefill(req, o));
  Completion c;
  c.generation.prompt_tokens = req.total_tokens();
  c.generation.prefill_ms = t.ms();
  HYPIC_RETURN_IF_ERROR(decode(model_, tok, p.state, std::move(p.logits), go, on_text, t, &c.generation));
  c.figures = std::move(p.figures);
  c.figures.ttft_ms = c.generation.ttft_ms;
  c.figures.completion_tokens = int64_t(c.generation.tokens.size());
  return c;
}

Result<SegmentStore::Pin> Runner::entry_for(std::vector<int32_t> tokens,
                                            const ComposeOptions& opt) const {
  if (opt.seam < 0) return invalid_argument("seam width must be >= 0");
  const SegmentRef seg = segment_ref(model_, std::move(tokens), opt.seam, opt.salt);
  if (seg.key.empty()) return SegmentStore::Pin();
  bool hit = false;
  return composer_.entry_for(seg, opt, &hit);
}

}  // namespace hypic
