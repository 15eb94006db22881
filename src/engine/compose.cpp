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

  if (opt.mode == PicMode::kFull || !prefix_ || opt.trace_suffix) {
    return compose_head(req, opt, /*with_suffix=*/true, st, logits, stats);
  }
  if (req.segments.empty()) return prefill_prefix_mode(req, opt, st, logits, stats);  // the same computation
  return prefill_composed(req, opt, st, logits, stats);
}

Status Composer::compose_head(const TokenizedRequest& req, const ComposeOptions& opt, bool with_suffix, SeqState* st,
                              std::vector<float>* logits, ComposeStats* stats) const {
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
  if (with_suffix) compute(req.suffix.data(), int64_t(req.suffix.size()));
  stats->recomputed_tokens += int64_t(plan.tokens.size());
  Timer tp;
  HYPIC_RETURN_IF_ERROR(model_.forward_plan(*st, plan, with_suffix ? LogitsFor::kLast : LogitsFor::kNone, logits));
  stats->prefill_ms = tp.ms();
  return Status::ok();
}

namespace {

// `ids` cut at the offsets in `breaks` (increasing; those outside (0, ids.size()) ignored).
std::vector<std::vector<int32_t>> split_at(const std::vector<int32_t>& ids, const std::vector<size_t>& breaks) {
  std::vector<std::vector<int32_t>> parts;
  size_t from = 0;
  for (size_t b : breaks) {
    if (b <= from || b >= ids.size()) continue;
    parts.emplace_back(ids.begin() + int64_t(from), ids.begin() + int64_t(b));
    from = b;
  }
  if (from < ids.size()) parts.emplace_back(ids.begin() + int64_t(from), ids.end());
  return parts;
}

// The namespaces of the prefix cache: prefix mode's checkpoints are exact (the same for every
// mode), those after a composed head depend on how it was composed. The tag ends at the first
// ':', so no salt can name another tag's namespace.
std::string prefix_namespace(const std::string& salt) { return "prefix:" + salt; }

std::string composed_namespace(const ComposeOptions& opt) {
  return std::string(opt.mode == PicMode::kNaive ? "naive" : "hypic") + "/" + std::to_string(opt.seam) +
         (opt.rerotate ? "" : "/norot") + ":" + opt.salt;
}

}  // namespace

Status Composer::run_parts(const std::string& ns, const std::vector<const std::vector<int32_t>*>& seq, size_t from,
                           const ComposeOptions& opt, SeqState* st, std::vector<float>* logits, ComposeStats* stats) const {
  const std::vector<const std::vector<int32_t>*> cacheable(seq.begin(), seq.end() - 1);
  for (size_t i = from; i < seq.size(); ++i) {
    if (opt.cancelled && opt.cancelled())
      return Status(StatusCode::kCancelled, "the prefill was cancelled (the client left, or the server is stopping)");
    const bool last = i + 1 == seq.size();
    const int64_t pos0 = st->pos;
    HYPIC_RETURN_IF_ERROR(model_.forward(*st, *seq[i], last ? LogitsFor::kLast : LogitsFor::kNone, logits));
    stats->recomputed_tokens += int64_t(seq[i]->size());
    if (!last) {
      prefix_->insert(ns, cacheable, int(i), *st, pos0);
      stats->cached_new_tokens += int64_t(seq[i]->size());
    }
  }
  return Status::ok();
}

Status Composer::prefill_prefix_mode(const TokenizedRequest& req, const ComposeOptions& opt, SeqState* st,
                                     std::vector<float>* logits, ComposeStats* stats) const {
  if (!prefix_) return invalid_argument("prefix mode needs a prefix cache");
  // The prefix as its messages (checkpointed one by one), then the segments, then the
  // suffix's messages and the generation prompt.
  const std::vector<std::vector<int32_t>> messages = split_at(req.prefix, req.prefix_breaks);
  const std::vector<std::vector<int32_t>> suffix = split_at(req.suffix, req.suffix_breaks);
  std::vector<const std::vector<int32_t>*> seq;
  std::vector<bool> is_segment;
  auto add = [&](const std::vector<int32_t>& part, bool segment) {
    seq.push_back(&part);
    is_segment.push_back(segment);
  };
  for (const std::vector<int32_t>& m : messages) add(m, false);
  for (const SegmentRef& s : req.segments)
    if (!s.tokens.empty()) add(s.tokens, true);
  for (const std::vector<int32_t>& s : suffix) add(s, false);
  Timer tp;
  // The generation prompt is never cached: only the parts before it are reusable.
  const std::string ns = prefix_namespace(opt.salt);
  const int matched = prefix_->restore(ns, {seq.begin(), seq.end() - 1}, st);
  for (size_t i = 0; i + 1 < seq.size(); ++i) {
    if (int(i) < matched) stats->reused_tokens += int64_t(seq[i]->size());
    if (is_segment[i]) ++(int(i) < matched ? stats->segments_hit : stats->segments_missed);
  }
  HYPIC_RETURN_IF_ERROR(run_parts(ns, seq, size_t(matched), opt, st, logits, stats));
  stats->prefill_ms = tp.ms();
  return Status::ok();
}

// hypic / naive: the composed head (prefix, segments, seams) is one checkpoint, keyed by its
// parts and how they were composed, and each of the suffix's messages another, so a
// conversation whose segments stay put (an agent's tool list) computes each turn's new
// messages only. Exact: what is restored is what composing again would give.
Status Composer::prefill_composed(const TokenizedRequest& req, const ComposeOptions& opt, SeqState* st,
                                  std::vector<float>* logits, ComposeStats* stats) const {
  std::vector<int32_t> head = req.prefix;
  for (const SegmentRef& s : req.segments) {
    head.push_back(-1);  // a boundary: [A, B] and [AB] compose differently
    head.insert(head.end(), s.tokens.begin(), s.tokens.end());
  }
  const std::vector<std::vector<int32_t>> suffix = split_at(req.suffix, req.suffix_breaks);
  std::vector<const std::vector<int32_t>*> seq{&head};
  for (const std::vector<int32_t>& s : suffix) seq.push_back(&s);
  const std::string ns = composed_namespace(opt);
  const int matched = prefix_->restore(ns, {seq.begin(), seq.end() - 1}, st);
  if (matched == 0) {
    HYPIC_RETURN_IF_ERROR(compose_head(req, opt, /*with_suffix=*/false, st, nullptr, stats));
    prefix_->insert(ns, {seq.begin(), seq.end() - 1}, 0, *st, 0);
    stats->cached_new_tokens = st->pos - stats->reused_tokens;  // the head but the bodies that were hits
  } else {
    for (const SegmentRef& s : req.segments) {
      ++stats->segments_hit;
      stats->reused_tokens += int64_t(s.tokens.size());
    }
    stats->reused_tokens += int64_t(req.prefix.size());
    for (int i = 1; i < matched; ++i) stats->reused_tokens += int64_t(seq[size_t(i)]->size());
  }
  Timer tp;
  HYPIC_RETURN_IF_ERROR(run_parts(ns, seq, size_t(std::max(matched, 1)), opt, st, logits, stats));
  stats->prefill_ms += tp.ms();
  return Status::ok();
}

}  // namespace hypic
