// Model::build_entry: the standalone prefill that produces a segment entry (SPEC §4).
#include <algorithm>

#include "model/pass.h"

namespace hypic {

int64_t Model::min_segment_tokens(int seam) const {
  return std::max<int64_t>(seam, cfg_.linear_conv_kernel_dim - 1) + 1;
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
  e.linear.resize(size_t(cfg_.num_linear_layers()));
  e.attn.resize(size_t(cfg_.num_full_layers()));
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

namespace {

// Decoder layer → its slot among the linear or the attention layers.
struct LayerSlot {
  bool linear = false;
  size_t index = 0;
};
LayerSlot slot_of(const ModelConfig& c, int layer) {
  LayerSlot s;
  s.linear = c.layer_kinds[size_t(layer)] == LayerKind::kLinear;
  for (int i = 0; i < layer; ++i)
    s.index += (c.layer_kinds[size_t(i)] == LayerKind::kLinear) == s.linear;
  return s;
}

}  // namespace

SegmentEntry Model::entry_layer(const SegmentEntry& e, int layer) const {
  SegmentEntry part;
  part.key = e.key;
  part.length = e.length;
  part.seam = e.seam;
  part.tokens = e.tokens;
  const LayerSlot s = slot_of(cfg_, layer);
  if (s.linear) {
    part.linear.push_back(e.linear[s.index]);
  } else {
    part.attn.push_back(e.attn[s.index]);
  }
  return part;
}

SegmentEntry Model::empty_entry(const std::vector<int32_t>& tokens, int seam, std::string key) const {
  SegmentEntry e;
  e.key = std::move(key);
  e.length = int64_t(tokens.size());
  e.seam = seam;
  e.tokens = tokens;
  e.linear.resize(size_t(cfg_.num_linear_layers()));
  e.attn.resize(size_t(cfg_.num_full_layers()));
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
  const LayerSlot s = slot_of(c, layer);
  const std::string what = "layer " + std::to_string(layer) + ": ";
  const int64_t Lb = e->body_tokens();
  auto numel_is = [](const Tensor& t, int64_t n) { return !t.empty() && t.numel() == n; };
  if (s.linear) {
    if (part.linear.size() != 1 || !part.attn.empty())
      return invalid_argument(what + "expected one linear-attention layer");
    const SegmentEntry::Linear& l = part.linear[0];
    const int nv = int(c.linear_num_value_heads), dk = int(c.linear_key_head_dim);
    const int64_t dv = c.linear_value_head_dim, K = c.linear_conv_kernel_dim;
    const int64_t conv_dim = 2 * int64_t(c.linear_num_key_heads) * dk + int64_t(nv) * dv;
    const int64_t P = std::max<int64_t>(0, K - 1 - e->seam);
    if (l.T.nv != nv || l.T.dk != dk || !numel_is(l.s0, int64_t(nv) * dk * dv) ||
        !numel_is(l.conv_tail, (K - 1) * conv_dim) || l.warm_mixed.empty() != (P == 0) ||
        (P > 0 && (!numel_is(l.warm_mixed, P * conv_dim) || !numel_is(l.warm_g, P * nv) ||
                   !numel_is(l.warm_beta, P * nv))))
      return invalid_argument(what + "shapes are not this model's");
    e->linear[s.index] = std::move(part.linear[0]);
  } else {
    if (part.attn.size() != 1 || !part.linear.empty())
      return invalid_argument(what + "expected one attention layer");
    const SegmentEntry::Attn& a = part.attn[0];
    const int64_t n = Lb * c.num_key_value_heads * c.head_dim;
    if (!numel_is(a.k, n) || !numel_is(a.v, n))
      return invalid_argument(what + "k/v shapes are not this model's");
    e->attn[s.index] = std::move(part.attn[0]);
  }
  return Status::ok();
}

}  // namespace hypic
