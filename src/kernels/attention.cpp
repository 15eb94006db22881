#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/parallel.h"
#include "core/status.h"
#include "kernels/elementwise.h"
#include "kernels/small_gemm.h"

namespace hypic::kernels {
namespace {

constexpr int kQBlock = 32;   // query positions per task, at least
constexpr int kQRows = 256;   // stacked query rows (g heads × positions) a task aims for
constexpr int kKBlock = 256;  // keys per online-softmax step

// One task: kv head `kvh`, query positions [i0, i1). The g = nh / nkv query heads that share
// the kv head are stacked, so both products are GEMMs with g·(i1−i0) columns/rows:
//   St [nk, rows] = K_blk · Qᵀ      (keys × queries; scale folded into Qᵀ)
//   O  [rows, hd] += P · V_blk      (P = St transposed, as exp weights)
// with a streaming softmax over key blocks: running max m and sum l per query row.
// Few stacked rows (fewer than kFewRows: a decode step's g heads) score each key by dot
// products against the rows of Q instead (a GEMM tile would be mostly padding).
struct Scratch {
  std::vector<float> qt, st, o, m, l, corr, colmax, sum;
};
constexpr int kFewRows = 8;

void attend_task(const AttnDims& d, const float* q, int64_t i0, int64_t i1, int64_t qpos0,
                 const float* k, const float* v, int kvh, float scale, float* out, Scratch& s) {
  const int hd = d.hd, dv = d.vdim(), g = d.nh / d.nkv;
  const int64_t qs = int64_t(d.nh) * hd, os = int64_t(d.nh) * dv;
  const int64_t ks = d.k_stride(), vs = d.v_stride();
  const int nq = int(i1 - i0), rows = g * nq;
  s.qt.resize(size_t(hd) * rows);
  s.st.resize(size_t(kKBlock) * rows);
  s.o.assign(size_t(rows) * dv, 0.0f);
  s.m.assign(size_t(rows), -std::numeric_limits<float>::infinity());
  s.l.assign(size_t(rows), 0.0f);
  s.corr.resize(size_t(rows));
  s.colmax.resize(size_t(rows));
  s.sum.resize(size_t(rows));
  // Qᵀ [hd, rows], column j·nq + r = head (kvh·g + j), position i0 + r, times scale; with
  // few rows Q itself [rows, hd].
  const bool few = rows < kFewRows;
  for (int j = 0; j < g; ++j)
    for (int r = 0; r < nq; ++r) {
      const float* qr = q + (i0 + r) * qs + int64_t(kvh * g + j) * hd;
      const size_t col = size_t(j * nq + r);
      for (int c = 0; c < hd; ++c) {
        const float v = qr[c] * scale;
        if (few) s.qt[col * size_t(hd) + size_t(c)] = v;
        else s.qt[size_t(c) * rows + col] = v;
      }
    }
  const int64_t first_pos = qpos0 + i0;  // position of query row r is first_pos + r
  const int64_t kend = qpos0 + i1;       // keys [0, kend) are visible to some row
  float* st = s.st.data();
  for (int64_t j0 = 0; j0 < kend; j0 += kKBlock) {
    const int nk = int(std::min<int64_t>(kKBlock, kend - j0));
    const float* kb = k + j0 * ks + int64_t(kvh) * hd;
    if (few) {
      for (int jj = 0; jj < nk; ++jj)
        for (int c = 0; c < rows; ++c)
          st[size_t(jj) * rows + size_t(c)] = dot(kb + jj * ks, s.qt.data() + size_t(c) * hd, hd);
    } else {
      small_gemm(nk, rows, hd, 1.0f, kb, ks, false, s.qt.data(), rows, 0.0f, st, rows);
    }
    // Causal mask: key j0 + jj is visible to row r iff j0 + jj <= first_pos + r.
    const bool partial = j0 + nk - 1 > first_pos;
    if (partial) {
      for (int jj = 0; jj < nk; ++jj) {
        const int64_t rmin = j0 + jj - first_pos;  // rows r < rmin cannot see this key
        if (rmin <= 0) continue;
        float* srow = st + size_t(jj) * rows;
        for (int j = 0; j < g; ++j)
          for (int r = 0; r < std::min<int64_t>(rmin, nq); ++r)
            srow[j * nq + r] = -std::numeric_limits<float>::infinity();
      }
    }
    std::fill(s.colmax.begin(), s.colmax.end(), -std::numeric_limits<float>::infinity());
    for (int jj = 0; jj < nk; ++jj) {
      const float* srow = st + size_t(jj) * rows;
      for (int c = 0; c < rows; ++c) s.colmax[size_t(c)] = std::max(s.colmax[size_t(c)], srow[c]);
    }
    for (int c = 0; c < rows; ++c) {
      const float mn = std::max(s.m[size_t(c)], s.colmax[size_t(c)]);
      // A row with no visible key in this block keeps its max (its weights become 0).
      s.corr[size_t(c)] = std::exp(s.m[size_t(c)] - mn);
      s.m[size_t(c)] = mn;
    }
    // Each row's weights summed in key order, a key's row of weights at a time (contiguous).
    // exp(-inf) = 0 for masked entries. Few rows take the block's exponentials in one call
    // (8 lanes full, not a call per key); the same bits either way.
    std::fill(s.sum.begin(), s.sum.end(), 0.0f);
    for (int jj = 0; jj < nk; ++jj) {
      float* srow = st + size_t(jj) * rows;
      for (int c = 0; c < rows; ++c) srow[c] -= s.m[size_t(c)];
      if (few) continue;
      exp_inplace(srow, rows);
      for (int c = 0; c < rows; ++c) s.sum[size_t(c)] += srow[c];
    }
    if (few) {
      exp_inplace(st, int64_t(nk) * rows);
      for (int jj = 0; jj < nk; ++jj)
        for (int c = 0; c < rows; ++c) s.sum[size_t(c)] += st[size_t(jj) * rows + size_t(c)];
    }
    for (int c = 0; c < rows; ++c) {
      s.l[size_t(c)] = s.l[size_t(c)] * s.corr[size_t(c)] + s.sum[size_t(c)];
      if (s.corr[size_t(c)] != 1.0f) {
        float* orow = s.o.data() + size_t(c) * dv;
        for (int e = 0; e < dv; ++e) orow[e] *= s.corr[size_t(c)];
      }
    }
    small_gemm(rows, dv, nk, 1.0f, st, rows, /*trans_a=*/true, v + j0 * vs + int64_t(kvh) * dv,
               vs, 1.0f, s.o.data(), dv);
  }
  for (int j = 0; j < g; ++j)
    for (int r = 0; r < nq; ++r) {
      const int c = j * nq + r;
      float* o = out + (i0 + r) * os + int64_t(kvh * g + j) * dv;
      const float inv = 1.0f / s.l[size_t(c)];
      for (int e = 0; e < dv; ++e) o[e] = s.o[size_t(c) * dv + size_t(e)] * inv;
    }
}

}  // namespace

void attention_causal(const AttnDims& d, const float* q, int64_t Lq, int64_t qpos0,
                      const float* k, const float* v, int64_t Lk, float scale, float* out) {
  HYPIC_CHECK(d.nkv > 0 && d.nh % d.nkv == 0 && qpos0 + Lq <= Lk);
  // Few query heads per kv head (MHA, MLA expanded: g = 1) take more positions per task, so
  // each key block is multiplied against ≈ kQRows columns, not 32.
  const int64_t qb = std::max<int64_t>(kQBlock, kQRows / (d.nh / d.nkv));
  const int64_t nblk = (Lq + qb - 1) / qb;
  // Later query blocks see more keys: hand them out first for balance.
  parallel_for(nblk * d.nkv, [&](int64_t task) {
    thread_local Scratch scratch;
    const int64_t b = nblk - 1 - task / d.nkv;
    attend_task(d, q, b * qb, std::min(Lq, (b + 1) * qb), qpos0, k, v,
                int(task % d.nkv), scale, out, scratch);
  });
}

void attention_decode(const AttnDims& d, int64_t B, const float* q, const int64_t* pos,
                      const float* const* kb, const float* const* vb, float scale, float* out) {
  HYPIC_CHECK(d.nkv > 0 && d.nh % d.nkv == 0);
  const int64_t qrow = int64_t(d.nh) * d.hd, orow = int64_t(d.nh) * d.vdim();
  parallel_for(B * d.nkv, [&](int64_t task) {
    thread_local Scratch scratch;
    const int64_t b = task / d.nkv;
    attend_task(d, q + b * qrow, 0, 1, pos[b], kb[b], vb[b], int(task % d.nkv), scale,
                out + b * orow, scratch);
  });
}

}  // namespace hypic::kernels
