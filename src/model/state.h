// The per-sequence memory of a hybrid model: a fixed-size recurrent state per linear layer
// and a growing KV cache per full-attention layer. Cost is explicit: copy() duplicates it.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace hypic {

struct LinearState {
  Tensor conv;  // [K−1, conv_dim]: the last K−1 pre-conv inputs
  Tensor ssm;   // [nv, dk, dv] fp32 recurrent state
};

struct KvCache {
  Tensor k;  // [capacity, nkv, hd], normed and rotated at the token's position
  Tensor v;  // [capacity, nkv, hd]
};

struct SeqState {
  int64_t pos = 0;                   // tokens consumed so far
  std::vector<LinearState> linear;   // one per linear layer, in layer order
  std::vector<KvCache> kv;           // one per full-attention layer, in layer order
  int64_t kv_capacity() const { return kv.empty() ? 0 : kv[0].k.dim(0); }
  SeqState copy() const;
  size_t bytes() const;
};

}  // namespace hypic
