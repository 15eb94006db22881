#include "kernels/gemv_ggml.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/ggml_quant.h"

namespace hypic::kernels::ggml {
namespace {

constexpr int kMaxRows = 16;  // kGemvMaxRows

// f16 → f32 (exact: F16C on x86-64, every tier of whose x86-64-v3 baseline has it).
float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
#if defined(__x86_64__)
  return _cvtsh_ss(h);
#else
  return f16_to_f32(h);
#endif
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
    case DType::kGQ5_0:
    case DType::kGQ5_1: {  // Q5_1: w = d·q + m, as the mins' form with dmin = −m, min 1
      const bool one = t == DType::kGQ5_1;
      uint32_t qh;
      std::memcpy(&qh, u + (one ? 4 : 2), 4);
      const uint8_t* q = u + (one ? 8 : 6);
      for (int i = 0; i < 16; ++i) {
        o.code[i] = int8_t(((q[i] & 0xF) | ((qh >> i) << 4 & 0x10)) - (one ? 0 : 16));
        o.code[i + 16] = int8_t(((q[i] >> 4) | ((qh >> (i + 12)) & 0x10)) - (one ? 0 : 16));
      }
      o.d = half(u), o.sc[0] = o.sc[1] = 1;
      if (one) o.dmin = -half(u + 2), o.mn[0] = 1;
      return;
    }
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

#if defined(__x86_64__)
inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256i load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256i load(const int8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// The 32 unsigned codes of sub-block j (0..7) of a Q4_K / Q5_K super-block u: nibbles (low for
// even j, high for odd) and, for Q5_K, bit j of qh moved to bit 4 of its byte (a 16-bit shift
// by ≤ 4 keeps it in its byte).
template <bool FIVE>
inline __m256i k_codes(const uint8_t* u, __m256i qh, int j) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i v = load(u + (FIVE ? 48 : 16) + 32 * (j / 2));
  __m256i c = _mm256_and_si256(j % 2 ? _mm256_srli_epi16(v, 4) : v, low4);
  if (!FIVE) return c;
  const __m256i hb = j < 4 ? _mm256_slli_epi16(qh, 4 - j) : j > 4 ? _mm256_srli_epi16(qh, j - 4) : qh;
  return _mm256_or_si256(c, _mm256_and_si256(hb, _mm256_set1_epi8(16)));
}

// The 32 unsigned codes (0..63) of chunk 4n + q of a Q6_K super-block, from that half's low
// nibbles a (bytes 0–31) / b (32–63) and 2-bit highs h: nibbles of a / b, bits 2q of h as
// bits 4–5.
inline __m256i q6k_codes(__m256i a, __m256i b, __m256i h, int q) {
  const __m256i lo = q % 2 ? b : a;
  const __m256i nib = _mm256_and_si256(q >= 2 ? _mm256_srli_epi16(lo, 4) : lo, _mm256_set1_epi8(0x0F));
  const __m256i hs = q == 0 ? _mm256_slli_epi16(h, 4) : q == 1 ? _mm256_slli_epi16(h, 2) : q == 2 ? h : _mm256_srli_epi16(h, 2);
  return _mm256_or_si256(nib, _mm256_and_si256(hs, _mm256_set1_epi8(0x30)));
}

// The AVX2 kernels take W one unit at a time. K-quants: a super-block against MR ≤ 4 rows of x,
// each 32 codes decoded in registers and used by the MR rows before the next are decoded (16
// ymm registers: nothing of a unit is held beyond its use). Q8_0 / Q4_0: eight 32-blocks
// decoded once (8 registers) for every row of x.
constexpr int kMR = 4;

// Q8_0 / Q4_0: per block one int32 dot; eight blocks' dots reduced to one vector of 8 block
// sums (hadd), scaled by the 8 weight scales times the 8 x scales. Q4_0's codes are taken
// unsigned (0..15) and 8·Σx taken off.
template <bool Q4>
void rows_q8q4(const uint8_t* w, int64_t units, int64_t ub, const X& x, int64_t M, __m256* acc) {
  const int64_t blocks = x.kp / 32;
  const __m256i low4 = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  for (int64_t i = 0; i < units; i += 8) {
    const uint8_t* u = w + i * ub;
    uint16_t h[8];
    for (int k = 0; k < 8; ++k) std::memcpy(&h[k], u + k * ub, 2);
    const __m256 dw = _mm256_cvtph_ps(_mm_set_epi16(short(h[7]), short(h[6]), short(h[5]), short(h[4]),
                                                    short(h[3]), short(h[2]), short(h[1]), short(h[0])));
    __m256i c[8];  // Q8_0: |code|, the sign applied to x; Q4_0: the unsigned code
    __m256i sg[Q4 ? 1 : 8];
    for (int k = 0; k < 8; ++k) {
      if (Q4) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(u + k * ub + 2));
        c[k] = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), low4);
      } else {
        sg[k] = load(u + k * ub + 2);
        c[k] = _mm256_sign_epi8(sg[k], sg[k]);
      }
    }
    for (int64_t m = 0; m < M; ++m) {
      const int8_t* xq = x.q + m * x.kp + i * 32;
      auto dot = [&](int k) {
        const __m256i xv = load(xq + 32 * k);
        return _mm256_madd_epi16(_mm256_maddubs_epi16(c[k], Q4 ? xv : _mm256_sign_epi8(xv, sg[Q4 ? 0 : k])), ones);
      };
      // Per 128-bit half: lane k of u0 / u1 = that half's sum of block k (k < 4) / 4 + k.
      const __m256i u0 = _mm256_hadd_epi32(_mm256_hadd_epi32(dot(0), dot(1)), _mm256_hadd_epi32(dot(2), dot(3)));
      const __m256i u1 = _mm256_hadd_epi32(_mm256_hadd_epi32(dot(4), dot(5)), _mm256_hadd_epi32(dot(6), dot(7)));
      __m256i sums = _mm256_set_m128i(_mm_add_epi32(_mm256_castsi256_si128(u1), _mm256_extracti128_si256(u1, 1)),
                                      _mm_add_epi32(_mm256_castsi256_si128(u0), _mm256_extracti128_si256(u0, 1)));
      if (Q4) sums = _mm256_sub_epi32(sums, _mm256_slli_epi32(load(reinterpret_cast<const int8_t*>(x.bsum + m * blocks + i)), 3));
      acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_mul_ps(dw, _mm256_loadu_ps(x.dx + m * blocks + i)), acc[m]);
    }
  }
}

// Q4_K / Q5_K: per super-block (x one group of 256) the sub-blocks' pair sums times their
// integer scales (vpmaddwd) summed in int32, scaled once by d·d_x; the mins' Σ m_j·Σx_j in
// integers, scaled by dmin·d_x (into macc).
template <bool FIVE, int MR>
void rows_q45k(const uint8_t* w, int64_t units, int64_t ub, const X& x, int64_t m0, __m256* acc, __m256* macc) {
  const int64_t sums16 = x.kp / 16, groups = x.kp / 256;
  for (int64_t i = 0; i < units; ++i) {
    const uint8_t* u = w + i * ub;
    const float d = half(u), dmin = half(u + 2);
    // The 8 scales and 8 mins (ggml_scale_min_k4) from the 12 bytes as three words:
    // scales 0–3 = w0 & 63 per byte, mins 0–3 = w1 & 63, scales 4–7 = the low nibbles of
    // w2 with w0's top 2 bits above them, mins 4–7 = w2's high nibbles with w1's top bits.
    uint32_t w0, w1, w2;
    std::memcpy(&w0, u + 4, 4), std::memcpy(&w1, u + 8, 4), std::memcpy(&w2, u + 12, 4);
    const uint32_t six = 0x3f3f3f3fu, nib = 0x0f0f0f0fu, two = 0x03030303u;
    const __m128i scm = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, int((w2 & nib) | ((w0 >> 6) & two) << 4), int(w0 & six)));
    const __m128i mnm = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, int(((w2 >> 4) & nib) | ((w1 >> 6) & two) << 4), int(w1 & six)));
    const __m256i sc2 = _mm256_set_m128i(scm, scm);
    const __m256i qh = FIVE ? load(u + 16) : _mm256_setzero_si256();
    __m256i isum[MR];
    for (int r = 0; r < MR; ++r) isum[r] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      const __m256i c = k_codes<FIVE>(u, qh, j);
      // scale j in every int16 lane
      const __m256i sc = _mm256_shuffle_epi8(sc2, _mm256_set1_epi16(int16_t(0x0100 * (2 * j + 1) + 2 * j)));
      for (int r = 0; r < MR; ++r)  // codes are unsigned here: vpmaddubsw takes them as they are
        isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(
            _mm256_maddubs_epi16(c, load(x.q + (m0 + r) * x.kp + i * 256 + 32 * j)), sc));
    }
    // min j against the two 16-sums of 32-block j: vpmaddwd with each min in two int16 lanes
    const __m256i mins = _mm256_cvtepi16_epi32(mnm), mins2 = _mm256_or_si256(mins, _mm256_slli_epi32(mins, 16));
    for (int r = 0; r < MR; ++r) {
      const __m256i msum = _mm256_madd_epi16(mins2, load(reinterpret_cast<const int8_t*>(x.bsum16 + (m0 + r) * sums16 + i * 16)));
      const float dx = x.dx[(m0 + r) * groups + i];
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_set1_ps(d * dx), acc[r]);
      macc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_set1_ps(dmin * dx), macc[r]);
    }
  }
}

// Q6_K: the unsigned codes q (0..63) by vpmaddubsw as they are, the int8 scale per 16 applied
// by vpmaddwd; the codes' offset once per super-block: 32·Σ_j sc_j·Σ_16 q_x.
template <int MR>
void rows_q6k(const uint8_t* w, int64_t units, int64_t ub, const X& x, int64_t m0, __m256* acc) {
  const int64_t groups = x.kp / 256, sums16 = x.kp / 16;
  for (int64_t i = 0; i < units; ++i) {
    const uint8_t* u = w + i * ub;
    const float d = half(u + 208);
    // The scales of chunk k's two halves as int16 lanes (low 128 bits: sc[2k], high:
    // sc[2k + 1]), shuffled out of the 16 scales widened once.
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(u + 192)));
    __m256i isum[MR];
    for (int r = 0; r < MR; ++r)  // −32·Σ_j sc_j·Σ_16 q_x
      isum[r] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(_mm256_madd_epi16(
          sc16, load(reinterpret_cast<const int8_t*>(x.bsum16 + (m0 + r) * sums16 + i * 16))), 5));
    for (int n = 0; n < 2; ++n) {
      const __m256i scn = n ? _mm256_permute4x64_epi64(sc16, 0xEE) : _mm256_permute4x64_epi64(sc16, 0x44);
      const __m256i a = load(u + 64 * n), b = load(u + 64 * n + 32), h = load(u + 128 + 32 * n);
      for (int q = 0; q < 4; ++q) {  // chunk k = 4n + q
        const __m256i c = q6k_codes(a, b, h, q);
        const int lb = 4 * q, hb = lb + 2;  // byte offsets of sc[2k], sc[2k + 1] in their half
        const __m256i sc = _mm256_shuffle_epi8(scn, _mm256_set_m128i(_mm_set1_epi16(int16_t(hb | (hb + 1) << 8)),
                                                                     _mm_set1_epi16(int16_t(lb | (lb + 1) << 8))));
        for (int r = 0; r < MR; ++r)
          isum[r] = _mm256_add_epi32(isum[r], _mm256_madd_epi16(
              _mm256_maddubs_epi16(c, load(x.q + (m0 + r) * x.kp + i * 256 + 32 * (4 * n + q))), sc));
      }
    }
    for (int r = 0; r < MR; ++r)
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_set1_ps(d * x.dx[(m0 + r) * groups + i]), acc[r]);
  }
}

template <int MR>
void rows_mr(DType t, const uint8_t* w, int64_t units, int64_t ub, const X& x, int64_t m0, float* out) {
  __m256 acc[MR], macc[MR];  // the scaled products, the mins' terms
  for (int r = 0; r < MR; ++r) acc[r] = macc[r] = _mm256_setzero_ps();
  switch (t) {
    case DType::kGQ4K: rows_q45k<false, MR>(w, units, ub, x, m0, acc, macc); break;
    case DType::kGQ5K: rows_q45k<true, MR>(w, units, ub, x, m0, acc, macc); break;
    case DType::kGQ6K: rows_q6k<MR>(w, units, ub, x, m0, acc); break;
    default: break;
  }
  for (int r = 0; r < MR; ++r) out[m0 + r] = hsum(acc[r]) - hsum(macc[r]);
}

// One row of W × the M rows of x. Q8_0 / Q4_0 (whose block count is a multiple of 8, else
// the portable code): eight blocks decoded once for every row; K-quants: up to kMR rows of x
// per pass over the row. Q5_0 / Q5_1 (llama-quantize's fallback for a few small matrices):
// the portable code.
void row_avx2(DType t, const uint8_t* w, int64_t units, int64_t ub, const X& x, int64_t M, float* out) {
  if (t == DType::kGQ5_0 || t == DType::kGQ5_1) return row_generic(t, w, units, ub, x, M, out);
  if (t == DType::kGQ8_0 || t == DType::kGQ4_0) {
    if (units % 8) return row_generic(t, w, units, ub, x, M, out);
    __m256 acc[kMaxRows];
    for (int64_t m = 0; m < M; ++m) acc[m] = _mm256_setzero_ps();
    if (t == DType::kGQ4_0) rows_q8q4<true>(w, units, ub, x, M, acc);
    else rows_q8q4<false>(w, units, ub, x, M, acc);
    for (int64_t m = 0; m < M; ++m) out[m] = hsum(acc[m]);
    return;
  }
  for (int64_t m0 = 0; m0 < M; m0 += kMR) {
    switch (std::min<int64_t>(kMR, M - m0)) {
      case 1: rows_mr<1>(t, w, units, ub, x, m0, out); break;
      case 2: rows_mr<2>(t, w, units, ub, x, m0, out); break;
      case 3: rows_mr<3>(t, w, units, ub, x, m0, out); break;
      default: rows_mr<4>(t, w, units, ub, x, m0, out); break;
    }
  }
}

// 32 codes (int8 lanes of c) → out[0..32): the first 16 times a, the last 16 times b, less off
// (the reference decode's operations: a product, then the min subtracted — no FMA).
inline void put32(__m256i c, float a, float b, float off, float* out) {
  const __m256 vo = _mm256_set1_ps(off);
  for (int h = 0; h < 2; ++h) {
    const __m128i v = h ? _mm256_extracti128_si256(c, 1) : _mm256_castsi256_si128(c);
    const __m256 s = _mm256_set1_ps(h ? b : a);
    for (int e = 0; e < 2; ++e) {
      const __m256 f = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(e ? _mm_srli_si128(v, 8) : v));
      const __m256 p = _mm256_mul_ps(f, s);
      _mm256_storeu_ps(out + 16 * h + 8 * e, off == 0.0f ? p : _mm256_sub_ps(p, vo));
    }
  }
}

void dequantize_avx2(DType t, const uint8_t* w, int64_t units, float* out) {
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const int64_t ub = ggml_block_bytes(t);
  for (int64_t i = 0; i < units; ++i) {
    const uint8_t* u = w + i * ub;
    switch (t) {
      case DType::kGQ8_0: {
        const float d = half(u);
        put32(load(u + 2), d, d, 0.0f, out + 32 * i);
        break;
      }
      case DType::kGQ4_0: {
        const float d = half(u);
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(u + 2));
        const __m256i c = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), low4);
        put32(_mm256_sub_epi8(c, _mm256_set1_epi8(8)), d, d, 0.0f, out + 32 * i);
        break;
      }
      case DType::kGQ4K:
      case DType::kGQ5K: {
        const bool five = t == DType::kGQ5K;
        const float d = half(u), dmin = half(u + 2);
        const __m256i qh = five ? load(u + 16) : _mm256_setzero_si256();
        for (int j = 0; j < 8; ++j) {
          int sc, m;
          ggml_scale_min_k4(j, u + 4, &sc, &m);
          const __m256i c = five ? k_codes<true>(u, qh, j) : k_codes<false>(u, qh, j);
          const float a = d * float(sc);
          put32(c, a, a, dmin * float(m), out + 256 * i + 32 * j);
        }
        break;
      }
      case DType::kGQ6K: {
        const int8_t* sc = reinterpret_cast<const int8_t*>(u + 192);
        const float d = half(u + 208);
        for (int n = 0; n < 2; ++n) {
          const __m256i a = load(u + 64 * n), b = load(u + 64 * n + 32), h = load(u + 128 + 32 * n);
          for (int q = 0; q < 4; ++q) {  // elements 128n + 32q …
            const __m256i c = _mm256_sub_epi8(q6k_codes(a, b, h, q), _mm256_set1_epi8(32));
            const int k = 8 * n + 2 * q;  // the scales of the two 16s
            put32(c, d * float(sc[k]), d * float(sc[k + 1]), 0.0f, out + 256 * i + 128 * n + 32 * q);
          }
        }
        break;
      }
      default: break;
    }
  }
}
#endif  // __x86_64__

}  // namespace

int64_t x_group(DType t) { return ggml_block_elems(t) == 32 ? 32 : 256; }

void quantize_x(const float* x, int64_t K, int64_t kp, int64_t group, int8_t* q, float* dx, int32_t* bsum,
                int16_t* bsum16) {
  for (int64_t g0 = 0; g0 < kp; g0 += group) {
    float amax = 0;
    for (int64_t k = g0; k < std::min(K, g0 + group); ++k) amax = std::max(amax, std::fabs(x[k]));
    const float d = amax / 127.0f, inv = d > 0 ? 1.0f / d : 0.0f;
    dx[g0 / group] = d;
    for (int64_t k = g0; k < g0 + group; ++k) q[k] = k < K ? int8_t(std::nearbyint(x[k] * inv)) : 0;
  }
  for (int64_t b = 0; b < kp / 16; ++b) {
    int s = 0;
    for (int e = 0; e < 16; ++e) s += q[16 * b + e];
    bsum16[b] = int16_t(s);
  }
  for (int64_t b = 0; b < kp / 32; ++b) bsum[b] = bsum16[2 * b] + bsum16[2 * b + 1];
}

void rows(DType t, const uint8_t* w, size_t ws, int64_t n0, int64_t n1, int64_t K, const X& x,
          int64_t M, float* y, int64_t ldy, bool accumulate, bool avx2, size_t pf) {
  const int64_t ue = ggml_block_elems(t), ub = ggml_block_bytes(t), units = K / ue;
  float out[kMaxRows];
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* r = w + size_t(n) * ws;
    // The row pf bytes ahead, every line of it (within the task's rows: a mapped file's 4 KiB
    // pages end the hardware prefetcher's streams).
    if (r + pf < w + size_t(n1) * ws)
      for (size_t off = 0; off < ws; off += 64) __builtin_prefetch(r + pf + off, 0, 3);
#if defined(__x86_64__)
    if (avx2) row_avx2(t, r, units, ub, x, M, out);
    else
#endif
      row_generic(t, r, units, ub, x, M, out);
    for (int64_t m = 0; m < M; ++m) {
      float& o = y[m * ldy + n];
      o = accumulate ? o + out[m] : out[m];
    }
  }
}

void dequantize_row(DType t, const uint8_t* w, int64_t K, float* out, bool avx2) {
#if defined(__x86_64__)
  if (avx2 && t != DType::kGQ5_0 && t != DType::kGQ5_1) return dequantize_avx2(t, w, K / ggml_block_elems(t), out);
#endif
  ggml_dequantize_blocks(t, w, out, K / ggml_block_elems(t));
}

}  // namespace hypic::kernels::ggml
