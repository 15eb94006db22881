// Model::decode_batch: one decode step over many sequences, as one pass of single-row pieces
// (Pass::batch). The layers run the GEMMs over all rows and the recurrent / attention parts
// per sequence; see the token mixers (model/mixers/).
#include <algorithm>

#include "model/pass.h"

namespace hypic {

Status Model::decode_batch(const std::vector<SeqState*>& states,
                           const std::vector<int32_t>& tokens, std::vector<float>* logits) const {
  const auto& c = cfg_;
  const size_t B = states.size();
  // Everything is checked before any state is touched.
  if (B == 0) return invalid_argument("decode_batch: no sequences; pass at least one state");
  if (tokens.size() != B)
    return invalid_argument("decode_batch: " + std::to_string(B) + " states but " +
                            std::to_string(tokens.size()) + " tokens; pass one token per state");
  if (logits == nullptr) return invalid_argument("decode_batch: logits output is null");
  std::vector<const SeqState*> seen(states.begin(), states.end());
  std::sort(seen.begin(), seen.end());
  if (std::adjacent_find(seen.begin(), seen.end()) != seen.end())
    return invalid_argument("decode_batch: a state appears twice; a sequence takes one token "
                            "per step");
  for (size_t b = 0; b < B; ++b) {
    const SeqState* s = states[b];
    const std::string at = "decode_batch: sequence " + std::to_string(b) + ": ";
    if (s == nullptr) return invalid_argument(at + "state is null");
    if (Status st = check_state(*s); !st.is_ok()) return invalid_argument(at + st.message());
    if (s->pos < 0) return invalid_argument(at + "negative position " + std::to_string(s->pos));
    if (s->pos >= c.max_position_embeddings)
      return out_of_range(at + "at position " + std::to_string(s->pos) +
                          ", the model's context of " + std::to_string(c.max_position_embeddings) +
                          " tokens is full; finish this sequence instead of decoding it");
    if (tokens[b] < 0 || tokens[b] >= c.vocab_size)
      return out_of_range(at + "token id " + std::to_string(tokens[b]) +
                          " outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
  }
  Pass pass;
  pass.batch = true;
  for (size_t b = 0; b < B; ++b) {
    Pass::Piece p;
    p.seq = states[b];
    p.row0 = int64_t(b);
    p.rows = 1;
    p.pos0 = states[b]->pos;
    pass.pieces.push_back(p);
  }
  // Every row is its sequence's last (and only) token: all rows get logits.
  return run_pass(tokens, pass, LogitsFor::kAll, logits);
}

}  // namespace hypic
