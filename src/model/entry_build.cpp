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
  SegmentEntry e = empty_entry(tokens, seam, "");
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
  part.layers.push_back(e.layers[size_t(layer)]);
  return part;
}

SegmentEntry Model::empty_entry(const std::vector<int32_t>& tokens, int seam, std::string key) const {
  SegmentEntry e;
  e.key = std::move(key);
  e.length = int64_t(tokens.size());
  e.seam = seam;
  e.tokens = tokens;
  e.layers.resize(w_.layers.size());
  for (size_t i = 0; i < w_.layers.size(); ++i) e.layers[i].mixer = w_.layers[i].token->type().id();
  return e;
}

Status check_entry_tensors(const SegmentEntry::Layer& l, const TokenMixerType& t,
                           const std::vector<EntryTensor>& want) {
  if (l.mixer != t.id())
    return invalid_argument("it was made by mixer '" + l.mixer + "', this layer is '" + t.id() +
                            "'");
  for (const EntryTensor& w : want) {
    const Tensor* x = l.find(w.name);
    if (!x) return invalid_argument(std::string("tensor '") + w.name + "' is missing");
    if (x->dtype() != DType::kF32 || x->shape() != w.shape)
      return invalid_argument(std::string("tensor '") + w.name + "' is " +
                              dtype_name(x->dtype()) + " " + shape_str(x->shape()) +
                              ", this model's is F32 " + shape_str(w.shape));
  }
  if (l.tensors.size() != want.size())
    for (const NamedTensor& n : l.tensors)
      if (std::none_of(want.begin(), want.end(), [&](const EntryTensor& w) { return n.name == w.name; }))
        return invalid_argument("unexpected tensor '" + n.name + "'");
  return Status::ok();
}

Status Model::check_entry_layers(const SegmentEntry& e) const {
  if (e.layers.size() != w_.layers.size())
    return invalid_argument("it has " + std::to_string(e.layers.size()) + " layers, the model " +
                            std::to_string(w_.layers.size()) + ": it was built for another model");
  return Status::ok();
}

Status Model::check_entry(const SegmentEntry& e) const {
  HYPIC_RETURN_IF_ERROR(check_entry_layers(e));
  for (size_t i = 0; i < w_.layers.size(); ++i)
    if (Status s = w_.layers[i].token->check_entry(e, e.layers[i]); !s.is_ok())
      return s.with_context("layer " + std::to_string(i));
  return Status::ok();
}

Status Model::set_entry_layer(SegmentEntry* e, int layer, SegmentEntry&& part) const {
  const auto& c = cfg_;
  if (layer < 0 || layer >= c.num_hidden_layers)
    return invalid_argument("layer " + std::to_string(layer) + " out of range");
  if (part.key != e->key || part.length != e->length || part.seam != e->seam ||
      part.tokens != e->tokens)
    return invalid_argument("layer " + std::to_string(layer) +
                            ": its key, length, seam or tokens are not the segment's");
  if (part.layers.size() != 1)
    return invalid_argument("layer " + std::to_string(layer) + ": the part holds " +
                            std::to_string(part.layers.size()) + " layers, not one");
  if (Status s = w_.layers[size_t(layer)].token->check_entry(*e, part.layers[0]); !s.is_ok())
    return s.with_context("layer " + std::to_string(layer));
  e->layers[size_t(layer)] = std::move(part.layers[0]);
  return Status::ok();
}

}  // namespace hypic
