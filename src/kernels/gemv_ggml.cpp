#include "kernels/gemv_ggml.h"

#include <immintrin.h>

#include <cstring>

#include "core/ggml_quant.h"

namespace hypic::kernels::ggml {
namespace {

constexpr int kMaxRows = 16;  // kGemvMaxRows

// f16 → f32 (F16C: every tier these kernels run on has it, the portable one included — the
// build's x86-64-v3 baseline).
float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// One unit of W (a 32-block, or a K-quant super-block of eight) as signed codes in element
// order and, per 32-block b, the scales of its two 16-element halves and its min term (the
// weight is lo|hi·code − mn).
struct Unit {
  alignas(32) int8_t code[256];
  float lo[8], hi[8], mn[8];
  int blocks;
};

void decode(DType t, const uint8_t* u, Unit& o) {
  switch (t) {
    case DType::kGQ8_0:
      std::memcpy(o.code, u + 2, 32);
      o.lo[0] = o.hi[0] = half(u), o.mn[0] = 0, o.blocks = 1;
      return;
    case DType::kGQ4_0:
      for (int i = 0; i < 16; ++i) {
        o.code[i] = int8_t((u[2 + i] & 0xF) - 8);
        o.code[i + 16] = int8_t((u[2 + i] >> 4) - 8);
      }
      o.lo[0] = o.hi[0] = half(u), o.mn[0] = 0, o.blocks = 1;
      return;
    case DType::kGQ4K:
    case DType::kGQ5K: {
      const bool five = t == DType::kGQ5K;
      const float d = half(u), dmin = half(u + 2);
      const uint8_t* qh = u + 16;
      const uint8_t* ql = u + (five ? 48 : 16);
      for (int j = 0; j < 8; ++j) {
        int sc, m;
        ggml_scale_min_k4(j, u + 4, &sc, &m);
        o.lo[j] = o.hi[j] = d * float(sc), o.mn[j] = dmin * float(m);
        const uint8_t* q = ql + 32 * (j / 2);
        for (int l = 0; l < 32; ++l) {
          int c = j % 2 ? q[l] >> 4 : q[l] & 0xF;
          if (five && (qh[l] >> j & 1)) c += 16;
          o.code[32 * j + l] = int8_t(c);
        }
      }
      o.blocks = 8;
      return;
    }
    case DType::kGQ6K: {
      const int8_t* sc = reinterpret_cast<const int8_t*>(u + 192);
      const float d = half(u + 208);
      for (int n = 0; n < 2; ++n) {
        const uint8_t* ql = u + 64 * n;
        const uint8_t* qh = u + 128 + 32 * n;
        int8_t* c = o.code + 128 * n;
        for (int l = 0; l < 32; ++l) {
          c[l] = int8_t(((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32);
          c[l + 32] = int8_t(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
          c[l + 64] = int8_t(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
          c[l + 96] = int8_t(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
      }
      for (int b = 0; b < 8; ++b) o.lo[b] = d * float(sc[2 * b]), o.hi[b] = d * float(sc[2 * b + 1]), o.mn[b] = 0;
      o.blocks = 8;
      return;
    }
    default: return;
  }
}

// Σ over a 32-block of code·x in 8 int32 lanes (lanes 0–3: elements 0–15).
inline __m256i dot32(__m256i wv, const int8_t* x) {
  const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
  const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(xv, wv));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256i load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// The codes are decoded in registers (decode()'s values) and multiplied at once: a unit's
// codes never pass through memory.
void row_avx2(DType t, const uint8_t* w, int64_t units, int64_t ub, const X& x, int64_t M, float* out) {
  __m256 acc[kMaxRows];
  float corr[kMaxRows] = {};
  for (int64_t m = 0; m < M; ++m) acc[m] = _mm256_setzero_ps();
  const int64_t xblocks = x.kp / 32;
  // Block b (of the row) with codes c, half scales lo / hi and min term mn.
  auto block = [&](int64_t b, __m256i c, float lo, float hi, float mn) {
    const __m256 s = _mm256_set_m128(_mm_set1_ps(hi), _mm_set1_ps(lo));
    for (int64_t m = 0; m < M; ++m) {
      const int64_t xb = m * xblocks + b;
      acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot32(c, x.q + xb * 32)),
                               _mm256_mul_ps(s, _mm256_set1_ps(x.dx[xb])), acc[m]);
      if (mn != 0) corr[m] -= mn * x.dx[xb] * float(x.bsum[xb]);
    }
  };
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int64_t i = 0; i < units; ++i) {
    const uint8_t* u = w + i * ub;
    switch (t) {
      case DType::kGQ8_0: {
        const float d = half(u);
        block(i, load(u + 2), d, d, 0);
        break;
      }
      case DType::kGQ4_0: {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(u + 2));
        const __m128i m4 = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
        const __m128i lo = _mm_sub_epi8(_mm_and_si128(v, m4), eight);
        const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(v, 4), m4), eight);
        const float d = half(u);
        block(i, _mm256_set_m128i(hi, lo), d, d, 0);
        break;
      }
      case DType::kGQ4K:
      case DType::kGQ5K: {
        const bool five = t == DType::kGQ5K;
        const float d = half(u), dmin = half(u + 2);
        const __m256i qh = five ? load(u + 16) : _mm256_setzero_si256();
        const __m256i sixteen = _mm256_set1_epi8(16);
        for (int p = 0; p < 4; ++p) {
          const __m256i v = load(u + (five ? 48 : 16) + 32 * p);
          __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
          if (five) {
            const __m256i b1 = _mm256_set1_epi8(char(1 << (2 * p))), b2 = _mm256_set1_epi8(char(2 << (2 * p)));
            lo = _mm256_add_epi8(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b1), b1), sixteen));
            hi = _mm256_add_epi8(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b2), b2), sixteen));
          }
          int sc, mn;
          ggml_scale_min_k4(2 * p, u + 4, &sc, &mn);
          block(8 * i + 2 * p, lo, d * float(sc), d * float(sc), dmin * float(mn));
          ggml_scale_min_k4(2 * p + 1, u + 4, &sc, &mn);
          block(8 * i + 2 * p + 1, hi, d * float(sc), d * float(sc), dmin * float(mn));
        }
        break;
      }
      case DType::kGQ6K: {
        const int8_t* sc = reinterpret_cast<const int8_t*>(u + 192);
        const float d = half(u + 208);
        const __m256i three = _mm256_set1_epi8(3), off = _mm256_set1_epi8(32);
        for (int n = 0; n < 2; ++n) {
          const __m256i a = load(u + 64 * n), b = load(u + 64 * n + 32), h = load(u + 128 + 32 * n);
          auto bits = [&](int s) {  // ((h >> s) & 3) << 4
            return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, s), three), 4);
          };
          const __m256i c[4] = {
              _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(a, low4), bits(0)), off),
              _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(b, low4), bits(2)), off),
              _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), low4), bits(4)), off),
              _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), low4), bits(6)), off)};
          for (int k = 0; k < 4; ++k) {
            const int blk = 4 * n + k;
            block(8 * i + blk, c[k], d * float(sc[2 * blk]), d * float(sc[2 * blk + 1]), 0);
          }
        }
        break;
      }
      default: break;
    }
  }
  for (int64_t m = 0; m < M; ++m) out[m] = hsum(acc[m]) + corr[m];
}

void row_generic(DType t, const uint8_t* w, int64_t units, int64_t ub, const X& x, int64_t M, float* out) {
  float acc[kMaxRows] = {};
  Unit u;
  for (int64_t i = 0; i < units; ++i) {
    decode(t, w + i * ub, u);
    const int64_t b0 = i * u.blocks;
    for (int b = 0; b < u.blocks; ++b)
      for (int64_t m = 0; m < M; ++m) {
        const int64_t xb = m * (x.kp / 32) + b0 + b;
        const int8_t* xq = x.q + xb * 32;
        int32_t lo = 0, hi = 0;
        for (int e = 0; e < 16; ++e) lo += int32_t(u.code[32 * b + e]) * xq[e];
        for (int e = 16; e < 32; ++e) hi += int32_t(u.code[32 * b + e]) * xq[e];
        acc[m] += x.dx[xb] * (u.lo[b] * float(lo) + u.hi[b] * float(hi) - u.mn[b] * float(x.bsum[xb]));
      }
  }
  for (int64_t m = 0; m < M; ++m) out[m] = acc[m];
}

}  // namespace

void rows(DType t, const uint8_t* w, size_t ws, int64_t n0, int64_t n1, int64_t K, const X& x,
          int64_t M, float* y, int64_t ldy, bool accumulate, bool avx2) {
  const int64_t ue = ggml_block_elems(t), ub = ggml_block_bytes(t), units = K / ue;
  float out[kMaxRows];
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* r = w + size_t(n) * ws;
    if (n + 2 < n1) _mm_prefetch(reinterpret_cast<const char*>(r + 2 * ws), _MM_HINT_T0);
    if (avx2) row_avx2(t, r, units, ub, x, M, out);
    else row_generic(t, r, units, ub, x, M, out);
    for (int64_t m = 0; m < M; ++m) {
      float& o = y[m * ldy + n];
      o = accumulate ? o + out[m] : out[m];
    }
  }
}

}  // namespace hypic::kernels::ggml
