// The AMX int8 kernels' arithmetic on AVX-512 registers, for the few activation rows where the
// tiles' fixed cost per block (one store of C per block of 32) outweighs their throughput.
// Lanes are 16 weight rows: a block of 16 rows × 64 bytes is transposed so that register q
// holds dword q of every row; each row's codes per block of 32 give one exact int32 dot
// product, scaled into fp32 as the tiles' results are. So rows() and rows_lanes() give
// bit-identical results (tested) and a decode batch may move between them. (Not for bf16:
// tdpbf16ps sums a chunk in an order of its own that no vdpbf16ps sequence reproduced.)
#include "kernels/gemv_amx.h"

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

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

// Q4 chunk c (blocks 2c, 2c + 1: 32 packed bytes a row; `lone`: only block 2c) of 16 rows →
// r[q] = code quad q (natural order, 16 per chunk) of every row. The packed bytes are
// transposed first (16 rows × 8 dwords), then unpacked: dword d of block b holds in its low
// nibbles the codes of quad d and in its high nibbles those of quad d + 4.
HYPIC_LANES_TARGET inline void q4_codes(const uint8_t* w, size_t ws, int valid, int64_t c,
                                        bool lone, __m512i (&r)[16]) {
  const __mmask8 mk = lone ? 0x0f : 0xff;
  __m512i z[8];
  for (int i = 0; i < 8; ++i) {  // [row i | row i + 8]
    const uint8_t* lo = w + size_t(i < valid ? i : 0) * ws + size_t(c) * 32;
    const uint8_t* hi = w + size_t(i + 8 < valid ? i + 8 : 0) * ws + size_t(c) * 32;
    z[i] = lone ? _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_maskz_loadu_epi32(mk, lo)),
                                     _mm256_maskz_loadu_epi32(mk, hi), 1)
                : _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo))),
                                     _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi)), 1);
  }
  // z[4b + j]: rows 4b..4b+3 (and + 8), 128-bit lanes: dword j, j + 4 (rows + 8: j, j + 4).
  interleave4(z);
  const __m512i even = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0);
  const __m512i odd = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  for (int j = 0; j < 4; ++j) {
    for (int h = 0; h < 2; ++h) {  // packed dword d = j + 4h: block h, quads j and j + 4
      const __m512i p = _mm512_permutex2var_epi64(z[j], h == 0 ? even : odd, z[4 + j]);
      r[8 * h + j] = _mm512_and_si512(p, low4);
      r[8 * h + j + 4] = _mm512_and_si512(_mm512_srli_epi16(p, 4), low4);
    }
  }
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
template <int M, bool Q4>
HYPIC_LANES_TARGET void int8_lanes(const uint8_t* w, size_t ws, int valid, const X& x,
                                   size_t pf, float* out /*[M][16]*/) {
  __m512 acc[M];
  for (int m = 0; m < M; ++m) acc[m] = _mm512_setzero_ps();
  const int64_t ng = x.kp / 32, K = x.K;
  __m512i sc[16];  // Q4: scale dwords (blocks 2c, 2c + 1) of chunks c .. c + 15, rows in lanes
  for (int64_t c = 0; c * 2 < ng; ++c) {
    __m512i r[16];
    if constexpr (Q4) {
      q4_codes(w, ws, valid, c, ng - 2 * c == 1, r);
    } else {
      const int64_t left = K - c * 64;
      const __mmask64 mk = left >= 64 ? ~__mmask64(0) : (__mmask64(1) << left) - 1;
      for (int i = 0; i < 16; ++i)
        r[i] = _mm512_maskz_loadu_epi8(mk, w + size_t(i < valid ? i : 0) * ws + size_t(c) * 64);
      transpose16(r);
    }
    // The same bytes of the next 16 rows (Q4 reads 32 bytes a chunk: every other chunk) and,
    // for Q4, their scales (4 bytes a chunk).
    auto prefetch = [&](size_t off) {
      for (int i = 0; i < 16; ++i)
        _mm_prefetch(reinterpret_cast<const char*>(w + size_t(i) * ws + off + pf), _MM_HINT_T0);
    };
    if (!Q4 || c % 2 == 0) prefetch(size_t(c) * (Q4 ? 32 : 64));
    if (Q4 && c % 16 == 0) prefetch(size_t(K / 2 + 4 * c));
    __m512 dw2[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    if constexpr (Q4) {
      // Per 16 chunks the rows' next 64 bytes of f16 scales, transposed like the codes (a
      // 16-element gather per chunk cost more); bytes past the row's scales read as zero.
      if (c % 16 == 0) {
        const int64_t left = (ng - 2 * c) * 2;
        const __mmask64 mk = left >= 64 ? ~__mmask64(0) : (__mmask64(1) << left) - 1;
        for (int i = 0; i < 16; ++i)
          sc[i] = _mm512_maskz_loadu_epi8(mk, w + size_t(i < valid ? i : 0) * ws + size_t(K / 2 + 4 * c));
        transpose16(sc);
      }
      const __m512i u = sc[c % 16];
      dw2[0] = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(u));
      dw2[1] = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(u, 16)));
    }
    for (int h = 0; h < 2 && 2 * c + h < ng; ++h) {
      const int64_t g = 2 * c + h;
      const __m512 dw = dw2[h];
      for (int m = 0; m < M; ++m) {
        __m512i dot = _mm512_set1_epi32(x.corr[size_t(g * 16 + m)]);
        for (int q = 0; q < 8; ++q)
          dot = _mm512_dpbusd_epi32(dot, r[h * 8 + q], _mm512_set1_epi32(xword(x, g, 8, q, m)));
        const __m512 dx = _mm512_set1_ps(x.dx[size_t(g * 16 + m)]);
        const __m512 s = Q4 ? _mm512_mul_ps(dw, dx) : dx;
        acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), s, acc[m]);
      }
    }
  }
  for (int m = 0; m < M; ++m) _mm512_storeu_ps(out + m * 16, acc[m]);
}

template <int M>
void block(const uint8_t* w, size_t ws, int valid, const X& x, size_t pf, float* out) {
  if (x.t == DType::kQ8) int8_lanes<M, false>(w, ws, valid, x, pf, out);
  else int8_lanes<M, true>(w, ws, valid, x, pf, out);
}

}  // namespace

void rows_lanes(const uint8_t* w, size_t ws, int64_t n0, int64_t n1, const X& x, float* y,
                int64_t ldy, bool accumulate) {
  const int64_t K = x.K;
  alignas(64) float out[kLanesMaxRows * 16];
  for (int64_t n = n0; n < n1; n += 16) {
    const int valid = int(std::min<int64_t>(16, n1 - n));
    const uint8_t* wn = w + size_t(n) * ws;
    // The next block of rows: 8, 16, 32, 64 rows ahead read the 248k × 1024 int8 lm_head at
    // 19, 23.6, 23.2, 23.1 GB/s (one row of x, alternate GemvBench runs).
    const size_t pf = 16 * ws;
    switch (x.M) {
      case 1: block<1>(wn, ws, valid, x, pf, out); break;
      case 2: block<2>(wn, ws, valid, x, pf, out); break;
      case 3: block<3>(wn, ws, valid, x, pf, out); break;
      default: block<4>(wn, ws, valid, x, pf, out); break;
    }
    for (int r = 0; r < valid; ++r) {
      float d = 1.0f;
      if (x.t == DType::kQ8) std::memcpy(&d, wn + size_t(r) * ws + size_t(K), 4);
      for (int64_t m = 0; m < x.M; ++m) {
        float& dst = y[m * ldy + n + r];
        const float v = out[m * 16 + r] * d;
        dst = accumulate ? dst + v : v;
      }
    }
  }
}

}  // namespace hypic::kernels::amx
