#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/parallel.h"
#include "core/status.h"
#include "kernels/elementwise.h"

namespace hypic::kernels {
namespace {

constexpr int kQBlock = 16;
constexpr int kKBlock = 128;

// One (head, query block): online softmax over key blocks up to the causal limit.
void attend_block(const AttnDims& d, const float* q, int64_t i0, int64_t i1, int64_t qpos0,
                  const float* k, const float* v, int h, float scale, float* out,
                  float* scratch) {
  const int hd = d.hd, kvh = h / (d.nh / d.nkv);
  const int64_t qs = int64_t(d.nh) * hd, ks = int64_t(d.nkv) * hd;
  const int nq = int(i1 - i0);
  float* acc = scratch;                   // [kQBlock, hd]
  float* s = acc + kQBlock * hd;          // [kQBlock, kKBlock]
  float m[kQBlock], l[kQBlock];
  std::fill(acc, acc + nq * hd, 0.0f);
  std::fill(m, m + nq, -std::numeric_limits<float>::infinity());
  std::fill(l, l + nq, 0.0f);
  const int64_t kend = qpos0 + i1;  // keys [0, kend) are visible to at least one query
  for (int64_t j0 = 0; j0 < kend; j0 += kKBlock) {
    const int64_t j1 = std::min(kend, j0 + kKBlock);
    for (int r = 0; r < nq; ++r) {
      const float* qr = q + (i0 + r) * qs + int64_t(h) * hd;
      const int64_t lim = std::min(j1, qpos0 + i0 + r + 1);  // causal limit for this row
      float* sr = s + r * kKBlock;
      float bm = -std::numeric_limits<float>::infinity();
      for (int64_t j = j0; j < lim; ++j) {
        sr[j - j0] = dot(qr, k + j * ks + int64_t(kvh) * hd, hd) * scale;
        bm = std::max(bm, sr[j - j0]);
      }
      if (lim <= j0) continue;
      const float mn = std::max(m[r], bm);
      const float corr = std::exp(m[r] - mn);
      float* ar = acc + r * hd;
      if (corr != 1.0f) {
        for (int c = 0; c < hd; ++c) ar[c] *= corr;
      }
      float sum = 0;
      for (int64_t j = j0; j < lim; ++j) {
        const float p = std::exp(sr[j - j0] - mn);
        sum += p;
        axpy(p, v + j * ks + int64_t(kvh) * hd, ar, hd);
      }
      l[r] = l[r] * corr + sum;
      m[r] = mn;
    }
  }
  for (int r = 0; r < nq; ++r) {
    float* o = out + (i0 + r) * qs + int64_t(h) * hd;
    const float inv = 1.0f / l[r];
    for (int c = 0; c < hd; ++c) o[c] = acc[r * hd + c] * inv;
  }
}

}  // namespace

void attention_causal(const AttnDims& d, const float* q, int64_t Lq, int64_t qpos0,
                      const float* k, const float* v, int64_t Lk, float scale, float* out) {
  HYPIC_CHECK(d.nkv > 0 && d.nh % d.nkv == 0 && qpos0 + Lq <= Lk);
  const int64_t nblk = (Lq + kQBlock - 1) / kQBlock;
  // Later query blocks see more keys: hand them out first for balance.
  parallel_for(nblk * d.nh, [&](int64_t task) {
    thread_local std::vector<float> scratch;
    scratch.resize(size_t(kQBlock) * (d.hd + kKBlock));
    const int64_t b = nblk - 1 - task / d.nh;
    const int h = int(task % d.nh);
    attend_block(d, q, b * kQBlock, std::min(Lq, (b + 1) * kQBlock), qpos0, k, v, h, scale, out,
                 scratch.data());
  });
}

}  // namespace hypic::kernels
