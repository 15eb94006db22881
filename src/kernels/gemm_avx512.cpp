#if defined(__x86_64__)  // x86-64 kernels only (core/cpu.h's tiers)
#include "kernels/gemm_avx512.h"

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/q4t_zmm.h"

#define HYPIC_AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c")))

namespace hypic::kernels::avx512 {
namespace {

using avx2::QuantRows;

// Dword q (codes 4q .. 4q + 3) of block g of x's row m, broadcast.
HYPIC_AVX512_TARGET inline __m512i xword(const QuantRows& x, int64_t m, int64_t g, int q) {
  int32_t v;
  std::memcpy(&v, x.q.data() + m * x.kp + g * 32 + 4 * q, 4);
  return _mm512_set1_epi32(v);
}

// A Q4T group of v ≤ 16 rows at w × x rows m0 .. m0 + MB − 1 into out [MB][16]: per block, the
// rows' codes in lanes (q4t_block_zmm).
template <int MB>
HYPIC_AVX512_TARGET void q4t_group(const uint8_t* w, int v, const QuantRows& x, int64_t m0, float* out) {
  __m512 acc[MB];
  for (int m = 0; m < MB; ++m) acc[m] = _mm512_setzero_ps();
  const __mmask16 lanes = v >= 16 ? __mmask16(0xffff) : __mmask16((1u << v) - 1);
  const size_t bs = size_t(18 * v);
  for (int64_t g = 0; g < x.nb; ++g) {
    __m512i r[8];
    const __m512 dw = q4t_block_zmm(w + size_t(g) * bs, v, lanes, r);
    for (int m = 0; m < MB; ++m) {
      const size_t i = size_t((m0 + m) * x.nb + g);
      __m512i dot = _mm512_set1_epi32(x.corr[i]);
      for (int q = 0; q < 8; ++q) dot = _mm512_dpbusd_epi32(dot, r[q], xword(x, m0 + m, g, q));
      acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dw, _mm512_set1_ps(x.d[i])), acc[m]);
    }
  }
  for (int m = 0; m < MB; ++m) _mm512_storeu_ps(out + m * 16, acc[m]);
}

// Rows m of out [mb][16] (their first v values) into y + m · ldy, or added to it.
HYPIC_AVX512_TARGET void store(const float* out, int mb, float* y, int64_t ldy, int v, bool accumulate) {
  const __mmask16 k = v >= 16 ? __mmask16(0xffff) : __mmask16((1u << v) - 1);
  for (int m = 0; m < mb; ++m) {
    float* dst = y + m * ldy;
    __m512 r = _mm512_loadu_ps(out + m * 16);
    if (accumulate) r = _mm512_add_ps(_mm512_maskz_loadu_ps(k, dst), r);
    _mm512_mask_storeu_ps(dst, k, r);
  }
}

}  // namespace

void q4t_gemm(const uint8_t* w, size_t ws, int64_t n0, int64_t n1, const QuantRows& x, float* y,
              int64_t ldy, bool accumulate) {
  alignas(64) float out[8 * 16];
  for (int64_t t0 = 0; t0 < x.M; t0 += avx2::kRowTile) {  // x's rows a tile at a time (gemm_avx2.h)
    const int64_t t1 = std::min(x.M, t0 + avx2::kRowTile);
    for (int64_t n = n0; n < n1; n += 16) {
      const int v = int(std::min<int64_t>(16, n1 - n));
      const uint8_t* wg = w + size_t(n) * ws;
      for (int64_t m0 = t0; m0 < t1;) {  // 8 rows at a time, the rest 4, 2, 1
        const int64_t left = t1 - m0;
        const int mb = left >= 8 ? 8 : left >= 4 ? 4 : left >= 2 ? 2 : 1;
        switch (mb) {
          case 8: q4t_group<8>(wg, v, x, m0, out); break;
          case 4: q4t_group<4>(wg, v, x, m0, out); break;
          case 2: q4t_group<2>(wg, v, x, m0, out); break;
          default: q4t_group<1>(wg, v, x, m0, out); break;
        }
        store(out, mb, y + m0 * ldy + n, ldy, v, accumulate);
        m0 += mb;
      }
    }
  }
}

}  // namespace hypic::kernels::avx512
#endif  // __x86_64__
