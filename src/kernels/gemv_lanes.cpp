// The AMX int8 kernels' arithmetic on AVX-512 registers, for the few activation rows where the
// tiles' fixed cost per block (one store of C per block of 32) outweighs their throughput.
// Lanes are 16 weight rows: register q holds dword q of every row (Q8: a block of 16 rows × 64
// bytes transposed; Q4T: as stored, core/quant.h); each row's codes per block of 32 give one
// exact int32 dot product, scaled into fp32 as the tiles' results are. So rows() and
// rows_lanes() give bit-identical results (tested) and a decode batch may move between them.
// (Not for bf16: tdpbf16ps sums a chunk in an order of its own that no vdpbf16ps sequence
// reproduced.) Without AMX, Q4T runs here for every row count.
#if defined(__x86_64__)  // x86-64 kernels only (core/cpu.h's tiers)
#include "kernels/gemv_amx.h"

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/status.h"
#include "kernels/q4t_zmm.h"

#define HYPIC_LANES_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx512vnni,f16c")))

namespace hypic::kernels::amx {
namespace {

// r[i] = row i (16 dwords) → r[q] = dword q of rows 0..15.
// The first two steps of a dword transpose within 128-bit lanes, in place on N registers:
// after it r[4b + j] holds, in 128-bit lane L, dword 4L + j of registers 4b .. 4b + 3.
template <int N>
HYPIC_LANES_TARGET inline void interleave4(__m512i (&r)[N]) {
  __m512i t[N];
  for (int i = 0; i < N; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int b = 0; b < N; b += 4) {
    r[b] = _mm512_unpacklo_epi64(t[b], t[b + 2]);
    r[b + 1] = _mm512_unpackhi_epi64(t[b], t[b + 2]);
    r[b + 2] = _mm512_unpacklo_epi64(t[b + 1], t[b + 3]);
    r[b + 3] = _mm512_unpackhi_epi64(t[b + 1], t[b + 3]);
  }
}

HYPIC_LANES_TARGET inline void transpose16(__m512i (&r)[16]) {
  interleave4(r);  // then lane L of r[4b + j] → lane b of out[4L + j]
  __m512i out[16];
  for (int j = 0; j < 4; ++j) {
    const __m512i v0 = _mm512_shuffle_i32x4(r[j], r[4 + j], 0x44);
    const __m512i v1 = _mm512_shuffle_i32x4(r[j], r[4 + j], 0xEE);
    const __m512i w0 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0x44);
    const __m512i w1 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0xEE);
    out[j] = _mm512_shuffle_i32x4(v0, w0, 0x88);
    out[4 + j] = _mm512_shuffle_i32x4(v0, w0, 0xDD);
    out[8 + j] = _mm512_shuffle_i32x4(v1, w1, 0x88);
    out[12 + j] = _mm512_shuffle_i32x4(v1, w1, 0xDD);
  }
  std::copy(out, out + 16, r);
}

// Dword q of chunk / block c of activation row m in X's B layout (rows_per: 16 for bf16
// chunks, 8 for int8 blocks).
inline int32_t xword(const X& x, int64_t c, int rows_per, int q, int64_t m) {
  int32_t v;
  std::memcpy(&v, x.b.data() + size_t(((c * rows_per + q) * x.mp + m) * 4), 4);
  return v;
}

// 16 rows from w (`ws` apart; rows ≥ valid read row 0) × M ≤ 4 activation rows; per 64 bytes
// of codes (blocks 2c and 2c + 1) the 16 rows' codes in natural order.
template <int M>
HYPIC_LANES_TARGET void q8_lanes(const uint8_t* w, size_t ws, int valid, const X& x, size_t pf,
                                 float* out /*[M][16]*/) {
  __m512 acc[M];
  for (int m = 0; m < M; ++m) acc[m] = _mm512_setzero_ps();
  const int64_t ng = x.kp / 32, K = x.K;
  for (int64_t c = 0; c * 2 < ng; ++c) {
    __m512i r[16];
    const int64_t left = K - c * 64;
    const __mmask64 mk = left >= 64 ? ~__mmask64(0) : (__mmask64(1) << left) - 1;
    for (int i = 0; i < 16; ++i)
      r[i] = _mm512_maskz_loadu_epi8(mk, w + size_t(i < valid ? i : 0) * ws + size_t(c) * 64);
    transpose16(r);
    // The same bytes of the next 16 rows.
    for (int i = 0; i < 16; ++i)
      _mm_prefetch(reinterpret_cast<const char*>(w + size_t(i) * ws + size_t(c) * 64 + pf), _MM_HINT_T0);
    for (int h = 0; h < 2 && 2 * c + h < ng; ++h) {
      const int64_t g = 2 * c + h;
      for (int m = 0; m < M; ++m) {
        __m512i dot = _mm512_set1_epi32(x.corr[size_t(g * 16 + m)]);
        for (int q = 0; q < 8; ++q)
          dot = _mm512_dpbusd_epi32(dot, r[h * 8 + q], _mm512_set1_epi32(xword(x, g, 8, q, m)));
        acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_set1_ps(x.dx[size_t(g * 16 + m)]),
                                 acc[m]);
      }
    }
  }
  for (int m = 0; m < M; ++m) _mm512_storeu_ps(out + m * 16, acc[m]);
}

// A kQ4T group of v ≤ 16 rows at w (core/quant.h) × activation rows m0 .. m0 + M − 1 (M ≤ 4):
// block g's four code dwords load with the rows in lanes, and their low / high nibbles are
// the quads d / d + 4 (the codes 4d .. 4d + 3 / 16 + 4d ..) of every row.
// Bytes ahead of a Q4T group's reads that q4t_lanes prefetches (the group is one stream).
// 1,024 × 3,072 matrices in turn (GemvBench copies, 1 row, alternate runs), GB/s: none
// 16.0 / 15.8, 2 KiB 17.2 / 18.7, 4 KiB 16.6 / 17.9, 8 KiB 16.8 / 16.7.
constexpr size_t kQ4TAhead = 2048;

template <int M>
HYPIC_LANES_TARGET void q4t_lanes(const uint8_t* w, int v, const X& x, int m0,
                                  float* out /*[M][16]*/) {
  __m512 acc[M];
  for (int m = 0; m < M; ++m) acc[m] = _mm512_setzero_ps();
  const int64_t ng = x.K / 32;
  const __mmask16 lanes = v >= 16 ? __mmask16(0xffff) : __mmask16((1u << v) - 1);
  const size_t bs = size_t(18 * v);
  for (int64_t g = 0; g < ng; ++g) {
    const uint8_t* p = w + size_t(g) * bs;
    for (size_t o = 0; o < bs; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + kQ4TAhead + o), _MM_HINT_T0);
    __m512i r[8];
    const __m512 dw = q4t_block_zmm(p, v, lanes, r);
    for (int m = 0; m < M; ++m) {
      __m512i dot = _mm512_set1_epi32(x.corr[size_t(g * 16 + m0 + m)]);
      for (int q = 0; q < 8; ++q)
        dot = _mm512_dpbusd_epi32(dot, r[q], _mm512_set1_epi32(xword(x, g, 8, q, m0 + m)));
      const __m512 s = _mm512_mul_ps(dw, _mm512_set1_ps(x.dx[size_t(g * 16 + m0 + m)]));
      acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), s, acc[m]);
    }
  }
  for (int m = 0; m < M; ++m) _mm512_storeu_ps(out + m * 16, acc[m]);
}

template <int M>
void block(const uint8_t* w, size_t ws, int valid, const X& x, size_t pf, int m0, float* out) {
  if (x.t == DType::kQ8) q8_lanes<M>(w, ws, valid, x, pf, out);
  else q4t_lanes<M>(w, valid, x, m0, out);
}

}  // namespace

void rows_lanes(const uint8_t* w, size_t ws, int64_t n0, int64_t n1, const X& x, float* y,
                int64_t ldy, bool accumulate) {
  const int64_t K = x.K;
  alignas(64) float out[4 * 16];
  HYPIC_CHECK(x.t == DType::kQ4T || x.M <= kLanesMaxRows, "rows_lanes: Q8 takes 1..4 rows");
  for (int64_t n = n0; n < n1; n += 16) {
    const int valid = int(std::min<int64_t>(16, n1 - n));
    const uint8_t* wn = w + size_t(n) * ws;
    // The next block of rows: 8, 16, 32, 64 rows ahead read the 248k × 1024 int8 lm_head at
    // 19, 23.6, 23.2, 23.1 GB/s (one row of x, alternate GemvBench runs).
    const size_t pf = 16 * ws;
    // Activation rows 4 at a time (Q4T beyond 4 rows: the group again, from cache).
    for (int m0 = 0; m0 < x.M; m0 += 4) {
      const int mb = int(std::min<int64_t>(4, x.M - m0));
      switch (mb) {
        case 1: block<1>(wn, ws, valid, x, pf, m0, out); break;
        case 2: block<2>(wn, ws, valid, x, pf, m0, out); break;
        case 3: block<3>(wn, ws, valid, x, pf, m0, out); break;
        default: block<4>(wn, ws, valid, x, pf, m0, out); break;
      }
      for (int r = 0; r < valid; ++r) {
        float d = 1.0f;
        if (x.t == DType::kQ8) std::memcpy(&d, wn + size_t(r) * ws + size_t(K), 4);
        for (int m = 0; m < mb; ++m) {
          float& dst = y[(m0 + m) * ldy + n + r];
          const float v = out[m * 16 + r] * d;
          dst = accumulate ? dst + v : v;
        }
      }
    }
  }
}

}  // namespace hypic::kernels::amx
#endif  // __x86_64__
