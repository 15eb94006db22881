// Eight fp32 lanes as one value on every build architecture: a __m256 on x86-64 (the AVX2 +
// FMA baseline), two float32x4_t on aarch64 (NEON, in every ARMv8 CPU). For the elementwise
// kernels whose arithmetic is the same on both (fused multiply-adds, IEEE min / max of
// non-NaN values, round toward −∞): they give the same bits on both architectures, except
// where a NaN meets min / max. Internal to the kernels layer.
#pragma once

#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace hypic::kernels::v8 {

#if defined(__x86_64__)
struct F {
  __m256 v;
};
struct I {  // 8 int32 lanes
  __m256i v;
};
inline F load(const float* p) { return {_mm256_loadu_ps(p)}; }
inline void store(float* p, F a) { _mm256_storeu_ps(p, a.v); }
inline F set1(float x) { return {_mm256_set1_ps(x)}; }
inline F add(F a, F b) { return {_mm256_add_ps(a.v, b.v)}; }
inline F sub(F a, F b) { return {_mm256_sub_ps(a.v, b.v)}; }
inline F mul(F a, F b) { return {_mm256_mul_ps(a.v, b.v)}; }
inline F div(F a, F b) { return {_mm256_div_ps(a.v, b.v)}; }
inline F fmadd(F a, F b, F c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }    // a·b + c
inline F fnmadd(F a, F b, F c) { return {_mm256_fnmadd_ps(a.v, b.v, c.v)}; }  // c − a·b
inline F min(F a, F b) { return {_mm256_min_ps(a.v, b.v)}; }
inline F max(F a, F b) { return {_mm256_max_ps(a.v, b.v)}; }
inline F floor(F a) { return {_mm256_floor_ps(a.v)}; }
inline I trunc_i32(F a) { return {_mm256_cvttps_epi32(a.v)}; }
// 2^n for integer lanes n in [−126, 127]: the exponent field.
inline F pow2(I n) {
  return {_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n.v, _mm256_set1_epi32(127)), 23))};
}
// a where x ≥ lo (or x is NaN), else 0.
inline F zero_below(F a, F x, F lo) { return {_mm256_andnot_ps(_mm256_cmp_ps(x.v, lo.v, _CMP_LT_OQ), a.v)}; }
inline float hsum(F a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
  s = _mm_hadd_ps(s, s);
  s = _mm_hadd_ps(s, s);
  return _mm_cvtss_f32(s);
}
#elif defined(__aarch64__)
struct F {
  float32x4_t lo, hi;
};
struct I {
  int32x4_t lo, hi;
};
inline F load(const float* p) { return {vld1q_f32(p), vld1q_f32(p + 4)}; }
inline void store(float* p, F a) {
  vst1q_f32(p, a.lo);
  vst1q_f32(p + 4, a.hi);
}
inline F set1(float x) { return {vdupq_n_f32(x), vdupq_n_f32(x)}; }
inline F add(F a, F b) { return {vaddq_f32(a.lo, b.lo), vaddq_f32(a.hi, b.hi)}; }
inline F sub(F a, F b) { return {vsubq_f32(a.lo, b.lo), vsubq_f32(a.hi, b.hi)}; }
inline F mul(F a, F b) { return {vmulq_f32(a.lo, b.lo), vmulq_f32(a.hi, b.hi)}; }
inline F div(F a, F b) { return {vdivq_f32(a.lo, b.lo), vdivq_f32(a.hi, b.hi)}; }
inline F fmadd(F a, F b, F c) { return {vfmaq_f32(c.lo, a.lo, b.lo), vfmaq_f32(c.hi, a.hi, b.hi)}; }
inline F fnmadd(F a, F b, F c) { return {vfmsq_f32(c.lo, a.lo, b.lo), vfmsq_f32(c.hi, a.hi, b.hi)}; }
inline F min(F a, F b) { return {vminq_f32(a.lo, b.lo), vminq_f32(a.hi, b.hi)}; }
inline F max(F a, F b) { return {vmaxq_f32(a.lo, b.lo), vmaxq_f32(a.hi, b.hi)}; }
inline F floor(F a) { return {vrndmq_f32(a.lo), vrndmq_f32(a.hi)}; }
inline I trunc_i32(F a) { return {vcvtq_s32_f32(a.lo), vcvtq_s32_f32(a.hi)}; }
inline F pow2(I n) {
  const int32x4_t b = vdupq_n_s32(127);
  return {vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n.lo, b), 23)),
          vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n.hi, b), 23))};
}
inline F zero_below(F a, F x, F lo) {
  return {vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(a.lo), vcltq_f32(x.lo, lo.lo))),
          vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(a.hi), vcltq_f32(x.hi, lo.hi)))};
}
inline float hsum(F a) { return vaddvq_f32(vaddq_f32(a.lo, a.hi)); }
#endif

inline F zero() { return set1(0.0f); }

}  // namespace hypic::kernels::v8
