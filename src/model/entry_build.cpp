// Model::build_entry: the standalone prefill that produces a segment entry (SPEC §4).
#include "model/pass.h"

namespace hypic {

int64_t Model::min_segment_tokens(int seam) const {
  return std::max<int64_t>(seam, cfg_.linear_conv_kernel_dim - 1) + 1;
}

Result<SegmentEntry> Model::build_entry(const std::vector<int32_t>& tokens, int seam) const {
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
  HYPIC_RETURN_IF_ERROR(run_pass(tokens, pass, LogitsFor::kNone, nullptr));
  return e;
}

}  // namespace hypic
