// Chunked engine of the decay families. See decay_chunk.h for the math and the API.
//
// Layout of the work:
//  * prefill / build: tasks are ranges of value heads, as few as the threads allow but each
//    holding at most 512 KiB of states (8 heads at dk = dv = 128), whole key-head groups
//    where there are enough of them; hypic::parallel_for (OpenMP, dynamic) spreads them.
//    A task runs chunk-major: for each chunk, for each key head in its range, the shared
//    work (Kᵀ; Q·Kᵀ or Qᵀ; without gates the whole intra-chunk matrix), then each value
//    head's step. So its states stay in L2 and the input rows of a chunk are read as
//    contiguous runs — measured ~15 % faster than head-major tasks (one head's whole
//    sequence at a time, rows 8 KiB apart at nv = 16) on this machine. All per-chunk
//    products go through small_gemm (register-blocked, strided operands, triangles
//    skipped block-wise); operands it would read with a large stride (V, Kᵀ) are copied
//    to contiguous scratch first. Scratch is one buffer per thread, allocated once and
//    reused across calls.
//  * build = prefill without outputs (q unused): per chunk only the state update
//    (and for GLA its decay factors) — ≈ 40 % of a prefill.
//  * step: one task per (sequence, value head), one pass over the state.
//
// Scalar gates (RetNet, Lightning, Mamba2): per chunk and head, G = cumsum g in double;
//   O = scale·diag(e^{G})·(Q·S) + scale·(QK ⊙ D)·V,  D_ij = e^{G_i − G_j} formed pairwise
//   (n(n+1)/2 exps), S ← e^{G_C}·S + Kᵀ·(e^{G_C − G} ⊙ V).
// Per-channel gates (GLA): all channel-indexed operands are kept channel-major ([dk, C], a
//   column per token) so that every decay factor is an exp of a double difference along a
//   contiguous row, and small_gemm reads them with trans_a. The intra-chunk matrix
//   A_ij = Σ_d q_id k_jd e^{G_id − G_jd} is computed safely in sub-chunks of kSub = 16:
//   - off-diagonal blocks (rows of sub-chunk I, columns j < s_I): with the reference row
//     b = s_I − 1, e^{G_i − G_j} = e^{G_i − G_b}·e^{G_b − G_j}, both factors ≤ 1 (i > b ≥ j),
//     so A[I, :s_I] = (Q_I ⊙ e^{G_I − G_b})·(K_{:s_I} ⊙ e^{G_b − G})ᵀ is one GEMM without
//     overflow; a factor that underflows bounds a true product that is smaller still.
//   - diagonal blocks: pairwise, e^{G_i − G_j} = Π_{t=j+1..i} e^{g_t} built by running
//     products of per-token factors ≤ 1 (≤ 15 roundings, no exp per pair).
#include "kernels/decay_chunk.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/fp_env.h"
#include "core/parallel.h"
#include "core/status.h"
#include "kernels/elementwise.h"
#include "kernels/small_gemm.h"

namespace hypic::kernels {

TransitionForm decay_transition_form(DecayGate kind) {
  switch (kind) {
    case DecayGate::kNone: return TransitionForm::kIdentity;
    case DecayGate::kScalar: return TransitionForm::kLogScalar;
    case DecayGate::kVector: return TransitionForm::kLogVector;
  }
  return TransitionForm::kIdentity;
}

namespace decay_chunk {
namespace {

constexpr int C = kChunk, SB = kSub;
static_assert(C % SB == 0);
constexpr int64_t rup16(int64_t n) { return (n + 15) & ~int64_t(15); }

// Per-thread scratch, grown on demand. Sub-buffers (floats unless noted):
//   G     double [dk, C]   cumulative log gates, channel-major (scalar gates: the first C)
//   gacc  double [dk]      GLA: running cumulative log gate per channel
//   eG, eGC  [C]           scalar gates: e^{G}, e^{G_C − G}
//   tri   [C(C+1)/2]       scalar gates: the pairwise e^{G_i − G_j}, j ≤ i, packed by rows
//   gC, P    [dk]          GLA: e^{G_C}; running product of the diagonal blocks
//   KT, QT   [dk, C]       Kᵀ, Qᵀ of the chunk (shared by the value heads of a key head)
//   QK, A    [C, C]        Q·Kᵀ (lower; shared); the intra-chunk matrix (lower, 0 above)
//   Vc, Vs   [C, dv]       V of the chunk, contiguous; e^{G_C − G} ⊙ V
//   XT       [dk, C]       GLA: (Q ⊙ e^{G})ᵀ
//   QsT, KsT [dk, C]       GLA: sub-chunk operands; KsT ends as (K ⊙ e^{G_C − G})ᵀ
//   EG1      [C, dk]       GLA: e^{g_t} per token and channel
//   E        [dk, C]       GLA: exponents, batched into one exp_inplace call per step
struct Scratch {
  float* buf = nullptr;
  int64_t cap = 0;
  ~Scratch() { std::free(buf); }
  void ensure(int64_t need) {
    if (need <= cap) return;
    std::free(buf);
    buf = static_cast<float*>(std::aligned_alloc(64, size_t(need) * sizeof(float)));
    HYPIC_CHECK(buf != nullptr, "decay_chunk scratch allocation failed");
    cap = need;
  }
};

struct Bufs {
  double *G, *gacc;
  float *eG, *eGC, *tri, *gC, *P, *KT, *QT, *QK, *A, *Vc, *Vs, *XT, *QsT, *KsT, *EG1, *E;
};

// Carves the buffers out of `base` (nullptr: only counts); returns the floats used.
int64_t carve(float* base, int dk, int dv, Bufs* b) {
  int64_t off = 0;
  auto take = [&](int64_t n) { float* r = base ? base + off : nullptr; off += rup16(n); return r; };
  const int64_t cd = int64_t(dk) * C, cv = int64_t(C) * dv;
  b->G = reinterpret_cast<double*>(take(2 * cd));
  b->gacc = reinterpret_cast<double*>(take(2 * int64_t(dk)));
  b->eG = take(C);
  b->eGC = take(C);
  b->tri = take(C * (C + 1) / 2);
  b->gC = take(dk);
  b->P = take(dk);
  b->KT = take(cd);
  b->QT = take(cd);
  b->QK = take(C * C);
  b->A = take(C * C);
  b->Vc = take(cv);
  b->Vs = take(cv);
  b->XT = take(cd);
  b->QsT = take(cd);
  b->KsT = take(cd);
  b->EG1 = take(cd);
  b->E = take(cd);
  return off;
}

// One call's arguments, shared by all tasks.
struct Job {
  LaDims d;
  int L = 0;
  const float* q = nullptr;  // nullptr: no outputs
  const float* k = nullptr;
  const float* v = nullptr;
  DecayGateView g;
  float scale = 1.0f;
  float* state = nullptr;  // [nv, dk, dv]
  float* out = nullptr;    // [L, nv, dv]
  float* tlog = nullptr;   // optional: Σ g per head ([nv]) or per channel ([nv, dk])
};

// dst[c·C + r] = src[r·lds + c], r < rows, c < cols (8 × 8 register blocks where whole).
void transpose_to(int rows, int cols, const float* src, int64_t lds, float* dst) {
  int r0 = 0;
#if defined(__AVX2__)
  for (; r0 + 8 <= rows; r0 += 8) {
    int c0 = 0;
    for (; c0 + 8 <= cols; c0 += 8) {
      __m256 v[8], t[8];
      for (int i = 0; i < 8; ++i) v[i] = _mm256_loadu_ps(src + int64_t(r0 + i) * lds + c0);
      for (int i = 0; i < 4; ++i) {
        t[2 * i] = _mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]);
      }
      for (int i = 0; i < 2; ++i) {
        v[4 * i + 0] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        v[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        v[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        v[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
      }
      for (int i = 0; i < 4; ++i) {
        _mm256_storeu_ps(dst + int64_t(c0 + i) * C + r0, _mm256_permute2f128_ps(v[i], v[i + 4], 0x20));
        _mm256_storeu_ps(dst + int64_t(c0 + i + 4) * C + r0, _mm256_permute2f128_ps(v[i], v[i + 4], 0x31));
      }
    }
    for (; c0 < cols; ++c0)
      for (int i = 0; i < 8; ++i) dst[int64_t(c0) * C + r0 + i] = src[int64_t(r0 + i) * lds + c0];
  }
#endif
  for (; r0 < rows; ++r0)
    for (int c = 0; c < cols; ++c) dst[int64_t(c) * C + r0] = src[int64_t(r0) * lds + c];
}

inline float dot(const float* a, const float* b, int n) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// p ← p ⊙ e; returns q·p. Four independent accumulators: the diagonal blocks of GLA run
// ~550 of these short dot products per chunk and head, each otherwise one long FMA chain.
inline float mul_dot(float* p, const float* e, const float* q, int n) {
  int i = 0;
  float s = 0.0f;
#if defined(__AVX2__) && defined(__FMA__)
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (; i + 32 <= n; i += 32) {
    const __m256 p0 = _mm256_mul_ps(_mm256_loadu_ps(p + i), _mm256_loadu_ps(e + i));
    const __m256 p1 = _mm256_mul_ps(_mm256_loadu_ps(p + i + 8), _mm256_loadu_ps(e + i + 8));
    const __m256 p2 = _mm256_mul_ps(_mm256_loadu_ps(p + i + 16), _mm256_loadu_ps(e + i + 16));
    const __m256 p3 = _mm256_mul_ps(_mm256_loadu_ps(p + i + 24), _mm256_loadu_ps(e + i + 24));
    _mm256_storeu_ps(p + i, p0);
    _mm256_storeu_ps(p + i + 8, p1);
    _mm256_storeu_ps(p + i + 16, p2);
    _mm256_storeu_ps(p + i + 24, p3);
    a0 = _mm256_fmadd_ps(p0, _mm256_loadu_ps(q + i), a0);
    a1 = _mm256_fmadd_ps(p1, _mm256_loadu_ps(q + i + 8), a1);
    a2 = _mm256_fmadd_ps(p2, _mm256_loadu_ps(q + i + 16), a2);
    a3 = _mm256_fmadd_ps(p3, _mm256_loadu_ps(q + i + 24), a3);
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 p0 = _mm256_mul_ps(_mm256_loadu_ps(p + i), _mm256_loadu_ps(e + i));
    _mm256_storeu_ps(p + i, p0);
    a0 = _mm256_fmadd_ps(p0, _mm256_loadu_ps(q + i), a0);
  }
  const __m256 t = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  s = _mm_cvtss_f32(x);
#endif
  for (; i < n; ++i) s += (p[i] *= e[i]) * q[i];
  return s;
}

// G[c·C + i] = Σ_{t ≤ i} g[t·ld + c] in double, for i < n, c < dk: the cumulative log gates,
// channel-major. (4 × 4 blocks of doubles transposed in registers, so the stores are
// contiguous; acc: [dk] running sums, left at row n − 1.)
void cumsum_channel_major(const float* g, int64_t ld, int n, int dk, double* acc, double* G) {
  std::fill(acc, acc + dk, 0.0);
  int i0 = 0;
#if defined(__AVX2__)
  for (; i0 + 4 <= n; i0 += 4) {
    int c = 0;
    for (; c + 4 <= dk; c += 4) {
      __m256d a = _mm256_loadu_pd(acc + c);
      __m256d r[4];
      for (int k = 0; k < 4; ++k) {
        a = _mm256_add_pd(a, _mm256_cvtps_pd(_mm_loadu_ps(g + int64_t(i0 + k) * ld + c)));
        r[k] = a;  // r[k][l] = G(i0 + k, c + l)
      }
      _mm256_storeu_pd(acc + c, a);
      const __m256d t0 = _mm256_unpacklo_pd(r[0], r[1]), t1 = _mm256_unpackhi_pd(r[0], r[1]);
      const __m256d t2 = _mm256_unpacklo_pd(r[2], r[3]), t3 = _mm256_unpackhi_pd(r[2], r[3]);
      _mm256_storeu_pd(G + int64_t(c + 0) * C + i0, _mm256_permute2f128_pd(t0, t2, 0x20));
      _mm256_storeu_pd(G + int64_t(c + 1) * C + i0, _mm256_permute2f128_pd(t1, t3, 0x20));
      _mm256_storeu_pd(G + int64_t(c + 2) * C + i0, _mm256_permute2f128_pd(t0, t2, 0x31));
      _mm256_storeu_pd(G + int64_t(c + 3) * C + i0, _mm256_permute2f128_pd(t1, t3, 0x31));
    }
    for (; c < dk; ++c)
      for (int k = 0; k < 4; ++k) G[int64_t(c) * C + i0 + k] = acc[c] += double(g[int64_t(i0 + k) * ld + c]);
  }
#endif
  for (; i0 < n; ++i0)
    for (int c = 0; c < dk; ++c) G[int64_t(c) * C + i0] = acc[c] += double(g[int64_t(i0) * ld + c]);
}

// What one value head's chunk step needs: the chunk's rows (n of them, from token t0), the
// head's state, and the key head's shared products.
struct HeadChunk {
  int n, t0, h;
  const float* Kr;  // [n, dk], ld k_ld (input rows)
  const float* Qr;  // [n, dk], ld k_ld; nullptr: no outputs
  const float* Vr;  // [n, dv] contiguous (Vc)
  float* Or;        // [n, dv], ld v_ld
  float* S;         // [dk, dv]
  double* gsum;     // this head's Σ of chunk totals ([1] or [dk]); nullptr: not wanted
};

// --- no gate: O = scale·(Q·S + A·V) with A = Q·Kᵀ masked (shared), S += Kᵀ·V.
void chunk_none(const Job& jb, const HeadChunk& c, const Bufs& b) {
  const int dk = jb.d.dk, dv = jb.d.dv, n = c.n;
  const int64_t k_ld = int64_t(jb.d.nk) * dk, v_ld = int64_t(jb.d.nv) * dv;
  if (c.Qr) {
    small_gemm(n, dv, dk, jb.scale, c.Qr, k_ld, false, c.S, dv, 0.0f, c.Or, v_ld);
    small_gemm(n, dv, n, jb.scale, b.A, C, false, c.Vr, dv, 1.0f, c.Or, v_ld, Tri::kALower);
  }
  small_gemm(dk, dv, n, 1.0f, b.KT, C, false, c.Vr, dv, 1.0f, c.S, dv);
}

// --- scalar gate g_t (per head).
void chunk_scalar(const Job& jb, const HeadChunk& c, const Bufs& b) {
  const int dk = jb.d.dk, dv = jb.d.dv, n = c.n;
  const int64_t k_ld = int64_t(jb.d.nk) * dk, v_ld = int64_t(jb.d.nv) * dv;
  // G in double: with strong decays |G| reaches hundreds and fp32 differences G_i − G_j
  // would carry an absolute error ~|G|·ε; in double they are exact to fp32.
  double* G = b.G;
  const float* gp = jb.g.g + int64_t(c.t0) * jb.g.tok_ld + c.h;
  double acc = 0.0;
  for (int i = 0; i < n; ++i) G[i] = acc += double(gp[int64_t(i) * jb.g.tok_ld]);
  const double GC = G[n - 1];
  if (c.gsum) c.gsum[0] += GC;
  for (int i = 0; i < n; ++i) {
    b.eG[i] = float(G[i]);
    b.eGC[i] = float(GC - G[i]);
  }
  exp_inplace(b.eG, n);
  exp_inplace(b.eGC, n);
  if (c.Qr) {
    // O = scale·diag(e^G)·(Q·S)
    small_gemm(n, dv, dk, jb.scale, c.Qr, k_ld, false, c.S, dv, 0.0f, c.Or, v_ld);
    for (int i = 0; i < n; ++i) {
      float* o = c.Or + int64_t(i) * v_ld;
      const float e = b.eG[i];
#pragma omp simd
      for (int j = 0; j < dv; ++j) o[j] *= e;
    }
    // A = QK ⊙ D, D_ij = e^{G_i − G_j} pairwise (never e^{G_i}·e^{−G_j}), one exp call.
    float* t = b.tri;
    for (int i = 0, o = 0; i < n; o += ++i)
      for (int j = 0; j <= i; ++j) t[o + j] = float(G[i] - G[j]);
    exp_inplace(t, int64_t(n) * (n + 1) / 2);
    for (int i = 0, o = 0; i < n; o += ++i) {
      const float* qk = b.QK + int64_t(i) * C;
      float* a = b.A + int64_t(i) * C;
#pragma omp simd
      for (int j = 0; j <= i; ++j) a[j] = qk[j] * t[o + j];
      std::fill(a + i + 1, a + n, 0.0f);
    }
    small_gemm(n, dv, n, jb.scale, b.A, C, false, c.Vr, dv, 1.0f, c.Or, v_ld, Tri::kALower);
  }
  // S ← e^{G_C}·S + Kᵀ·(e^{G_C − G} ⊙ V)
  for (int i = 0; i < n; ++i) {
    const float* vr = c.Vr + int64_t(i) * dv;
    float* vs = b.Vs + int64_t(i) * dv;
    const float e = b.eGC[i];
#pragma omp simd
    for (int j = 0; j < dv; ++j) vs[j] = e * vr[j];
  }
  small_gemm(dk, dv, n, 1.0f, b.KT, C, false, b.Vs, dv, b.eG[n - 1], c.S, dv);
}

// --- per-channel gate (GLA). Channel-major throughout; G_{−1} := 0.
//
// KsT is kept relative to a moving reference row r: KsT[c][j] = k_jc·e^{G_rc − G_jc} for
// j ≤ r. Advancing r → r′ multiplies the old columns by e^{G_r′ − G_r} (≤ 1) and fills the
// new ones: 16 exps per channel instead of re-forming all of them, and at r′ = n − 1 it is
// the (K ⊙ e^{G_C − G})ᵀ of the state update. Every factor is ≤ 1, so products underflow
// at worst where the true value is smaller still.
void advance_ks(const double* G, const float* KT, int dk, int r, int r2, float* KsT, float* E) {
  const int m = r2 - r;  // new columns r + 1 .. r2, m ≤ kSub
  // E: [dk, m] exponents of the new columns, then [dk] chain factors
  for (int c = 0; c < dk; ++c) {
    const double* gr = G + int64_t(c) * C;
    const double G2 = gr[r2];
    float* e = E + int64_t(c) * m;
    for (int j = 0; j < m; ++j) e[j] = float(G2 - gr[r + 1 + j]);
    E[int64_t(dk) * m + c] = float(G2 - (r >= 0 ? gr[r] : 0.0));
  }
  exp_inplace(E, int64_t(dk) * (m + 1));
  for (int c = 0; c < dk; ++c) {
    float* ks = KsT + int64_t(c) * C;
    const float f = E[int64_t(dk) * m + c];
#pragma omp simd
    for (int j = 0; j <= r; ++j) ks[j] *= f;
    const float* kt = KT + int64_t(c) * C;
    const float* e = E + int64_t(c) * m;
#pragma omp simd
    for (int j = 0; j < m; ++j) ks[r + 1 + j] = kt[r + 1 + j] * e[j];
  }
}

void chunk_vector(const Job& jb, const HeadChunk& c, const Bufs& b) {
  const int dk = jb.d.dk, dv = jb.d.dv, n = c.n;
  const int64_t k_ld = int64_t(jb.d.nk) * dk, v_ld = int64_t(jb.d.nv) * dv;
  double* G = b.G;  // [dk, C]
  const float* gp = jb.g.g + int64_t(c.t0) * jb.g.tok_ld + int64_t(c.h) * dk;
  double* acc = b.gacc;
  cumsum_channel_major(gp, jb.g.tok_ld, n, dk, acc, G);
  if (c.gsum)
    for (int ch = 0; ch < dk; ++ch) c.gsum[ch] += acc[ch];
  for (int ch = 0; ch < dk; ++ch) b.gC[ch] = float(acc[ch]);
  exp_inplace(b.gC, dk);

  if (c.Qr) {
    // e^{g_t} per token (the diagonal blocks' running products), one exp call.
    for (int i = 0; i < n; ++i)
      std::memcpy(b.EG1 + int64_t(i) * dk, gp + int64_t(i) * jb.g.tok_ld, sizeof(float) * size_t(dk));
    exp_inplace(b.EG1, int64_t(n) * dk);
    for (int i = 0; i < n; ++i) std::fill(b.A + int64_t(i) * C + i + 1, b.A + int64_t(i) * C + n, 0.0f);

    int r = -1;  // KsT's reference row
    for (int s = 0; s < n; s += SB) {
      const int e = std::min(n, s + SB), m = e - s, rb = s - 1;
      // QsT[:, s:e] = (Q ⊙ e^{G − G_rb})ᵀ and XT[:, s:e] = QsT·e^{G_rb} (= (Q ⊙ e^{G})ᵀ).
      float* E = b.E;
      for (int ch = 0; ch < dk; ++ch) {
        const double* gr = G + int64_t(ch) * C;
        const double Gb = rb >= 0 ? gr[rb] : 0.0;
        float* x = E + int64_t(ch) * m;
        for (int i = 0; i < m; ++i) x[i] = float(gr[s + i] - Gb);
        E[int64_t(dk) * m + ch] = float(Gb);
      }
      exp_inplace(E, int64_t(dk) * (m + 1));
      for (int ch = 0; ch < dk; ++ch) {
        const float* x = E + int64_t(ch) * m;
        const float* qt = b.QT + int64_t(ch) * C + s;
        float* qs = b.QsT + int64_t(ch) * C + s;
        float* xt = b.XT + int64_t(ch) * C + s;
        const float eb = E[int64_t(dk) * m + ch];
#pragma omp simd
        for (int i = 0; i < m; ++i) {
          qs[i] = qt[i] * x[i];
          xt[i] = qs[i] * eb;
        }
      }
      if (s > 0) {
        // Off-diagonal block: rows [s, e) × columns [0, s), reference row rb = s − 1:
        // e^{G_i − G_j} = e^{G_i − G_rb}·e^{G_rb − G_j}, both ≤ 1.
        advance_ks(G, b.KT, dk, r, rb, b.KsT, b.E);
        r = rb;
        small_gemm(m, s, dk, 1.0f, b.QsT + s, C, true, b.KsT, C, 0.0f, b.A + int64_t(s) * C, C);
      }
      // Diagonal block: e^{G_i − G_j} = Π_{t=j+1..i} e^{g_t}, running products.
      for (int j = s; j < e; ++j) {
        std::memcpy(b.P, c.Kr + int64_t(j) * k_ld, sizeof(float) * size_t(dk));
        b.A[int64_t(j) * C + j] = dot(c.Qr + int64_t(j) * k_ld, b.P, dk);
        for (int i = j + 1; i < e; ++i)
          b.A[int64_t(i) * C + j] = mul_dot(b.P, b.EG1 + int64_t(i) * dk, c.Qr + int64_t(i) * k_ld, dk);
      }
    }
    small_gemm(n, dv, dk, jb.scale, b.XT, C, true, c.S, dv, 0.0f, c.Or, v_ld);
    small_gemm(n, dv, n, jb.scale, b.A, C, false, c.Vr, dv, 1.0f, c.Or, v_ld, Tri::kALower);
    advance_ks(G, b.KT, dk, r, n - 1, b.KsT, b.E);
  } else {
    // KsT = (K ⊙ e^{G_C − G})ᵀ directly, one exp call.
    for (int ch = 0; ch < dk; ++ch) {
      const double* gr = G + int64_t(ch) * C;
      float* x = b.KsT + int64_t(ch) * C;
      for (int j = 0; j < n; ++j) x[j] = float(gr[n - 1] - gr[j]);
    }
    if (n == C) {
      exp_inplace(b.KsT, int64_t(dk) * C);
    } else {
      for (int ch = 0; ch < dk; ++ch) exp_inplace(b.KsT + int64_t(ch) * C, n);
    }
    for (int ch = 0; ch < dk; ++ch) {
      float* x = b.KsT + int64_t(ch) * C;
      const float* kt = b.KT + int64_t(ch) * C;
#pragma omp simd
      for (int j = 0; j < n; ++j) x[j] *= kt[j];
    }
  }
  // S ← Diag(e^{G_C})·S + (K ⊙ e^{G_C − G})ᵀ·V
  for (int ch = 0; ch < dk; ++ch) {
    float* sr = c.S + int64_t(ch) * dv;
    const float e = b.gC[ch];
#pragma omp simd
    for (int j = 0; j < dv; ++j) sr[j] *= e;
  }
  small_gemm(dk, dv, n, 1.0f, b.KsT, C, false, c.Vr, dv, 1.0f, c.S, dv);
}

// Runs value heads [h0, h0 + nh) over the whole sequence, chunk-major: per chunk, the work
// shared by the value heads of one key head (Kᵀ, Qᵀ / Q·Kᵀ) is done once for those in the
// range, then each head's step.
void run_task(const Job& jb, int h0, int nh, Scratch& ws) {
  const LaDims& d = jb.d;
  const int rep = d.nv / d.nk, dk = d.dk, dv = d.dv;
  const int64_t k_ld = int64_t(d.nk) * dk, v_ld = int64_t(d.nv) * dv;
  const DecayGate kind = jb.g.kind;
  const bool outputs = jb.q != nullptr;
  Bufs b;
  ws.ensure(carve(nullptr, dk, dv, &b));
  carve(ws.buf, dk, dv, &b);

  // Σ of the chunk totals of the log gates (the transition), [nh, w] in double.
  const int w = kind == DecayGate::kVector ? dk : 1;
  std::vector<double> gsum(jb.tlog ? size_t(nh) * w : 0, 0.0);

  for (int t0 = 0; t0 < jb.L; t0 += C) {
    // A short tail chunk is processed with its n real rows (= SPEC §2's zero padding).
    const int n = std::min(C, jb.L - t0);
    for (int hk = h0 / rep; hk * rep < h0 + nh; ++hk) {
      HeadChunk c{};
      c.n = n;
      c.t0 = t0;
      c.Kr = jb.k + int64_t(t0) * k_ld + int64_t(hk) * dk;
      c.Qr = outputs ? jb.q + int64_t(t0) * k_ld + int64_t(hk) * dk : nullptr;
      // Kᵀ contiguous: the A operand of the state update (K's rows, nk·dk floats apart, map
      // onto the same L1 sets when read in place) and the B operand of Q·Kᵀ.
      transpose_to(n, dk, c.Kr, k_ld, b.KT);
      if (kind == DecayGate::kVector) {
        if (outputs) transpose_to(n, dk, c.Qr, k_ld, b.QT);
      } else if (outputs) {
        small_gemm(n, n, dk, 1.0f, c.Qr, k_ld, false, b.KT, C, 0.0f, b.QK, C, Tri::kCLower);
        if (kind == DecayGate::kNone)
          for (int i = 0; i < n; ++i) {
            float* a = b.A + int64_t(i) * C;
            std::memcpy(a, b.QK + int64_t(i) * C, sizeof(float) * size_t(i + 1));
            std::fill(a + i + 1, a + n, 0.0f);
          }
      }
      for (int h = std::max(h0, hk * rep); h < std::min(h0 + nh, (hk + 1) * rep); ++h) {
        c.h = h;
        c.S = jb.state + int64_t(h) * dk * dv;
        c.Or = outputs ? jb.out + int64_t(t0) * v_ld + int64_t(h) * dv : nullptr;
        c.gsum = jb.tlog ? gsum.data() + int64_t(h - h0) * w : nullptr;
        // The chunk's values, contiguous: rows of the input lie nv·dv floats apart, which
        // maps them onto the same L1 sets when read as a GEMM's B operand.
        const float* Vin = jb.v + int64_t(t0) * v_ld + int64_t(h) * dv;
        for (int i = 0; i < n; ++i)
          std::memcpy(b.Vc + int64_t(i) * dv, Vin + int64_t(i) * v_ld, sizeof(float) * size_t(dv));
        c.Vr = b.Vc;
        switch (kind) {
          case DecayGate::kNone: chunk_none(jb, c, b); break;
          case DecayGate::kScalar: chunk_scalar(jb, c, b); break;
          case DecayGate::kVector: chunk_vector(jb, c, b); break;
        }
      }
    }
  }

  if (jb.tlog)
    for (int h = h0; h < h0 + nh; ++h)
      for (int ch = 0; ch < w; ++ch)
        jb.tlog[int64_t(h) * w + ch] = float(gsum[int64_t(h - h0) * w + ch]);
}

void check_args(const LaDims& d, const DecayGateView& g) {
  HYPIC_CHECK(d.nk > 0 && d.nv > 0 && d.nv % d.nk == 0 && d.dk > 0 && d.dv > 0, "bad LaDims");
  HYPIC_CHECK(g.kind == DecayGate::kNone || g.g != nullptr, "this family needs its gates");
}

void run(const Job& jb) {
  const LaDims& d = jb.d;
  const int rep = d.nv / d.nk;
  // Tasks are ranges of value heads run chunk-major (see the top of the file): as few as
  // the threads allow, each holding at most kTaskStateBytes of states so they stay in L2.
  // Ranges are whole key-head groups when there are enough of them.
  constexpr int64_t kTaskStateBytes = 512 << 10;
  const int64_t state_bytes = int64_t(d.dk) * d.dv * int64_t(sizeof(float));
  const int threads = std::max(1, num_threads());
  int per = int(std::max<int64_t>(1, std::min<int64_t>((d.nv + threads - 1) / threads,
                                                       kTaskStateBytes / state_bytes)));
  if (per >= rep) per -= per % rep;
  const int tasks = (d.nv + per - 1) / per;
  parallel_for(tasks, [&](int64_t task) {
    const FlushDenormals ftz;
    thread_local Scratch ws;
    const int h0 = int(task) * per;
    run_task(jb, h0, std::min(per, d.nv - h0), ws);
  });
}

}  // namespace

void prefill(const LaDims& d, int L, const float* q, const float* k, const float* v,
             const DecayGateView& g, float scale, float* state, float* out) {
  check_args(d, g);
  HYPIC_CHECK(L >= 0 && (q == nullptr || out != nullptr));
  if (L == 0) return;
  Job jb;
  jb.d = d;
  jb.L = L;
  jb.q = q;
  jb.k = k;
  jb.v = v;
  jb.g = g;
  jb.scale = scale;
  jb.state = state;
  jb.out = out;
  run(jb);
}

void build(const LaDims& d, int L, const float* k, const float* v, const DecayGateView& g,
           Transition* T, float* s0) {
  check_args(d, g);
  HYPIC_CHECK(L >= 0);
  *T = Transition::identity(decay_transition_form(g.kind), d.nv, d.dk);
  std::memset(s0, 0, sizeof(float) * size_t(d.nv) * d.dk * d.dv);
  if (L == 0) return;
  Job jb;
  jb.d = d;
  jb.L = L;
  jb.k = k;
  jb.v = v;
  jb.g = g;
  jb.state = s0;
  jb.tlog = g.kind == DecayGate::kNone ? nullptr : T->data.data();
  run(jb);
}

void step(const LaDims& d, int B, const float* q, const float* k, const float* v,
          const DecayGateView& g, float scale, float* const* states, float* out) {
  check_args(d, g);
  const int rep = d.nv / d.nk, dk = d.dk, dv = d.dv;
  auto one = [&](int64_t idx) {
    const FlushDenormals ftz;
    const int64_t b = idx / d.nv;
    const int h = int(idx % d.nv), hk = h / rep;
    const float* qv = q + (b * d.nk + hk) * dk;
    const float* kv = k + (b * d.nk + hk) * dk;
    const float* vv = v + idx * dv;
    float* S = states[b] + int64_t(h) * dk * dv;
    float* o = out + idx * dv;
    float a = 1.0f;
    if (g.kind == DecayGate::kScalar) a = std::exp(g.g[b * g.tok_ld + h]);
    const float* ea = nullptr;  // GLA: e^{g} per channel
    if (g.kind == DecayGate::kVector) {
      thread_local std::vector<float> buf;
      buf.assign(g.g + b * g.tok_ld + int64_t(h) * dk, g.g + b * g.tok_ld + int64_t(h + 1) * dk);
      exp_inplace(buf.data(), dk);
      ea = buf.data();
    }
    std::fill(o, o + dv, 0.0f);
    for (int i = 0; i < dk; ++i) {
      const float ai = ea ? ea[i] : a, ki = kv[i], qi = qv[i];
      float* r = S + int64_t(i) * dv;
#pragma omp simd
      for (int j = 0; j < dv; ++j) {
        const float x = ai * r[j] + ki * vv[j];
        r[j] = x;
        o[j] += qi * x;
      }
    }
#pragma omp simd
    for (int j = 0; j < dv; ++j) o[j] *= scale;
  };
  // Below ~256 KiB of state in all a parallel region costs more than it saves.
  const int64_t tasks = int64_t(B) * d.nv;
  if (tasks * dk * dv < (int64_t(1) << 16)) {
    for (int64_t i = 0; i < tasks; ++i) one(i);
  } else {
    parallel_for(tasks, one);
  }
}

double prefill_flops(const LaDims& d, int L, bool outputs) {
  const double dk = d.dk, dv = d.dv;
  auto chunk = [&](double n) {
    const double tri = n * (n + 1) / 2;
    return outputs ? tri * 2 * dk + 2 * n * dk * dv + tri * 2 * dv + 2 * n * dk * dv
                   : 2 * n * dk * dv;
  };
  return (L / C * chunk(C) + (L % C ? chunk(L % C) : 0.0)) * d.nv;
}

}  // namespace decay_chunk

// ---------------------------------------------------------------------------------------
void DecayAttention::prefill(const LaInputs& in, float* state, float* out) const {
  HYPIC_CHECK(in.q != nullptr && in.k != nullptr && in.v != nullptr, "prefill needs q, k, v");
  decay_chunk::prefill(d_, in.L, in.q, in.k, in.v, gate(in), in.scale, state, out);
}

void DecayAttention::step(const LaInputs& in, float* const* states, float* out) const {
  HYPIC_CHECK(in.q != nullptr && in.k != nullptr && in.v != nullptr, "step needs q, k, v");
  decay_chunk::step(d_, in.L, in.q, in.k, in.v, gate(in), in.scale, states, out);
}

void DecayAttention::build_transition(const LaInputs& in, Transition* T, float* s0) const {
  HYPIC_CHECK(in.k != nullptr && in.v != nullptr, "build_transition needs k, v");
  decay_chunk::build(d_, in.L, in.k, in.v, gate(in), T, s0);
}

double DecayAttention::prefill_flops(int L) const { return decay_chunk::prefill_flops(d_, L, true); }

}  // namespace hypic::kernels
