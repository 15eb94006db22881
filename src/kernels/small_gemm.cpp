// Small GEMM: see small_gemm.h. One microkernel call computes an mr × (nv·W) tile of C
// over K; the driver tiles C and exploits triangular structure per row block.
#include "kernels/small_gemm.h"

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>

#include <cstring>
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <utility>

#include "core/cpu.h"

namespace hypic::kernels {
namespace {

// Microkernel contract:
//   C = alpha · Σ_p A(i,p) B(p,j) + beta · C   (C not read when beta == 0)
// `last` = valid columns in the last vector (1..W).
using UkFn = void (*)(int K, const float* A, int64_t lda, const float* B, int64_t ldb,
                      float* C, int64_t ldc, float alpha, float beta, int last);

template <bool TA>
inline const float* a_elem(const float* A, int64_t lda, int r, int p) {
  return TA ? A + int64_t(p) * lda + r : A + int64_t(r) * lda + p;
}

// Rows 0..5 of a tile: X(r) for each (the microkernels' named accumulators).
#define GDN_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)

// ---- AVX-512 ----
#if defined(__x86_64__)
constexpr int kMr512 = 6, kNv512 = 4;  // 6 × 64 tile, 24 accumulators

// The accumulators are named variables, not an array: GCC keeps an array of 24 __m512 in
// memory (stores every iteration); named locals stay in registers. Tiles smaller than
// MR × NV simply leave some variables unused (if constexpr), which the compiler drops.
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
#endif

// ---- baseline (x86-64-v3: AVX2 + FMA; aarch64: NEON; scalar elsewhere) ----
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
#elif defined(__aarch64__)
constexpr int kMrGen = 6, kNvGen = 4, kWGen = 4;  // 6 × 16 tile, 24 of the 32 vector registers

// The first n (1..4) floats at p, zeros after (never reading past them); and their store.
inline float32x4_t load_part(const float* p, int n) {
  float t[4] = {};
  std::memcpy(t, p, size_t(n) * 4);
  return vld1q_f32(t);
}
inline void store_part(float* p, float32x4_t v, int n) {
  float t[4];
  vst1q_f32(t, v);
  std::memcpy(p, t, size_t(n) * 4);
}

#define GDN_DECLNEON(r) \
  float32x4_t c##r##0 = vdupq_n_f32(0.0f), c##r##1 = c##r##0, c##r##2 = c##r##0, c##r##3 = c##r##0;
#define GDN_FMANEON(r)                                             \
  if constexpr (MR > r) {                                          \
    const float a = *a_elem<TA>(A, lda, r, p);                     \
    c##r##0 = vfmaq_n_f32(c##r##0, b0, a);                         \
    if constexpr (NV > 1) c##r##1 = vfmaq_n_f32(c##r##1, b1, a);   \
    if constexpr (NV > 2) c##r##2 = vfmaq_n_f32(c##r##2, b2, a);   \
    if constexpr (NV > 3) c##r##3 = vfmaq_n_f32(c##r##3, b3, a);   \
  }
#define GDN_STORENEON(r)                                 \
  if constexpr (MR > r) {                                \
    float* c = C + int64_t(r) * ldc;                     \
    st(c, c##r##0, NV == 1);                             \
    if constexpr (NV > 1) st(c + 4, c##r##1, NV == 2);   \
    if constexpr (NV > 2) st(c + 8, c##r##2, NV == 3);   \
    if constexpr (NV > 3) st(c + 12, c##r##3, true);     \
  }

// Named accumulators, as on x86 (an array of vectors may be kept in memory).
template <int MR, int NV, bool TA, bool MASKED>
void uk_avx2(int K, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
             int64_t ldc, float alpha, float beta, int last) {
  static_assert(MR >= 1 && MR <= 6 && NV >= 1 && NV <= 4);
  auto ld = [&](const float* b, bool is_last) { return MASKED && is_last ? load_part(b, last) : vld1q_f32(b); };
  GDN_ROWS(GDN_DECLNEON)
  for (int p = 0; p < K; ++p) {
    const float* b = B + int64_t(p) * ldb;
    float32x4_t b0, b1, b2, b3;
    b0 = ld(b, NV == 1);
    if constexpr (NV > 1) b1 = ld(b + 4, NV == 2);
    if constexpr (NV > 2) b2 = ld(b + 8, NV == 3);
    if constexpr (NV > 3) b3 = ld(b + 12, true);
    GDN_ROWS(GDN_FMANEON)
  }
  auto st = [&](float* c, float32x4_t acc, bool is_last) {
    const bool part = MASKED && is_last;
    float32x4_t x = vmulq_n_f32(acc, alpha);
    if (beta != 0.0f) x = vfmaq_n_f32(x, part ? load_part(c, last) : vld1q_f32(c), beta);
    if (part) store_part(c, x, last);
    else vst1q_f32(c, x);
  };
  GDN_ROWS(GDN_STORENEON)
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
#if defined(__x86_64__)
  return cpu::has(cpu::kAvx512F);
#else
  return false;
#endif
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
#if defined(__x86_64__)
  if (active_isa() == Isa::kAvx512) {
    const auto& tab = trans_a ? kTab512T : kTab512N;
    gemm_driver<kMr512, kNv512, 16>(M, N, K, alpha, A, lda, trans_a, B, ldb, beta, C, ldc, tri,
                                    [&](int mr, int nv, int) { return tab[(mr - 1) * kNv512 + nv - 1]; });
    return;
  }
#endif
  {
    gemm_driver<kMrGen, kNvGen, kWGen>(
        M, N, K, alpha, A, lda, trans_a, B, ldb, beta, C, ldc, tri, [&](int mr, int nv, int last) {
          const bool masked = last < kWGen;
          const auto& tab = trans_a ? (masked ? kTabGenTM : kTabGenT) : (masked ? kTabGenNM : kTabGenN);
          return tab[(mr - 1) * kNvGen + nv - 1];
        });
  }
}

}  // namespace hypic::kernels
