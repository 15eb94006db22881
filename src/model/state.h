// The per-sequence memory of a hybrid model, one LayerState per decoder layer, each owned
// by its layer's token mixer (model/mixer.h): a linear-attention layer keeps fixed-size
// tensors (its recurrent state, its conv history), an attention layer tensors with one row
// per position (K/V, or a compressed latent). Nothing here knows a mixer: copies, byte
// counts, capacity growth and prefix snapshots (cache/prefix_cache.h) are generic over the
// two kinds. Cost is explicit: copy() duplicates it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace hypic {

struct LayerState {
  // Overwritten as the sequence advances: its value after token pos−1 (a snapshot copies it).
  std::vector<NamedTensor> fixed;
  // [capacity, ...]: row p belongs to position p, rows [0, pos) are valid. All of a
  // sequence's row tensors share one capacity (Model::reserve grows them together).
  std::vector<NamedTensor> rows;
  size_t bytes() const;
};

struct SeqState {
  int64_t pos = 0;                // tokens consumed so far
  std::vector<LayerState> layers;  // one per decoder layer, in layer order
  // Rows every per-position tensor holds (0 when the model has none).
  int64_t capacity() const;
  SeqState copy() const;
  size_t bytes() const;
};

}  // namespace hypic
