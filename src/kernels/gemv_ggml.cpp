#include "kernels/gemv_ggml.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
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

// One unit of W (a 32-block of Q8_0 / Q4_0, or a K-quant super-block) decoded for the
// portable kernel: signed codes in element order, their integer scale per 16 elements, the
// integer min per 32 (Q4_K / Q5_K), and the float factors: w = d·sc·code − dmin·min.
struct Unit {
  int8_t code[256];
  int sc[16], mn[8];
  float d, dmin;
};

void decode(DType t, const uint8_t* u, Unit& o) {
  o.dmin = 0;
  std::fill(o.mn, o.mn + 8, 0);
  switch (t) {
    case DType::kGQ8_0:
      std::memcpy(o.code, u + 2, 32);
      o.d = half(u), o.sc[0] = o.sc[1] = 1;
      return;
    case DType::kGQ4_0:
      for (int i = 0; i < 16; ++i) {
        o.code[i] = int8_t((u[2 + i] & 0xF) - 8);
        o.code[i + 16] = int8_t((u[2 + i] >> 4) - 8);
      }
      o.d = half(u), o.sc[0] = o.sc[1] = 1;
      return;
    case DType::kGQ4K:
    case DType::kGQ5K: {
      const bool five = t == DType::kGQ5K;
      o.d = half(u), o.dmin = half(u + 2);
      const uint8_t* qh = u + 16;
      const uint8_t* ql = u + (five ? 48 : 16);
      for (int j = 0; j < 8; ++j) {
        ggml_scale_min_k4(j, u + 4, &o.sc[2 * j], &o.mn[j]);
        o.sc[2 * j + 1] = o.sc[2 * j];
        const uint8_t* q = ql + 32 * (j / 2);
        for (int l = 0; l < 32; ++l) {
          int c = j % 2 ? q[l] >> 4 : q[l] & 0xF;
          if (five && (qh[l] >> j & 1)) c += 16;
          o.code[32 * j + l] = int8_t(c);
        }
      }
      return;
    }
    case DType::kGQ6K: {
      const int8_t* sc = reinterpret_cast<const int8_t*>(u + 192);
      o.d = half(u + 208);
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
      for (int i = 0; i < 16; ++i) o.sc[i] = sc[i];
      return;
    }
    default: return;
  }
}

void row_generic(DType t, const uint8_t* w, int64_t units, int64_t ub, const X& x, int64_t M, float* out) {
  const int64_t ue = ggml_block_elems(t), groups = x.kp / x.group, blocks = x.kp / 32;
  float acc[kMaxRows] = {};
  Unit u;
  for (int64_t i = 0; i < units; ++i) {
    decode(t, w + i * ub, u);
    for (int64_t m = 0; m < M; ++m) {
      const int8_t* xq = x.q + m * x.kp + i * ue;
      int32_t isum = 0, msum = 0;
      for (int64_t e = 0; e < ue; ++e) isum += int32_t(u.code[e]) * xq[e] * u.sc[e / 16];
      for (int64_t j = 0; j < ue / 32; ++j) msum += u.mn[j] * x.bsum[m * blocks + i * (ue / 32) + j];
      const float dx = x.dx[m * groups + i * ue / x.group];  // one x group per unit (32 / 256)
      acc[m] += dx * (u.d * float(isum) - u.dmin * float(msum));
    }
  }
  for (int64_t m = 0; m < M; ++m) out[m] = acc[m];
}

// Σ of code·x over 32 elements, per pair of elements in 16 int16 lanes (|code| ≤ 32 or
// unsigned ≤ 31 for the K-quants, |x| ≤ 127: no saturation).
inline __m256i pairs(__m256i c, const int8_t* x) {
  const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
  return _mm256_maddubs_epi16(_mm256_sign_epi8(c, c), _mm256_sign_epi8(xv, c));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256i load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// The codes are decoded in registers and multiplied at once. Q8_0 / Q4_0: per block one int32
// dot, scaled in fp32 by d·d_x. K-quants: per super-block (x one group of 256) the sub-blocks'
// pair sums times their integer scales (vpmaddwd) summed in int32, scaled once by d·d_x; the
// mins' Σ m_j·Σx_j in integers, scaled by dmin·d_x.
void row_avx2(DType t, const uint8_t* w, int64_t units, int64_t ub, const X& x, int64_t M, float* out) {
  __m256 acc[kMaxRows], macc[kMaxRows];  // the scaled products, the mins' terms
  for (int64_t m = 0; m < M; ++m) acc[m] = macc[m] = _mm256_setzero_ps();
  const int64_t groups = x.kp / x.group, blocks = x.kp / 32;
  const __m256i low4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  int64_t i = 0;
  if (t == DType::kGQ8_0 || t == DType::kGQ4_0) {
    // Eight 32-blocks at a time: their int32 dots reduced to one vector of 8 block sums,
    // scaled by the 8 weight scales times the 8 x scales. Q4_0's codes are taken unsigned
    // (0..15) and 8·Σx taken off.
    const bool q4 = t == DType::kGQ4_0;
    for (; i + 8 <= units; i += 8) {
      __m256i c[8];
      alignas(16) uint16_t h[8];
      for (int k = 0; k < 8; ++k) {
        const uint8_t* u = w + (i + k) * ub;
        std::memcpy(&h[k], u, 2);
        if (!q4) {
          c[k] = load(u + 2);
        } else {
          const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(u + 2));
          c[k] = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), low4);
        }
      }
      const __m256 dw = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));
      for (int64_t m = 0; m < M; ++m) {
        const int8_t* xq = x.q + m * x.kp + i * 32;
        __m256i s[8];
        for (int k = 0; k < 8; ++k) {
          const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32 * k));
          const __m256i p = q4 ? _mm256_maddubs_epi16(c[k], xv)
                               : _mm256_maddubs_epi16(_mm256_sign_epi8(c[k], c[k]), _mm256_sign_epi8(xv, c[k]));
          s[k] = _mm256_madd_epi16(p, ones);
        }
        // Per 128-bit half: lane k of u0 / u1 = that half's sum of block k (k < 4) / 4 + k.
        const __m256i u0 = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
        const __m256i u1 = _mm256_hadd_epi32(_mm256_hadd_epi32(s[4], s[5]), _mm256_hadd_epi32(s[6], s[7]));
        __m256i sums = _mm256_set_m128i(_mm_add_epi32(_mm256_castsi256_si128(u1), _mm256_extracti128_si256(u1, 1)),
                                        _mm_add_epi32(_mm256_castsi256_si128(u0), _mm256_extracti128_si256(u0, 1)));
        if (q4)
          sums = _mm256_sub_epi32(sums, _mm256_slli_epi32(
                                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsum + m * blocks + i)), 3));
        const __m256 dx = _mm256_loadu_ps(x.dx + m * groups + i);
        acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_mul_ps(dw, dx), acc[m]);
      }
    }
  }
  for (; i < units; ++i) {
    const uint8_t* u = w + i * ub;
    switch (t) {
      case DType::kGQ8_0:
      case DType::kGQ4_0: {
        __m256i c;
        if (t == DType::kGQ8_0) {
          c = load(u + 2);
        } else {
          const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(u + 2));
          const __m128i m4 = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
          c = _mm256_set_m128i(_mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(v, 4), m4), eight),
                               _mm_sub_epi8(_mm_and_si128(v, m4), eight));
        }
        const float d = half(u);
        for (int64_t m = 0; m < M; ++m) {
          const __m256i dot = _mm256_madd_epi16(pairs(c, x.q + m * x.kp + i * 32), ones);
          acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(d * x.dx[m * groups + i]), acc[m]);
        }
        break;
      }
      case DType::kGQ4K:
      case DType::kGQ5K: {
        const bool five = t == DType::kGQ5K;
        const float d = half(u), dmin = half(u + 2);
        // The 8 scales and 8 mins (ggml_scale_min_k4) from the 12 bytes as three words:
        // scales 0–3 = w0 & 63 per byte, mins 0–3 = w1 & 63, scales 4–7 = the low nibbles of
        // w2 with w0's top 2 bits above them, mins 4–7 = w2's high nibbles with w1's top bits.
        uint32_t w0, w1, w2;
        std::memcpy(&w0, u + 4, 4), std::memcpy(&w1, u + 8, 4), std::memcpy(&w2, u + 12, 4);
        const uint32_t six = 0x3f3f3f3fu, nib = 0x0f0f0f0fu, two = 0x03030303u;
        const __m128i scm = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, int((w2 & nib) | ((w0 >> 6) & two) << 4), int(w0 & six)));
        const __m128i mnm = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, int(((w2 >> 4) & nib) | ((w1 >> 6) & two) << 4), int(w1 & six)));
        const __m256i mins = _mm256_cvtepi16_epi32(mnm);
        __m256i c[8], scv[8];
        const __m256i sc2 = _mm256_set_m128i(scm, scm);
        for (int j = 0; j < 8; ++j)  // scale j in every int16 lane
          scv[j] = _mm256_shuffle_epi8(sc2, _mm256_set1_epi16(int16_t(0x0100 * (2 * j + 1) + 2 * j)));
        const __m256i qh = five ? load(u + 16) : _mm256_setzero_si256(), sixteen = _mm256_set1_epi8(16);
        for (int p = 0; p < 4; ++p) {
          const __m256i v = load(u + (five ? 48 : 16) + 32 * p);
          c[2 * p] = _mm256_and_si256(v, low4);
          c[2 * p + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
          if (five) {
            const __m256i b1 = _mm256_set1_epi8(char(1 << (2 * p))), b2 = _mm256_set1_epi8(char(2 << (2 * p)));
            c[2 * p] = _mm256_add_epi8(c[2 * p], _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b1), b1), sixteen));
            c[2 * p + 1] = _mm256_add_epi8(c[2 * p + 1], _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b2), b2), sixteen));
          }
        }
        for (int64_t m = 0; m < M; ++m) {
          const int8_t* xq = x.q + m * x.kp + i * 256;
          __m256i isum = _mm256_setzero_si256();
          for (int j = 0; j < 8; ++j)  // codes are unsigned here: vpmaddubsw takes them as they are
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(
                _mm256_maddubs_epi16(c[j], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + 32 * j))), scv[j]));
          const __m256i msum = _mm256_mullo_epi32(mins, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsum + m * blocks + i * 8)));
          const float dx = x.dx[m * groups + i];
          acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d * dx), acc[m]);
          macc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_set1_ps(dmin * dx), macc[m]);
        }
        break;
      }
      case DType::kGQ6K: {
        const int8_t* sc = reinterpret_cast<const int8_t*>(u + 192);
        const float d = half(u + 208);
        const __m256i three = _mm256_set1_epi8(3), off = _mm256_set1_epi8(32);
        __m256i c[8], s[8];
        for (int n = 0; n < 2; ++n) {
          const __m256i a = load(u + 64 * n), b = load(u + 64 * n + 32), h = load(u + 128 + 32 * n);
          auto bits = [&](int sh) {  // ((h >> sh) & 3) << 4
            return _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, sh), three), 4);
          };
          c[4 * n + 0] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(a, low4), bits(0)), off);
          c[4 * n + 1] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(b, low4), bits(2)), off);
          c[4 * n + 2] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(a, 4), low4), bits(4)), off);
          c[4 * n + 3] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), low4), bits(6)), off);
        }
        // The scales of block k's two halves as int16 lanes (low 128 bits: sc[2k], high:
        // sc[2k + 1]), shuffled out of the 16 scales widened once.
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sc)));
        const __m256i first = _mm256_permute4x64_epi64(sc16, 0x44), second = _mm256_permute4x64_epi64(sc16, 0xEE);
        for (int k = 0; k < 8; ++k) {
          const int lo = 2 * (2 * k % 8), hi = lo + 2;  // byte offsets of sc[2k], sc[2k + 1] in their half
          const __m256i pick = _mm256_set_m128i(_mm_set1_epi16(int16_t(hi | (hi + 1) << 8)),
                                                _mm_set1_epi16(int16_t(lo | (lo + 1) << 8)));
          s[k] = _mm256_shuffle_epi8(k < 4 ? first : second, pick);
        }
        for (int64_t m = 0; m < M; ++m) {
          const int8_t* xq = x.q + m * x.kp + i * 256;
          __m256i isum = _mm256_setzero_si256();
          for (int k = 0; k < 8; ++k) isum = _mm256_add_epi32(isum, _mm256_madd_epi16(pairs(c[k], xq + 32 * k), s[k]));
          acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d * x.dx[m * groups + i]), acc[m]);
        }
        break;
      }
      default: break;
    }
  }
  for (int64_t m = 0; m < M; ++m) out[m] = hsum(acc[m]) - hsum(macc[m]);
}

}  // namespace

int64_t x_group(DType t) { return t == DType::kGQ8_0 || t == DType::kGQ4_0 ? 32 : 256; }

void quantize_x(const float* x, int64_t K, int64_t kp, int64_t group, int8_t* q, float* dx, int32_t* bsum) {
  for (int64_t g0 = 0; g0 < kp; g0 += group) {
    float amax = 0;
    for (int64_t k = g0; k < std::min(K, g0 + group); ++k) amax = std::max(amax, std::fabs(x[k]));
    const float d = amax / 127.0f, inv = d > 0 ? 1.0f / d : 0.0f;
    dx[g0 / group] = d;
    for (int64_t k = g0; k < g0 + group; ++k) q[k] = k < K ? int8_t(std::nearbyint(x[k] * inv)) : 0;
  }
  for (int64_t b = 0; b < kp / 32; ++b) {
    int32_t s = 0;
    for (int e = 0; e < 32; ++e) s += q[32 * b + e];
    bsum[b] = s;
  }
}

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
