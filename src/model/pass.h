// Model-internal: the resolved pieces of one forward pass (see ForwardPlan in model.h).
#pragma once

#include <functional>
#include <vector>

#include "model/model.h"

namespace hypic {

struct Model::Pass {
  struct Piece {
    SeqState* seq = nullptr;  // the sequence this piece extends (set for every piece)
    int64_t row0 = 0;  // first computed row (rows of the pass's token matrix)
    int64_t rows = 0;  // computed rows; 0 for a cached body
    int64_t pos0 = 0;  // absolute position of the first token (computed or cached)
    const SegmentEntry* entry = nullptr;
    const EntryGate* gate = nullptr;  // entry still arriving: wait per layer
    int64_t tokens() const { return entry ? entry->body_tokens() : rows; }
  };
  // Pieces of one sequence are in prompt order; pieces of different sequences are independent.
  std::vector<Piece> pieces;
  int layer = 0;  // the decoder layer being run (for EntryGate::wait)
  // decode_batch: piece b is row b, one computed token of its own sequence, no two pieces
  // share a sequence. Lets the layers run the per-sequence parts as one batch.
  bool batch = false;
  ComposeRule rule = ComposeRule::kTransition;
  bool rerotate = true;  // see ForwardPlan::rerotate
  // build_entry: per layer, what the body rows [seam, R) leave behind is stored here.
  SegmentEntry* capture = nullptr;
  int seam = 0;
  std::function<void(int layer)> on_captured;  // after each layer's capture (build_entry)
  std::vector<std::vector<float>>* trace = nullptr;  // see ForwardPlan::trace_last_piece
  const std::function<bool()>* cancelled = nullptr;  // see ForwardPlan::cancelled
};

}  // namespace hypic
