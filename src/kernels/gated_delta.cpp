// Gated DeltaNet kernels. See gated_delta.h for the math and the API.
//
// Layout of the work:
//  * gdn_prefill: one task per key head (its nv/nk value heads together, sharing K·Kᵀ and
//    Q·Kᵀ) — or per value head when there are fewer key heads than threads — spread by
//    hypic::parallel_for (OpenMP, dynamic schedule, one barrier per call). A task runs its
//    heads' whole sequence chunk by chunk (run_group_chunks), so the states [dk, dv] and
//    all chunk temporaries (~0.4 MiB) stay in the core's L2 for the whole call.
//    Inside a chunk every product is a small GEMM on small_gemm: register-blocked
//    microkernels (AVX-512: 6 rows × 64 columns, 24 zmm accumulators, ≈110 GFLOP/s per
//    core = peak on this machine; baseline AVX2: 6 × 16), operands read in place with their
//    strides (no packing), triangular operands skipped block-wise.
//    Measured alternative (nk=16, nv=32, dk=dv=128, L=4096, 2 cores): chunk-major, each
//    S-dependent product batched across the 32 heads in one oneDNN matmul (brgemm
//    avx512) — ~140 ms against ~107 ms here; its batched scan alone (~84 ms) costs more than
//    the whole per-head scan here, and its 5 barriers per chunk make it fragile on a
//    shared machine. So the per-head layout is the one kept.
//  * gdn_step: one task per (sequence, value head); the state is swept in L1-sized column
//    blocks (read Sᵀk, then update + read Sᵀq), so it streams through memory once.
#include "kernels/gated_delta.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/parallel.h"
#include "core/status.h"

namespace hypic::kernels {
namespace gdn_detail {
namespace {

// ---------------------------------------------------------------------------------------
// exp for arrays. Cephes expf: range reduction by ln 2 in two parts and a degree-6
// polynomial, ≈1 ulp. Arguments below ln(FLT_MIN) return 0 (the exact value would be a
// denormal < 1.2e−38; flushing keeps denormals out of the GEMMs); arguments above 88 are
// clamped (never happens here: all exponents are ≤ 0); NaN propagates.
// (GCC does not if-convert the clamps of a scalar version under -ftrapping-math, so the
// vector path is written with AVX2 intrinsics — the x86-64-v3 baseline.)
constexpr float kExpLo = -87.33654475f, kExpHi = 88.0f;

inline float exp_scalar(float x) {
  const float xc = std::min(std::max(x, kExpLo), kExpHi);
  const float fx = std::floor(xc * 1.44269504088896341f + 0.5f);
  float r = xc - fx * 0.693359375f;
  r = r + fx * 2.12194440e-4f;
  const float z = r * r;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * z + r + 1.0f;
  const float scale = std::bit_cast<float>((static_cast<int32_t>(fx) + 127) << 23);
  return x < kExpLo ? 0.0f : (std::isnan(x) ? x : y * scale);
}

#if defined(__AVX2__) && defined(__FMA__)
inline __m256 exp8(__m256 x) {
  const __m256 lo = _mm256_set1_ps(kExpLo);
  __m256 xc = _mm256_min_ps(_mm256_set1_ps(kExpHi), _mm256_max_ps(lo, x));  // NaN stays NaN
  const __m256 fx = _mm256_floor_ps(
      _mm256_fmadd_ps(xc, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fmadd_ps(fx, _mm256_set1_ps(2.12194440e-4f), r);
  const __m256 z = _mm256_mul_ps(r, r);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_add_ps(_mm256_fmadd_ps(y, z, r), _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvttps_epi32(fx), _mm256_set1_epi32(127)), 23);
  const __m256 res = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
  return _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LT_OQ), res);
}
#endif

// y[i] = exp(x[i]), i < n (in place allowed).
void exp_array(const float* x, float* y, int n) {
  int i = 0;
#if defined(__AVX2__) && defined(__FMA__)
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i)));
  if (i < n) {  // tail through the same vector code, so every element rounds alike
    alignas(32) float buf[8] = {};
    for (int j = i; j < n; ++j) buf[j - i] = x[j];
    _mm256_store_ps(buf, exp8(_mm256_load_ps(buf)));
    for (int j = i; j < n; ++j) y[j] = buf[j - i];
  }
#else
  for (; i < n; ++i) y[i] = exp_scalar(x[i]);
#endif
}

// Tm = (I + M)⁻¹ for the strictly lower triangular M (n × n, ld kChunk), by forward
// substitution row by row: row_i = e_i − Σ_{j<i} M_ij row_j. Row j is zero beyond column j,
// so every row is computed over the full kChunk width (zeros included) with the
// accumulators in registers. Writes rows [0, n) of Tm over kChunk columns.
void unit_lower_inverse(int n, const float* M, float* Tm) {
  constexpr int C = kChunk;
#if defined(__AVX2__) && defined(__FMA__)
  static_assert(C == 64, "the register blocking below assumes 64-wide rows");
  for (int i = 0; i < n; ++i) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    const float* mrow = M + int64_t(i) * C;
    for (int j = 0; j < i; ++j) {
      const __m256 m = _mm256_set1_ps(-mrow[j]);
      const float* t = Tm + int64_t(j) * C;
      a0 = _mm256_fmadd_ps(m, _mm256_loadu_ps(t), a0);
      a1 = _mm256_fmadd_ps(m, _mm256_loadu_ps(t + 8), a1);
      a2 = _mm256_fmadd_ps(m, _mm256_loadu_ps(t + 16), a2);
      a3 = _mm256_fmadd_ps(m, _mm256_loadu_ps(t + 24), a3);
      a4 = _mm256_fmadd_ps(m, _mm256_loadu_ps(t + 32), a4);
      a5 = _mm256_fmadd_ps(m, _mm256_loadu_ps(t + 40), a5);
      a6 = _mm256_fmadd_ps(m, _mm256_loadu_ps(t + 48), a6);
      a7 = _mm256_fmadd_ps(m, _mm256_loadu_ps(t + 56), a7);
    }
    float* trow = Tm + int64_t(i) * C;
    _mm256_storeu_ps(trow, a0);
    _mm256_storeu_ps(trow + 8, a1);
    _mm256_storeu_ps(trow + 16, a2);
    _mm256_storeu_ps(trow + 24, a3);
    _mm256_storeu_ps(trow + 32, a4);
    _mm256_storeu_ps(trow + 40, a5);
    _mm256_storeu_ps(trow + 48, a6);
    _mm256_storeu_ps(trow + 56, a7);
    trow[i] = 1.0f;  // column i gets nothing from rows j < i
  }
#else
  for (int i = 0; i < n; ++i) {
    float* trow = Tm + int64_t(i) * C;
    std::fill(trow, trow + C, 0.0f);
    const float* mrow = M + int64_t(i) * C;
    for (int j = 0; j < i; ++j) {
      const float m = -mrow[j];
      const float* tj = Tm + int64_t(j) * C;
      for (int c = 0; c <= j; ++c) trow[c] += m * tj[c];
    }
    trow[i] = 1.0f;
  }
#endif
}

// dst[c * ldd + r] = src[r * lds + c] for r < rows, c < cols.
void transpose(int rows, int cols, const float* src, int64_t lds, float* dst, int64_t ldd) {
  int r0 = 0;
#if defined(__AVX2__) && defined(__FMA__)
  for (; r0 + 8 <= rows; r0 += 8) {
    int c0 = 0;
    for (; c0 + 8 <= cols; c0 += 8) {
      __m256 v[8], t[8];
      for (int k = 0; k < 8; ++k) v[k] = _mm256_loadu_ps(src + int64_t(r0 + k) * lds + c0);
      t[0] = _mm256_unpacklo_ps(v[0], v[1]);
      t[1] = _mm256_unpackhi_ps(v[0], v[1]);
      t[2] = _mm256_unpacklo_ps(v[2], v[3]);
      t[3] = _mm256_unpackhi_ps(v[2], v[3]);
      t[4] = _mm256_unpacklo_ps(v[4], v[5]);
      t[5] = _mm256_unpackhi_ps(v[4], v[5]);
      t[6] = _mm256_unpacklo_ps(v[6], v[7]);
      t[7] = _mm256_unpackhi_ps(v[6], v[7]);
      v[0] = _mm256_shuffle_ps(t[0], t[2], _MM_SHUFFLE(1, 0, 1, 0));
      v[1] = _mm256_shuffle_ps(t[0], t[2], _MM_SHUFFLE(3, 2, 3, 2));
      v[2] = _mm256_shuffle_ps(t[1], t[3], _MM_SHUFFLE(1, 0, 1, 0));
      v[3] = _mm256_shuffle_ps(t[1], t[3], _MM_SHUFFLE(3, 2, 3, 2));
      v[4] = _mm256_shuffle_ps(t[4], t[6], _MM_SHUFFLE(1, 0, 1, 0));
      v[5] = _mm256_shuffle_ps(t[4], t[6], _MM_SHUFFLE(3, 2, 3, 2));
      v[6] = _mm256_shuffle_ps(t[5], t[7], _MM_SHUFFLE(1, 0, 1, 0));
      v[7] = _mm256_shuffle_ps(t[5], t[7], _MM_SHUFFLE(3, 2, 3, 2));
      for (int k = 0; k < 4; ++k) {
        _mm256_storeu_ps(dst + int64_t(c0 + k) * ldd + r0, _mm256_permute2f128_ps(v[k], v[k + 4], 0x20));
        _mm256_storeu_ps(dst + int64_t(c0 + k + 4) * ldd + r0, _mm256_permute2f128_ps(v[k], v[k + 4], 0x31));
      }
    }
    for (; c0 < cols; ++c0)
      for (int k = 0; k < 8; ++k) dst[int64_t(c0) * ldd + r0 + k] = src[int64_t(r0 + k) * lds + c0];
  }
#endif
  for (; r0 < rows; ++r0)
    for (int c = 0; c < cols; ++c) dst[int64_t(c) * ldd + r0] = src[int64_t(r0) * lds + c];
}

// ---------------------------------------------------------------------------------------
// Small GEMM. One microkernel call computes an mr × (nv·W) tile of C over K:
//   C = alpha · Σ_p A(i,p) B(p,j) + beta · C   (C not read when beta == 0)
// `last` = valid columns in the last vector (1..W).
using UkFn = void (*)(int K, const float* A, int64_t lda, const float* B, int64_t ldb,
                      float* C, int64_t ldc, float alpha, float beta, int last);

template <bool TA>
inline const float* a_elem(const float* A, int64_t lda, int r, int p) {
  return TA ? A + int64_t(p) * lda + r : A + int64_t(r) * lda + p;
}

// ---- AVX-512 ----
constexpr int kMr512 = 6, kNv512 = 4;  // 6 × 64 tile, 24 accumulators

// The accumulators are named variables, not an array: GCC keeps an array of 24 __m512 in
// memory (stores every iteration); named locals stay in registers. Tiles smaller than
// MR × NV simply leave some variables unused (if constexpr), which the compiler drops.
#define GDN_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define GDN_DECL512(r) \
  __m512 c##r##0 = _mm512_setzero_ps(), c##r##1 = c##r##0, c##r##2 = c##r##0, c##r##3 = c##r##0;
#define GDN_FMA512(r)                                                   \
  if constexpr (MR > r) {                                               \
    const __m512 a = _mm512_set1_ps(*a_elem<TA>(A, lda, r, p));         \
    c##r##0 = _mm512_fmadd_ps(a, b0, c##r##0);                          \
    if constexpr (NV > 1) c##r##1 = _mm512_fmadd_ps(a, b1, c##r##1);    \
    if constexpr (NV > 2) c##r##2 = _mm512_fmadd_ps(a, b2, c##r##2);    \
    if constexpr (NV > 3) c##r##3 = _mm512_fmadd_ps(a, b3, c##r##3);    \
  }
#define GDN_STORE512(r)                                      \
  if constexpr (MR > r) {                                    \
    float* c = C + int64_t(r) * ldc;                         \
    st(c, c##r##0, 0);                                       \
    if constexpr (NV > 1) st(c + 16, c##r##1, 1);            \
    if constexpr (NV > 2) st(c + 32, c##r##2, 2);            \
    if constexpr (NV > 3) st(c + 48, c##r##3, 3);            \
  }

template <int MR, int NV, bool TA>
__attribute__((target("avx512f"))) void uk_avx512(int K, const float* A, int64_t lda,
                                                  const float* B, int64_t ldb, float* C,
                                                  int64_t ldc, float alpha, float beta,
                                                  int last) {
  static_assert(MR >= 1 && MR <= 6 && NV >= 1 && NV <= 4);
  const __mmask16 m = __mmask16((1u << last) - 1u);
  GDN_ROWS(GDN_DECL512)
  for (int p = 0; p < K; ++p) {
    const float* b = B + int64_t(p) * ldb;
    __m512 b0, b1, b2, b3;
    b0 = NV == 1 ? _mm512_maskz_loadu_ps(m, b) : _mm512_loadu_ps(b);
    if constexpr (NV > 1) b1 = NV == 2 ? _mm512_maskz_loadu_ps(m, b + 16) : _mm512_loadu_ps(b + 16);
    if constexpr (NV > 2) b2 = NV == 3 ? _mm512_maskz_loadu_ps(m, b + 32) : _mm512_loadu_ps(b + 32);
    if constexpr (NV > 3) b3 = _mm512_maskz_loadu_ps(m, b + 48);
    GDN_ROWS(GDN_FMA512)
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  auto st = [&](float* c, __m512 acc, int v) __attribute__((target("avx512f"))) {
    const __mmask16 mv = (v == NV - 1) ? m : __mmask16(0xFFFF);
    __m512 x = _mm512_mul_ps(va, acc);
    if (beta != 0.0f) x = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(mv, c), x);
    _mm512_mask_storeu_ps(c, mv, x);
  };
  GDN_ROWS(GDN_STORE512)
}

template <bool TA, int... I>
constexpr std::array<UkFn, sizeof...(I)> make_tab512(std::integer_sequence<int, I...>) {
  return {&uk_avx512<I / kNv512 + 1, I % kNv512 + 1, TA>...};
}
constexpr auto kTab512N = make_tab512<false>(std::make_integer_sequence<int, kMr512 * kNv512>{});
constexpr auto kTab512T = make_tab512<true>(std::make_integer_sequence<int, kMr512 * kNv512>{});

// ---- baseline (x86-64-v3: AVX2 + FMA; scalar when built without AVX2) ----
#if defined(__AVX2__) && defined(__FMA__)
constexpr int kMrGen = 6, kNvGen = 2, kWGen = 8;  // 6 × 16 tile, 12 accumulators

#define GDN_DECL256(r) __m256 c##r##0 = _mm256_setzero_ps(), c##r##1 = c##r##0;
#define GDN_FMA256(r)                                                        \
  if constexpr (MR > r) {                                                    \
    const __m256 a = _mm256_broadcast_ss(a_elem<TA>(A, lda, r, p));          \
    c##r##0 = _mm256_fmadd_ps(a, b0, c##r##0);                               \
    if constexpr (NV > 1) c##r##1 = _mm256_fmadd_ps(a, b1, c##r##1);         \
  }
#define GDN_STORE256(r)                           \
  if constexpr (MR > r) {                         \
    float* c = C + int64_t(r) * ldc;              \
    st(c, c##r##0, NV == 1);                      \
    if constexpr (NV > 1) st(c + 8, c##r##1, true); \
  }

template <int MR, int NV, bool TA, bool MASKED>
void uk_avx2(int K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
             int64_t ldc, float alpha, float beta, int last) {
  static_assert(MR >= 1 && MR <= 6 && NV >= 1 && NV <= 2);
  alignas(32) static constexpr int32_t kIdx[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(last),
                                       _mm256_load_si256(reinterpret_cast<const __m256i*>(kIdx)));
  GDN_ROWS(GDN_DECL256)
  for (int p = 0; p < K; ++p) {
    const float* b = B + int64_t(p) * ldb;
    __m256 b0, b1;
    b0 = (MASKED && NV == 1) ? _mm256_maskload_ps(b, m) : _mm256_loadu_ps(b);
    if constexpr (NV > 1) b1 = MASKED ? _mm256_maskload_ps(b + 8, m) : _mm256_loadu_ps(b + 8);
    GDN_ROWS(GDN_FMA256)
  }
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  auto st = [&](float* c, __m256 acc, bool is_last) {
    __m256 x = _mm256_mul_ps(va, acc);
    if (MASKED && is_last) {
      if (beta != 0.0f) x = _mm256_fmadd_ps(vb, _mm256_maskload_ps(c, m), x);
      _mm256_maskstore_ps(c, m, x);
    } else {
      if (beta != 0.0f) x = _mm256_fmadd_ps(vb, _mm256_loadu_ps(c), x);
      _mm256_storeu_ps(c, x);
    }
  };
  GDN_ROWS(GDN_STORE256)
}
#else
constexpr int kMrGen = 4, kNvGen = 2, kWGen = 8;

template <int MR, int NV, bool TA, bool MASKED>
void uk_avx2(int K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
             int64_t ldc, float alpha, float beta, int last) {
  constexpr int NC = NV * kWGen;
  const int nc = (NV - 1) * kWGen + last;
  float acc[MR][NC] = {};
  for (int p = 0; p < K; ++p) {
    const float* b = B + int64_t(p) * ldb;
    for (int r = 0; r < MR; ++r) {
      const float a = *a_elem<TA>(A, lda, r, p);
      for (int j = 0; j < nc; ++j) acc[r][j] += a * b[j];
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < nc; ++j) {
      float* c = C + int64_t(r) * ldc + j;
      *c = beta != 0.0f ? alpha * acc[r][j] + beta * *c : alpha * acc[r][j];
    }
}
#endif

template <bool TA, bool MASKED, int... I>
constexpr std::array<UkFn, sizeof...(I)> make_tab_gen(std::integer_sequence<int, I...>) {
  return {&uk_avx2<I / kNvGen + 1, I % kNvGen + 1, TA, MASKED>...};
}
constexpr auto kTabGenN = make_tab_gen<false, false>(std::make_integer_sequence<int, kMrGen * kNvGen>{});
constexpr auto kTabGenT = make_tab_gen<true, false>(std::make_integer_sequence<int, kMrGen * kNvGen>{});
constexpr auto kTabGenNM = make_tab_gen<false, true>(std::make_integer_sequence<int, kMrGen * kNvGen>{});
constexpr auto kTabGenTM = make_tab_gen<true, true>(std::make_integer_sequence<int, kMrGen * kNvGen>{});

// Tiles C in blocks of MRMAX rows × NVMAX·W columns; B's column panel is reused by every
// row block (it stays in L1/L2). Triangular structure is exploited per row block.
template <int MRMAX, int NVMAX, int W, typename Pick>
void gemm_driver(int M, int N, int K, float alpha, const float* A, int64_t lda, bool ta,
                 const float* B, int64_t ldb, float beta, float* C, int64_t ldc, Tri tri,
                 Pick pick) {
  constexpr int NB = NVMAX * W;
  for (int j0 = 0; j0 < N; j0 += NB) {
    const int nc = std::min(NB, N - j0);
    for (int i0 = 0; i0 < M; i0 += MRMAX) {
      const int mr = std::min(MRMAX, M - i0);
      const int kk = tri == Tri::kALower ? std::min(K, i0 + mr) : K;
      int ncols = nc;
      if (tri == Tri::kCLower) {
        ncols = std::min(nc, i0 + mr - j0);
        if (ncols <= 0) continue;
      }
      const int nv = (ncols + W - 1) / W;
      const int last = ncols - (nv - 1) * W;
      const float* a = ta ? A + i0 : A + int64_t(i0) * lda;
      pick(mr, nv, last)(kk, a, lda, B + j0, ldb, C + int64_t(i0) * ldc + j0, ldc, alpha, beta,
                         last);
    }
  }
}

bool cpu_has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

std::atomic<int> g_isa{int(Isa::kAuto)};

}  // namespace

void set_isa(Isa isa) { g_isa.store(int(isa)); }

Isa active_isa() {
  const Isa want = Isa(g_isa.load(std::memory_order_relaxed));
  if (want == Isa::kGeneric) return Isa::kGeneric;
  return cpu_has_avx512() ? Isa::kAvx512 : Isa::kGeneric;
}

void small_gemm(int M, int N, int K, float alpha, const float* A, int64_t lda, bool trans_a,
                const float* B, int64_t ldb, float beta, float* C, int64_t ldc, Tri tri) {
  if (M <= 0 || N <= 0) return;
  if (active_isa() == Isa::kAvx512) {
    const auto& tab = trans_a ? kTab512T : kTab512N;
    gemm_driver<kMr512, kNv512, 16>(M, N, K, alpha, A, lda, trans_a, B, ldb, beta, C, ldc, tri,
                                    [&](int mr, int nv, int) { return tab[(mr - 1) * kNv512 + nv - 1]; });
  } else {
    gemm_driver<kMrGen, kNvGen, kWGen>(
        M, N, K, alpha, A, lda, trans_a, B, ldb, beta, C, ldc, tri, [&](int mr, int nv, int last) {
          const bool masked = last < kWGen;
          const auto& tab = trans_a ? (masked ? kTabGenTM : kTabGenT) : (masked ? kTabGenNM : kTabGenN);
          return tab[(mr - 1) * kNvGen + nv - 1];
        });
  }
}

// ---------------------------------------------------------------------------------------
// Chunk scratch. Sub-buffers (floats, each rounded up to 16 for 64-byte alignment):
//   G (double), eG, eGC, beta, tmp : kChunk each    gates and decays of the chunk
//   KT   [dk, C]        Kᵀ of the chunk (B operand of K·Kᵀ and Q·Kᵀ)
//   KK   [C, C]         K·Kᵀ (lower; shared by the heads of a group)
//   QK   [C, C]         Q·Kᵀ (lower; shared)
//   M    [C, C]         M (strictly lower), per head
//   Aqk  [C, C]         A_qk (lower incl. diagonal, zeros above), per head
//   Tm   [C, C]         (I + M)^{-1}
//   R    [C, dk+width]  [β e^G K | β V]
//   WU   [C, dk+width]  [W | U], U becomes V_new
//   X    [C, dk]        Q ⊙ e^G, then K ⊙ e^{G_C − G}
namespace {
constexpr int64_t rup16(int64_t n) { return (n + 15) & ~int64_t(15); }
}  // namespace

int64_t ChunkScratch::floats_needed(int dk, int width) {
  constexpr int64_t C = kChunk;
  return 6 * rup16(C) + rup16(int64_t(dk) * C) + 5 * rup16(C * C) +
         2 * rup16(C * (int64_t(dk) + width)) + rup16(C * int64_t(dk));
}

ChunkScratch::~ChunkScratch() { std::free(buf); }

void ChunkScratch::ensure(int dk, int width) {
  const int64_t need = floats_needed(dk, width);
  if (need <= cap) return;
  std::free(buf);
  buf = static_cast<float*>(std::aligned_alloc(64, size_t(need) * sizeof(float)));
  HYPIC_CHECK(buf != nullptr, "gated delta scratch allocation failed");
  cap = need;
}

void run_group_chunks(int dk, int width, int nh, const HeadSeq* seqs, float* const* states,
                      ChunkScratch& ws) {
  constexpr int C = kChunk;
  HYPIC_CHECK(nh >= 1 && dk > 0 && width > 0);
  const HeadSeq& s0 = seqs[0];
  for (int h = 0; h < nh; ++h) {
    const HeadSeq& s = seqs[h];
    HYPIC_CHECK(s.L == s0.L && s.k == s0.k && s.k_ld == s0.k_ld && s.q == s0.q &&
                    s.q_ld == s0.q_ld && (s.q == nullptr || s.out != nullptr),
                "heads of a group share q and k");
    HYPIC_CHECK(s.v_cols >= 0 && s.v_cols <= width);
  }
  ws.ensure(dk, width);
  float* p = ws.buf;
  auto take = [&p](int64_t n) { float* r = p; p += rup16(n); return r; };
  double* G = reinterpret_cast<double*>(take(2 * C));
  float* eG = take(C);
  float* eGC = take(C);
  float* bet = take(C);
  float* tmp = take(C);
  float* KT = take(int64_t(dk) * C);
  float* KK = take(C * C);
  float* QK = take(C * C);
  float* Mx = take(C * C);
  float* Aqk = take(C * C);
  float* Tm = take(C * C);
  const int RW = dk + width;
  float* R = take(int64_t(C) * RW);
  float* WU = take(int64_t(C) * RW);
  float* X = take(int64_t(C) * dk);
  float* const Wm = WU;      // W  [n, dk]    ld RW
  float* const U = WU + dk;  // U → V_new [n, width], ld RW

  for (int t0 = 0; t0 < s0.L; t0 += C) {
    // A short tail chunk is processed with its n real rows. That is exactly the zero
    // padding of SPEC §2 (k = v = g = β = 0 rows, A_t = I): padded rows would only add
    // exact zeros to every product and to the state.
    const int n = std::min(C, s0.L - t0);
    const float* Kr = s0.k + int64_t(t0) * s0.k_ld;
    const float* Qr = s0.q ? s0.q + int64_t(t0) * s0.q_ld : nullptr;

    // --- step 1a (shared by the group): K·Kᵀ and Q·Kᵀ, lower triangles.
    transpose(n, dk, Kr, s0.k_ld, KT, C);
    small_gemm(n, n, dk, 1.0f, Kr, s0.k_ld, false, KT, C, 0.0f, KK, C, Tri::kCLower);
    if (Qr) small_gemm(n, n, dk, 1.0f, Qr, s0.q_ld, false, KT, C, 0.0f, QK, C, Tri::kCLower);

    for (int h = 0; h < nh; ++h) {
      const HeadSeq& s = seqs[h];
      float* S = states[h];
      const int vc = s.v_cols;
      const float* Vr = s.v + int64_t(t0) * s.v_ld;

      // --- gate stage: G = cumsum(g) inside the chunk, e^{G}, e^{G_C − G}.
      // (Per-channel gates, KDA, replace these scalars by [n, dk] arrays.)
      // G is accumulated in double: with strongly negative gates |G| reaches hundreds, and
      // in fp32 G_i − G_j would carry an absolute error ~|G|·ε, i.e. a relative error of
      // that size in e^{G_i−G_j} even when G_i ≈ G_j. In double the differences are exact
      // to fp32.
      {
        double acc = 0.0;
        for (int i = 0; i < n; ++i) {
          acc += double(s.g[int64_t(t0 + i) * s.g_ld]);
          G[i] = acc;
          bet[i] = s.beta[int64_t(t0 + i) * s.beta_ld];
        }
        const double GC = G[n - 1];
        for (int i = 0; i < n; ++i) {
          eG[i] = float(G[i]);
          eGC[i] = float(GC - G[i]);
        }
        exp_array(eG, eG, n);
        exp_array(eGC, eGC, n);
      }
      const float chunk_decay = eG[n - 1];

      // --- step 1b: M = β_i (k_i·k_j) e^{G_i−G_j} (i > j), A_qk = (q_i·k_j) e^{G_i−G_j} (i ≥ j).
      for (int i = 0; i < n; ++i) {
        const double Gi = G[i];
        for (int j = 0; j < i; ++j) tmp[j] = float(Gi - G[j]);
        exp_array(tmp, tmp, i);  // pairwise e^{G_i − G_j}, never e^{G_i}·e^{−G_j}
        const float* kkrow = KK + int64_t(i) * C;
        float* mrow = Mx + int64_t(i) * C;
        const float bi = bet[i];
        for (int j = 0; j < i; ++j) mrow[j] = kkrow[j] * (bi * tmp[j]);
        if (Qr) {
          const float* qkrow = QK + int64_t(i) * C;
          float* arow = Aqk + int64_t(i) * C;  // diagonal kept (e^0 = 1), zeros above
          for (int j = 0; j < i; ++j) arow[j] = qkrow[j] * tmp[j];
          arow[i] = qkrow[i];
          for (int j = i + 1; j < n; ++j) arow[j] = 0.0f;
        }
      }

      // --- step 2: Tm = (I + M)^{-1} (forward substitution).
      unit_lower_inverse(n, Mx, Tm);

      // --- step 3: [W | U] = Tm · [β e^G K | β V].
      for (int i = 0; i < n; ++i) {
        float* rrow = R + int64_t(i) * RW;
        const float* krow = Kr + int64_t(i) * s0.k_ld;
        const float* vrow = Vr + int64_t(i) * s.v_ld;
        const float a = bet[i] * eG[i], b = bet[i];
#pragma omp simd
        for (int d = 0; d < dk; ++d) rrow[d] = a * krow[d];
#pragma omp simd
        for (int c = 0; c < vc; ++c) rrow[dk + c] = b * vrow[c];
      }
      small_gemm(n, dk + vc, n, 1.0f, Tm, C, false, R, RW, 0.0f, WU, RW, Tri::kALower);
      if (vc < width)
        for (int i = 0; i < n; ++i)
          std::fill(U + int64_t(i) * RW + vc, U + int64_t(i) * RW + width, 0.0f);

      // --- step 4: V_new = U − W·S (in place in U).
      small_gemm(n, width, dk, -1.0f, Wm, RW, false, S, width, 1.0f, U, RW);

      // --- step 5: O = (Q ⊙ e^G)·S + A_qk·V_new.
      if (Qr) {
        float* O = s.out + int64_t(t0) * s.out_ld;
        for (int i = 0; i < n; ++i) {
          const float* qrow = Qr + int64_t(i) * s0.q_ld;
          float* xrow = X + int64_t(i) * dk;
          const float e = eG[i];
#pragma omp simd
          for (int d = 0; d < dk; ++d) xrow[d] = qrow[d] * e;
        }
        small_gemm(n, width, dk, 1.0f, X, dk, false, S, width, 0.0f, O, s.out_ld);
        small_gemm(n, width, n, 1.0f, Aqk, C, false, U, RW, 1.0f, O, s.out_ld, Tri::kALower);
      }

      // --- step 6: S ← e^{G_C}·S + (K ⊙ e^{G_C − G})ᵀ·V_new.
      for (int i = 0; i < n; ++i) {
        const float* krow = Kr + int64_t(i) * s0.k_ld;
        float* xrow = X + int64_t(i) * dk;
        const float e = eGC[i];
#pragma omp simd
        for (int d = 0; d < dk; ++d) xrow[d] = krow[d] * e;
      }
      small_gemm(dk, width, n, 1.0f, X, dk, true, U, RW, chunk_decay, S, width);
    }
  }
}

void run_head_chunks(int dk, int width, const HeadSeq& s, float* state, ChunkScratch& ws) {
  run_group_chunks(dk, width, 1, &s, &state, ws);
}

}  // namespace gdn_detail

// ---------------------------------------------------------------------------------------
namespace {
void check_dims(const GdnDims& d) {
  HYPIC_CHECK(d.nk > 0 && d.nv > 0 && d.dk > 0 && d.dv > 0, "bad GdnDims");
  HYPIC_CHECK(d.nv % d.nk == 0, "nv must be a multiple of nk");
}
}  // namespace

void gdn_prefill(const GdnDims& d, int L, const float* q, const float* k, const float* v,
                 const float* g, const float* beta, float* state, float* out) {
  check_dims(d);
  HYPIC_CHECK(L >= 1, "gdn_prefill needs L >= 1");
  const int rep = d.nv / d.nk;
  // The rep value heads of a key head share K·Kᵀ and Q·Kᵀ; one task per key head computes
  // those once per chunk. With fewer key heads than threads, one task per value head.
  const int group = (rep > 1 && d.nk >= num_threads()) ? rep : 1;
  parallel_for(d.nv / group, [&](int64_t task) {
    thread_local gdn_detail::ChunkScratch ws;
    constexpr int kMaxGroup = 16;
    gdn_detail::HeadSeq seqs[kMaxGroup];
    float* states[kMaxGroup];
    const int h0 = int(task) * group;
    const int hk = h0 / rep;
    for (int h = h0; h < h0 + group;) {
      const int nh = std::min(kMaxGroup, h0 + group - h);
      for (int i = 0; i < nh; ++i) {
        gdn_detail::HeadSeq& s = seqs[i];
        const int64_t hv = h + i;
        s.L = L;
        s.q = q + int64_t(hk) * d.dk;
        s.q_ld = int64_t(d.nk) * d.dk;
        s.k = k + int64_t(hk) * d.dk;
        s.k_ld = int64_t(d.nk) * d.dk;
        s.v = v + hv * d.dv;
        s.v_ld = int64_t(d.nv) * d.dv;
        s.v_cols = d.dv;
        s.g = g + hv;
        s.g_ld = d.nv;
        s.beta = beta + hv;
        s.beta_ld = d.nv;
        s.out = out + hv * d.dv;
        s.out_ld = int64_t(d.nv) * d.dv;
        states[i] = state + hv * d.dk * d.dv;
      }
      gdn_detail::run_group_chunks(d.dk, d.dv, nh, seqs, states, ws);
      h += nh;
    }
  });
}

void gdn_step(const GdnDims& d, int B, const float* q, const float* k, const float* v,
              const float* g, const float* beta, float* const* states, float* out) {
  check_dims(d);
  const int rep = d.nv / d.nk;
  const int dk = d.dk, dv = d.dv;
  auto one = [&](int64_t idx) {
    thread_local std::vector<float> tmp;
    if (int(tmp.size()) < dv) tmp.resize(size_t(dv));
    const int64_t b = idx / d.nv;
    const int h = int(idx % d.nv), hk = h / rep;
    const float* qv = q + (b * d.nk + hk) * dk;
    const float* kv = k + (b * d.nk + hk) * dk;
    const float* vv = v + idx * dv;
    float* S = states[b] + int64_t(h) * dk * dv;
    float* o = out + idx * dv;
    const float decay = std::exp(g[idx]), bt = beta[idx];
    float* delta = tmp.data();
    // Column blocks of the state small enough for L1 ([dk × 64] = 32 KiB at dk = 128), so
    // the second pass over a block hits L1 and the state streams through memory once.
    auto block = [&](int j0, auto width) {
      const int w = width;  // compile-time 64 for full blocks: fixed-trip vector loops
      float* dl = delta + j0;
      float* ob = o + j0;
      // Sᵀk of the old state; the decayed state's read is e^g·(Sᵀk).
      std::fill(dl, dl + w, 0.0f);
      for (int i = 0; i < dk; ++i) {
        const float ki = kv[i];
        const float* row = S + int64_t(i) * dv + j0;
#pragma omp simd
        for (int j = 0; j < w; ++j) dl[j] += ki * row[j];
      }
#pragma omp simd
      for (int j = 0; j < w; ++j) dl[j] = bt * (vv[j0 + j] - decay * dl[j]);
      // S ← e^g·S + k δᵀ, and o = S_newᵀ q in the same pass.
      std::fill(ob, ob + w, 0.0f);
      for (int i = 0; i < dk; ++i) {
        const float ki = kv[i], qi = qv[i];
        float* row = S + int64_t(i) * dv + j0;
#pragma omp simd
        for (int j = 0; j < w; ++j) {
          const float x = decay * row[j] + ki * dl[j];
          row[j] = x;
          ob[j] += qi * x;
        }
      }
    };
    constexpr int kCols = 64;
    int j0 = 0;
    for (; j0 + kCols <= dv; j0 += kCols) block(j0, std::integral_constant<int, kCols>{});
    if (j0 < dv) block(j0, dv - j0);
  };
  // A step is ~1 µs per 16 K state entries; below ~256 KiB of state in all a parallel region
  // (and its barrier) costs more than it saves.
  const int64_t tasks = int64_t(B) * d.nv;
  if (tasks * dk * dv < (int64_t(1) << 16)) {
    for (int64_t i = 0; i < tasks; ++i) one(i);
  } else {
    parallel_for(tasks, one);
  }
}

double gdn_prefill_flops(const GdnDims& d, int L) {
  const double dk = d.dk, dv = d.dv;
  auto chunk = [&](int ni) {  // one chunk of ni tokens, one value head
    const double n = ni;
    const double tri_strict = n * (n - 1) / 2, tri = n * (n + 1) / 2;
    double inv = 0;  // Σ_i Σ_{j<i} 2(j+1)
    for (int j = 0; j + 1 < ni; ++j) inv += 2.0 * (j + 1) * (n - 1 - j);
    return tri_strict * 2 * dk + tri * 2 * dk + inv + tri * 2 * (dk + dv) + 3 * 2 * n * dk * dv +
           tri * 2 * dv;
  };
  const int full = L / gdn_detail::kChunk, tail = L % gdn_detail::kChunk;
  return (full * chunk(gdn_detail::kChunk) + (tail ? chunk(tail) : 0.0)) * d.nv;
}

}  // namespace hypic::kernels
