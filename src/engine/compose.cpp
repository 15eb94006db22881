#include "engine/compose.h"

#include "core/timer.h"

namespace hypic {

Composer::Composer(const Model& model, std::shared_ptr<SegmentStore> store,
                   std::shared_ptr<PrefixCache> prefix_cache)
    : model_(model), store_(std::move(store)), prefix_(std::move(prefix_cache)) {}

Result<SegmentStore::Pin> Composer::entry_for(const SegmentRef& segment, const ComposeOptions& opt,
                                              bool* hit) const {
  if (!store_) return invalid_argument("no segment store configured");
  if (segment.key.empty())
    return invalid_argument("a segment of " + std::to_string(segment.tokens.size()) +
                            " tokens has no body under seam " + std::to_string(opt.seam) +
                            " (it needs " + std::to_string(model_.min_segment_tokens(opt.seam)) +
                            "): it is recomputed where it is used, never cached");
  if (SegmentStore::Pin p = store_->lookup(segment.key)) {
    *hit = true;
    return p;
  }
  *hit = false;
  Timer t;
  HYPIC_ASSIGN_OR_RETURN(SegmentEntry e,
                         model_.build_entry(segment.tokens, opt.seam, nullptr, opt.cancelled));
  e.key = segment.key;
  return store_->insert(segment.key, std::move(e), t.seconds());
}

Status Composer::prefill(const TokenizedRequest& req, const ComposeOptions& opt, SeqState* st,
                         std::vector<float>* logits, ComposeStats* stats) const {
  *stats = ComposeStats{};
  stats->prompt_tokens = req.total_tokens();
  if (req.suffix.empty())
    return invalid_argument("the prompt needs a non-empty suffix (the question) after its segments");
  if (opt.seam < 0) return invalid_argument("seam width must be >= 0");
  HYPIC_CHECK(req.seam == opt.seam && req.salt == opt.salt,
              "the request's segments were keyed under another seam or salt than it runs with");
  if (st->pos != 0) return invalid_argument("prefill needs a fresh sequence state");
  if (stats->prompt_tokens > model_.config().max_position_embeddings)
    return out_of_range("prompt of " + std::to_string(stats->prompt_tokens) +
                        " tokens exceeds the model's context of " +
                        std::to_string(model_.config().max_position_embeddings) + " tokens");
  model_.reserve(*st, st->pos + stats->prompt_tokens);
  if (opt.mode == PicMode::kPrefix) return prefill_prefix_mode(req, opt, st, logits, stats);

  ForwardPlan plan;
  plan.rule = opt.mode == PicMode::kNaive ? ComposeRule::kNaive : ComposeRule::kTransition;
  plan.rerotate = opt.rerotate;
  plan.trace_last_piece = opt.trace_suffix;
  plan.cancelled = opt.cancelled;
  auto compute = [&](const int32_t* ids, int64_t n) {
    if (n == 0) return;
    plan.tokens.insert(plan.tokens.end(), ids, ids + n);
    if (!plan.pieces.empty() && !plan.pieces.back().entry) {
      plan.pieces.back().rows += n;  // merge with the previous computed piece
    } else {
      plan.pieces.push_back({n, nullptr});
    }
  };
  std::vector<SegmentStore::Pin> pins;  // keep entries alive (pinned) for the forward
  compute(req.prefix.data(), int64_t(req.prefix.size()));
  Timer tb;
  for (const SegmentRef& seg : req.segments) {
    if (opt.mode == PicMode::kFull || seg.key.empty()) {  // no body: computed
      compute(seg.tokens.data(), int64_t(seg.tokens.size()));
      continue;
    }
    // An arriving entry (segment parallelism) or the store's, built on a miss.
    const ArrivingEntry* arriving = nullptr;
    if (opt.arriving) {
      const auto it = opt.arriving->find(seg.key);
      if (it != opt.arriving->end()) arriving = &it->second;
    }
    ForwardPiece piece;
    if (arriving) {
      stats->segments_missed += 1;
      stats->cached_new_tokens += arriving->entry->body_tokens();
      piece = {0, arriving->entry, arriving->gate};
    } else {
      bool hit = false;
      HYPIC_ASSIGN_OR_RETURN(SegmentStore::Pin pin, entry_for(seg, opt, &hit));
      (hit ? stats->segments_hit : stats->segments_missed) += 1;
      (hit ? stats->reused_tokens : stats->cached_new_tokens) += pin->body_tokens();
      piece = {0, pin.get()};
      pins.push_back(std::move(pin));
    }
    compute(seg.tokens.data(), opt.seam);
    stats->seam_tokens += opt.seam;
    plan.pieces.push_back(piece);
  }
  stats->build_ms = tb.ms();
  compute(req.suffix.data(), int64_t(req.suffix.size()));
  stats->recomputed_tokens = int64_t(plan.tokens.size());
  Timer tp;
  HYPIC_RETURN_IF_ERROR(model_.forward_plan(*st, plan, LogitsFor::kLast, logits));
  stats->prefill_ms = tp.ms();
  return Status::ok();
}

Status Composer::prefill_prefix_mode(const TokenizedRequest& req, const ComposeOptions& opt, SeqState* st,
                                     std::vector<float>* logits, ComposeStats* stats) const {
  if (!prefix_) return invalid_argument("prefix mode needs a prefix cache");
  std::vector<const std::vector<int32_t>*> seq;
  if (!req.prefix.empty()) seq.push_back(&req.prefix);
  for (const SegmentRef& s : req.segments)
    if (!s.tokens.empty()) seq.push_back(&s.tokens);
  seq.push_back(&req.suffix);
  Timer tp;
  // The suffix (question) is never cached: only the parts before it are reusable.
  const std::vector<const std::vector<int32_t>*> cacheable(seq.begin(), seq.end() - 1);
  const int matched = prefix_->restore(opt.salt, cacheable, st);
  for (int i = 0; i < matched; ++i) {
    stats->reused_tokens += int64_t(seq[size_t(i)]->size());
    if (seq[size_t(i)] != &req.prefix) ++stats->segments_hit;
  }
  for (size_t i = size_t(matched); i < seq.size(); ++i) {
    if (opt.cancelled && opt.cancelled())
      return Status(StatusCode::kCancelled, "the prefill was cancelled (the client left, or the server is stopping)");
    const bool last = i + 1 == seq.size();
    const int64_t pos0 = st->pos;
    HYPIC_RETURN_IF_ERROR(
        model_.forward(*st, *seq[i], last ? LogitsFor::kLast : LogitsFor::kNone, logits));
    stats->recomputed_tokens += int64_t(seq[i]->size());
    if (!last) {
      if (seq[i] != &req.prefix) ++stats->segments_missed;
      prefix_->insert(opt.salt, cacheable, int(i), *st, pos0);
      stats->cached_new_tokens += int64_t(seq[i]->size());
    }
  }
  stats->prefill_ms = tp.ms();
  return Status::ok();
}

}  // namespace hypic
