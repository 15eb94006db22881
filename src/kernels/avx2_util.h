// Helpers of the 256-bit kernels (gemv_avx2.cpp, gemm_avx2.cpp), internal to the kernels layer.
// Those files build for the x86-64-v3 baseline (AVX2, FMA, F16C) and no further, so the
// compiler never emits an instruction of a higher tier; AVX-VNNI's vpdpbusd is written as
// assembly and runs only where the caller checked for it (core/cpu.h).
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace hypic::kernels::avx2 {

// acc + Σ of each dword's 4 products u8 · s8 (AVX-VNNI; no intermediate saturation).
inline __m256i dpbusd(__m256i acc, __m256i u8, __m256i s8) {
  __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u8), "x"(s8));
  return acc;
}

// Lane mask of the first n (clamped to 0..8) dwords.
inline __m256i first_lanes(int64_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(std::clamp<int64_t>(n, 0, 8))), idx);
}

// 32 bytes from p, zero past `left` bytes (never reading past them: a row's end).
inline __m256i load32(const uint8_t* p, int64_t left) {
  if (left >= 32) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  alignas(32) uint8_t buf[32] = {};
  if (left > 0) std::memcpy(buf, p, size_t(left));
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(buf));
}

// The f16 scales of rows 8h .. 8h + 7 of a Q4T group of v rows (core/quant.h: the group's 16
// scales of a block start at s) as fp32; zero past row v.
inline __m256 q4t_scales8(const uint8_t* s, int v, int h) {
  __m128i hs;
  if (v == 16) {
    hs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16 * h));
  } else {
    alignas(16) uint16_t buf[8] = {};
    std::memcpy(buf, s + 16 * h, size_t(2 * std::max(0, std::min(8, v - 8 * h))));
    hs = _mm_load_si128(reinterpret_cast<const __m128i*>(buf));
  }
  return _mm256_cvtph_ps(hs);
}

}  // namespace hypic::kernels::avx2
