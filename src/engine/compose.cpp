#include "engine/compose.h"

#include "core/timer.h"

namespace hypic {

const char* pic_mode_name(PicMode m) {
  switch (m) {
    case PicMode::kFull: return "full";
    case PicMode::kPrefix: return "prefix";
    case PicMode::kHypic: return "hypic";
    case PicMode::kNaive: return "naive";
  }
  return "?";
}

bool parse_pic_mode(const std::string& s, PicMode* m) {
  for (PicMode x : {PicMode::kFull, PicMode::kPrefix, PicMode::kHypic, PicMode::kNaive})
    if (s == pic_mode_name(x)) {
      *m = x;
      return true;
    }
  return false;
}

int64_t PromptParts::total_tokens() const {
  int64_t n = int64_t(prefix.size() + suffix.size());
  for (const auto& s : segments) n += int64_t(s.size());
  return n;
}

std::vector<int32_t> PromptParts::concatenated() const {
  std::vector<int32_t> all = prefix;
  for (const auto& s : segments) all.insert(all.end(), s.begin(), s.end());
  all.insert(all.end(), suffix.begin(), suffix.end());
  return all;
}

Composer::Composer(const Model& model, std::shared_ptr<SegmentStore> store,
                   std::shared_ptr<PrefixCache> prefix_cache)
    : model_(model), store_(std::move(store)), prefix_(std::move(prefix_cache)) {}

Result<SegmentStore::Pin> Composer::entry_for(const std::vector<int32_t>& segment,
                                              const ComposeOptions& opt, bool* hit) const {
  if (!store_) return invalid_argument("no segment store configured");
  const std::string key =
      segment_key(model_.fingerprint(), model_.compute_type(), opt.seam, opt.salt, segment);
  if (SegmentStore::Pin p = store_->lookup(key)) {
    *hit = true;
    return p;
  }
  *hit = false;
  Timer t;
  HYPIC_ASSIGN_OR_RETURN(SegmentEntry e, model_.build_entry(segment, opt.seam, nullptr, opt.cancelled));
  e.key = key;
  return store_->insert(key, std::move(e), t.seconds());
}

Status Composer::prefill(const PromptParts& parts, const ComposeOptions& opt, SeqState* st,
                         std::vector<float>* logits, ComposeStats* stats) const {
  *stats = ComposeStats{};
  stats->prompt_tokens = parts.total_tokens();
  if (parts.suffix.empty())
    return invalid_argument("the prompt needs a non-empty suffix (the question) after its segments");
  if (opt.seam < 0) return invalid_argument("seam width must be >= 0");
  if (st->pos != 0) return invalid_argument("prefill needs a fresh sequence state");
  if (stats->prompt_tokens > model_.config().max_position_embeddings)
    return out_of_range("prompt of " + std::to_string(stats->prompt_tokens) +
                        " tokens exceeds the model's context of " +
                        std::to_string(model_.config().max_position_embeddings) + " tokens");
  model_.reserve(*st, st->pos + stats->prompt_tokens);
  if (opt.mode == PicMode::kPrefix) return prefill_prefix_mode(parts, opt, st, logits, stats);

  ForwardPlan plan;
  plan.rule = opt.mode == PicMode::kNaive ? ComposeRule::kNaive : ComposeRule::kTransition;
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
  compute(parts.prefix.data(), int64_t(parts.prefix.size()));
  Timer tb;
  for (const auto& seg : parts.segments) {
    const int64_t L = int64_t(seg.size());
    if (opt.mode == PicMode::kFull || L < model_.min_segment_tokens(opt.seam)) {
      compute(seg.data(), L);
      continue;
    }
    // An arriving entry (segment parallelism) or the store's, built on a miss.
    const ArrivingEntry* arriving = nullptr;
    if (opt.arriving) {
      const auto it = opt.arriving->find(
          segment_key(model_.fingerprint(), model_.compute_type(), opt.seam, opt.salt, seg));
      if (it != opt.arriving->end()) arriving = &it->second;
    }
    ForwardPiece piece;
    if (arriving) {
      stats->segments_missed += 1;
      piece = {0, arriving->entry, arriving->gate};
    } else {
      bool hit = false;
      HYPIC_ASSIGN_OR_RETURN(SegmentStore::Pin pin, entry_for(seg, opt, &hit));
      (hit ? stats->segments_hit : stats->segments_missed) += 1;
      stats->reused_tokens += hit ? pin->body_tokens() : 0;
      piece = {0, pin.get()};
      pins.push_back(std::move(pin));
    }
    compute(seg.data(), opt.seam);
    stats->seam_tokens += opt.seam;
    plan.pieces.push_back(piece);
  }
  stats->build_ms = tb.ms();
  compute(parts.suffix.data(), int64_t(parts.suffix.size()));
  stats->recomputed_tokens = int64_t(plan.tokens.size());
  Timer tp;
  HYPIC_RETURN_IF_ERROR(model_.forward_plan(*st, plan, LogitsFor::kLast, logits));
  stats->prefill_ms = tp.ms();
  return Status::ok();
}

Status Composer::prefill_prefix_mode(const PromptParts& parts, const ComposeOptions& opt, SeqState* st,
                                     std::vector<float>* logits, ComposeStats* stats) const {
  if (!prefix_) return invalid_argument("prefix mode needs a prefix cache");
  std::vector<const std::vector<int32_t>*> seq;
  if (!parts.prefix.empty()) seq.push_back(&parts.prefix);
  for (const auto& s : parts.segments)
    if (!s.empty()) seq.push_back(&s);
  seq.push_back(&parts.suffix);
  Timer tp;
  // The suffix (question) is never cached: only the parts before it are reusable.
  const std::vector<const std::vector<int32_t>*> cacheable(seq.begin(), seq.end() - 1);
  const int matched = prefix_->restore(opt.salt, cacheable, st);
  for (int i = 0; i < matched; ++i) {
    stats->reused_tokens += int64_t(seq[size_t(i)]->size());
    if (seq[size_t(i)] != &parts.prefix) ++stats->segments_hit;
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
      if (seq[i] != &parts.prefix) ++stats->segments_missed;
      prefix_->insert(opt.salt, cacheable, int(i), *st, pos0);
    }
  }
  stats->prefill_ms = tp.ms();
  return Status::ok();
}

}  // namespace hypic
