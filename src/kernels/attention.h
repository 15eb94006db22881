// Causal grouped-query attention without materialising an L×L matrix: queries are processed
// in blocks against key blocks with an online (streaming) softmax.
#pragma once

#include <cstdint>

namespace hypic::kernels {

struct AttnDims {
  int nh;   // query heads
  int nkv;  // key/value heads; query head h reads kv head h / (nh / nkv)
  int hd;   // query / key head dim
  int dv = 0;       // value head dim (0: hd)
  int64_t ldk = 0;  // floats between consecutive keys' rows (0: nkv·hd)
  int64_t ldv = 0;  // floats between consecutive values' rows (0: nkv·dv)
  int vdim() const { return dv > 0 ? dv : hd; }
  int64_t k_stride() const { return ldk > 0 ? ldk : int64_t(nkv) * hd; }
  int64_t v_stride() const { return ldv > 0 ? ldv : int64_t(nkv) * vdim(); }
};

// q: [Lq, nh, hd], query i at absolute position qpos0 + i;
// k, v: Lk rows (strides k_stride(), v_stride()), each nkv heads of hd / dv; key j at absolute
// position j (a KV cache in prompt order). MLA's latent is one kv head whose values are the
// first dv dims of the key rows (v = k, ldv = ldk).
// query at position p attends keys j <= p (requires qpos0 + Lq <= Lk).
// out: [Lq, nh, dv] = softmax(scale · q·kᵀ) · v.
void attention_causal(const AttnDims& d, const float* q, int64_t Lq, int64_t qpos0,
                      const float* k, const float* v, int64_t Lk, float scale, float* out);

// A decode batch: B sequences with one query each. Query b (q: [B, nh, hd], row b) sits at
// position pos[b] and attends keys 0 … pos[b] of its own cache kb[b], vb[b] (>= pos[b] + 1
// rows). out: [B, nh, dv]. Row b is bit-identical to attention_causal(d, q + b·nh·hd, 1,
// pos[b], kb[b], vb[b], pos[b] + 1, scale, out + b·nh·dv); the B·nkv (sequence, kv head)
// tasks share one parallel region.
void attention_decode(const AttnDims& d, int64_t B, const float* q, const int64_t* pos,
                      const float* const* kb, const float* const* vb, float scale, float* out);

}  // namespace hypic::kernels
