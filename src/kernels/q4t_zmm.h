// One block of a kQ4T group (core/quant.h) in 512-bit registers, for the kernels that hold a
// group's 16 rows in lanes (gemv_lanes.cpp's decode rows, gemm_avx512.cpp's prefill): r[q]
// holds every row's codes 4q .. 4q + 3 of the block (q < 4: the low nibbles of dword q,
// q ≥ 4: the high nibbles of dword q − 4) as unsigned bytes for vpdpbusd; the result is the
// rows' scales. Rows past v (masked out by `lanes`) read as zero. Internal to the kernels layer.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace hypic::kernels {

__attribute__((target("avx512f,avx512bw,avx512vl,f16c"))) inline __m512 q4t_block_zmm(const uint8_t* p, int v,
                                                                                     __mmask16 lanes,
                                                                                     __m512i (&r)[8]) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  for (int d = 0; d < 4; ++d) {
    const __m512i c = _mm512_maskz_loadu_epi32(lanes, p + 4 * d * v);
    r[d] = _mm512_and_si512(c, low4);
    r[d + 4] = _mm512_and_si512(_mm512_srli_epi16(c, 4), low4);
  }
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes, p + 16 * v));
}

}  // namespace hypic::kernels
