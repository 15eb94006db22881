// Causal grouped-query attention without materialising an L×L matrix: queries are processed
// in blocks against key blocks with an online (streaming) softmax.
#pragma once

#include <cstdint>

namespace hypic::kernels {

struct AttnDims {
  int nh;   // query heads
  int nkv;  // key/value heads; query head h reads kv head h / (nh / nkv)
  int hd;   // head dim
};

// q: [Lq, nh, hd], query i at absolute position qpos0 + i;
// k, v: [Lk, nkv, hd], key j at absolute position j (a KV cache in prompt order);
// query at position p attends keys j <= p (requires qpos0 + Lq <= Lk).
// out: [Lq, nh, hd] = softmax(scale · q·kᵀ) · v.
void attention_causal(const AttnDims& d, const float* q, int64_t Lq, int64_t qpos0,
                      const float* k, const float* v, int64_t Lk, float scale, float* out);

}  // namespace hypic::kernels
