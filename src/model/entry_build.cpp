// Model::build_entry: the standalone prefill that produces a segment entry (SPEC §4).
#include <algorithm>

#include "model/mixer.h"
#include "model/pass.h"

namespace hypic {

int64_t Model::min_segment_tokens(int seam) const {
  return std::max<int64_t>(seam, history_) + 1;
}

Result<SegmentEntry> Model::build_entry(
    const std::vector<int32_t>& tokens, int seam,
    const std::function<void(int layer, const SegmentEntry& partial)>& on_layer,
    const std::function<bool()>& cancelled) const {
  const int64_t L = int64_t(tokens.size());
  if (seam < 0) return invalid_argument("seam width must be >= 0");
  if (L < min_segment_tokens(seam))
    return invalid_argument("segment of " + std::to_string(L) + " tokens is too short for an entry"
                            " with seam " + std::to_string(seam) + " (needs " +
                            std::to_string(min_segment_tokens(seam)) + "); recompute it instead");
  if (L > cfg_.max_position_embeddings)
    return out_of_range("segment of " + std::to_string(L) + " tokens exceeds the context of " +
                        std::to_string(cfg_.max_position_embeddings) + " tokens");
  SegmentEntry e;
  e.length = L;
  e.seam = seam;
  e.tokens = tokens;
  for (const DecoderLayer& l : w_.layers) l.token->add_entry_slot(e);
  SeqState st = new_state(L);
  Pass pass;
  Pass::Piece piece;
  piece.seq = &st;
  piece.rows = L;
  pass.pieces.push_back(piece);
  pass.capture = &e;
  pass.seam = seam;
  if (on_layer) pass.on_captured = [&](int layer) { on_layer(layer, e); };
  if (cancelled) pass.cancelled = &cancelled;
  HYPIC_RETURN_IF_ERROR(run_pass(tokens, pass, LogitsFor::kNone, nullptr));
  return e;
}

SegmentEntry Model::entry_layer(const SegmentEntry& e, int layer) const {
  SegmentEntry part;
  part.key = e.key;
  part.length = e.length;
  part.seam = e.seam;
  part.tokens = e.tokens;
  w_.layers[size_t(layer)].token->copy_entry_slot(e, &part);
  return part;
}

SegmentEntry Model::empty_entry(const std::vector<int32_t>& tokens, int seam, std::string key) const {
  SegmentEntry e;
  e.key = std::move(key);
  e.length = int64_t(tokens.size());
  e.seam = seam;
  e.tokens = tokens;
  for (const DecoderLayer& l : w_.layers) l.token->add_entry_slot(e);
  return e;
}

Status Model::set_entry_layer(SegmentEntry* e, int layer, SegmentEntry&& part) const {
  const auto& c = cfg_;
  if (layer < 0 || layer >= c.num_hidden_layers)
    return invalid_argument("layer " + std::to_string(layer) + " out of range");
  if (part.key != e->key || part.length != e->length || part.seam != e->seam ||
      part.tokens != e->tokens)
    return invalid_argument("layer " + std::to_string(layer) +
                            ": its key, length, seam or tokens are not the segment's");
  Status s = w_.layers[size_t(layer)].token->take_entry_slot(std::move(part), e);
  if (!s.is_ok()) return invalid_argument("layer " + std::to_string(layer) + ": " + s.message());
  return Status::ok();
}

}  // namespace hypic
