#if defined(__x86_64__)  // x86-64 kernels only (core/cpu.h's tiers)
#include "kernels/gemm_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "core/cpu.h"
#include "core/ggml_quant.h"
#include "core/quant.h"
#include "core/parallel.h"
#include "kernels/avx2_util.h"
#include "kernels/gemm_avx512.h"
#include "kernels/gemv_avx2.h"

namespace hypic::kernels::avx2 {
namespace {

// Dword q (codes 4q .. 4q + 3) of block g of x's row m, broadcast to every lane.
inline __m256i xword(const QuantRows& x, int64_t m, int64_t g, int q) {
  int32_t v;
  std::memcpy(&v, x.q.data() + m * x.kp + g * 32 + 4 * q, 4);
  return _mm256_set1_epi32(v);
}

// Adds the products of 8 rows' 4-bit codes (u8 lanes, 0..15) with x's dword: into int16 pair
// sums (vpmaddubsw, ≤ 2 · 15 · 127 a lane) or, with VNNI, int32 dot products.
template <bool VNNI>
inline __m256i add_products(__m256i s, __m256i codes, __m256i xw) {
  if constexpr (VNNI) return dpbusd(s, codes, xw);
  return _mm256_add_epi16(s, _mm256_maddubs_epi16(codes, xw));
}

// int16 pair sums → int32 lane sums (VNNI: already int32).
template <bool VNNI>
inline __m256i widen(__m256i s) {
  if constexpr (VNNI) return s;
  return _mm256_madd_epi16(s, _mm256_set1_epi16(1));
}

// Half h (rows 8h .. 8h + 7) of a Q4T group of v rows at w × x rows m0 .. m0 + MB − 1 into
// out [MB][8]: per block the lanes kernel's operations (gemv_avx2.cpp's q4t_group). FULL: v is
// 16 (plain loads; no branch in the loop, which lets the compiler keep the sums in registers).
template <int MB, bool VNNI, bool FULL>
void q4t_half(const uint8_t* w, int v, int h, const QuantRows& x, int64_t m0, float* out) {
  __m256 acc[MB];
  for (int m = 0; m < MB; ++m) acc[m] = _mm256_setzero_ps();
  const size_t bs = size_t(18 * v);
  const __m256i low4 = _mm256_set1_epi8(0x0f), lanes = first_lanes(v - 8 * h);
  for (int64_t g = 0; g < x.nb; ++g) {
    const uint8_t* p = w + size_t(g) * bs;
    __m256i s[MB];
    for (int m = 0; m < MB; ++m)
      s[m] = VNNI ? _mm256_set1_epi32(x.corr[size_t((m0 + m) * x.nb + g)]) : _mm256_setzero_si256();
    for (int d = 0; d < 4; ++d) {
      const int32_t* src = reinterpret_cast<const int32_t*>(p + 4 * (d * v + 8 * h));
      const __m256i c = FULL ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src))
                             : _mm256_maskload_epi32(src, lanes);
      const __m256i lo = _mm256_and_si256(c, low4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(c, 4), low4);
      for (int m = 0; m < MB; ++m)
        s[m] = add_products<VNNI>(add_products<VNNI>(s[m], lo, xword(x, m0 + m, g, d)), hi,
                                  xword(x, m0 + m, g, d + 4));
    }
    const __m256 dw = q4t_scales8(p + 16 * v, v, h);  // the 8 rows' scales
    for (int m = 0; m < MB; ++m) {
      const size_t i = size_t((m0 + m) * x.nb + g);
      const __m256i dot = VNNI ? s[m] : _mm256_add_epi32(widen<false>(s[m]), _mm256_set1_epi32(x.corr[i]));
      acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(dw, _mm256_set1_ps(x.d[i])), acc[m]);
    }
  }
  for (int m = 0; m < MB; ++m) _mm256_storeu_ps(out + m * 8, acc[m]);
}

// Q8 rows regrouped, 8 rows per group (the last one zero-padded), codes past K zero; per block
// of 32 and dword d of it (codes 4d .. 4d + 3):
//   codes  (AVX-VNNI, q8_half): the dword of the 8 rows, offset-binary bytes (32 bytes);
//   codes16 (AVX2, q8_half16):  the signed codes q = c − 128 as int16, for each pair of
//          codes (4d, 4d + 1) and (4d + 2, 4d + 3) the pair of the 8 rows (vpmaddwd's operands);
// then the 8 rows' scales d_w.
struct Q8Lanes {
  int64_t groups = 0, nb = 0;
  std::vector<uint8_t> codes;    // [groups][nb][8][32]
  std::vector<int16_t> codes16;  // [groups][nb][16 pairs][8 rows][2]
  std::vector<float> scale;      // [groups · 8]
};

// r[i] = 8 dwords of row i → r[d] = dword d of rows 0..7.
inline void transpose8x8(__m256i (&r)[8]) {
  __m256i t[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
  }
  __m256i u[8];
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  // u[j] (j < 4): dwords 4L + j' of rows 0–3 in lane L; u[4 + j]: rows 4–7.
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x20);
    r[4 + j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x31);
  }
}

void regroup_q8(const uint8_t* w, size_t ws, int64_t n0, int64_t n1, int64_t K, int64_t nb,
                bool vnni, Q8Lanes& out) {
  out.groups = (n1 - n0 + 7) / 8;
  out.nb = nb;
  (vnni ? out.codes.resize(size_t(out.groups * nb * 256)) : out.codes16.resize(size_t(out.groups * nb * 256)));
  out.scale.assign(size_t(out.groups * 8), 0.0f);
  const __m256i bias = _mm256_set1_epi8(int8_t(0x80));
  for (int64_t gi = 0; gi < out.groups; ++gi) {
    const int64_t n = n0 + 8 * gi, valid = std::min<int64_t>(8, n1 - n);
    for (int64_t r = 0; r < valid; ++r) std::memcpy(&out.scale[size_t(gi * 8 + r)], w + size_t(n + r) * ws + K, 4);
    for (int64_t b = 0; b < nb; ++b) {
      __m256i v[8];
      for (int r = 0; r < 8; ++r)
        v[r] = r < valid ? load32(w + size_t(n + r) * ws + size_t(32 * b), K - 32 * b) : _mm256_setzero_si256();
      transpose8x8(v);  // v[d]: dword d of the 8 rows
      const size_t at = size_t((gi * nb + b) * 256);
      for (int d = 0; d < 8; ++d) {
        if (vnni) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.codes.data() + at + 32 * d), v[d]);
        } else {  // rows 0–3 / 4–7 as int16 → as dwords [r0p0 r0p1 r1p0 …] → pairs 2d, 2d + 1
          const __m256i q = _mm256_xor_si256(v[d], bias);
          const __m256i split = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
          const __m256i a = _mm256_permutevar8x32_epi32(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(q)), split);
          const __m256i b = _mm256_permutevar8x32_epi32(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(q, 1)), split);
          int16_t* o = out.codes16.data() + at + 32 * d;
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), _mm256_permute2x128_si256(a, b, 0x20));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 16), _mm256_permute2x128_si256(a, b, 0x31));
        }
      }
    }
  }
}

// Group gi of regrouped Q8 rows (codes) × x rows m0 .. m0 + MB − 1 into out [MB][8], before
// d_w: per block, from corr, vpdpbusd of each dword of codes (AVX-VNNI).
template <int MB>
void q8_half(const Q8Lanes& wl, int64_t gi, const QuantRows& x, int64_t m0, float* out) {
  __m256 acc[MB];
  for (int m = 0; m < MB; ++m) acc[m] = _mm256_setzero_ps();
  const uint8_t* base = wl.codes.data() + size_t(gi * wl.nb * 256);
  for (int64_t g = 0; g < x.nb; ++g) {
    const uint8_t* p = base + size_t(g * 256);
    __m256i s[MB];
    for (int m = 0; m < MB; ++m) s[m] = _mm256_set1_epi32(x.corr[size_t((m0 + m) * x.nb + g)]);
    for (int d = 0; d < 8; ++d) {
      const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * d));
      for (int m = 0; m < MB; ++m) s[m] = dpbusd(s[m], c, xword(x, m0 + m, g, d));
    }
    for (int m = 0; m < MB; ++m)
      acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[m]), _mm256_set1_ps(x.d[size_t((m0 + m) * x.nb + g)]), acc[m]);
  }
  for (int m = 0; m < MB; ++m) _mm256_storeu_ps(out + m * 8, acc[m]);
}

// The same without VNNI, on codes16 and x's int16 codes: vpmaddwd of each pair (no products to
// saturate: vpmaddubsw's pairs of signed codes would need vpsignb and a vpmaddwd each).
template <int MB>
void q8_half16(const Q8Lanes& wl, int64_t gi, const QuantRows& x, int64_t m0, float* out) {
  __m256 acc[MB];
  for (int m = 0; m < MB; ++m) acc[m] = _mm256_setzero_ps();
  const int16_t* base = wl.codes16.data() + size_t(gi * wl.nb * 256);
  for (int64_t g = 0; g < x.nb; ++g) {
    const int16_t* p = base + size_t(g * 256);
    __m256i s[MB];
    for (int m = 0; m < MB; ++m) s[m] = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int pr = 0; pr < 16; ++pr) {
      const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 * pr));
      for (int m = 0; m < MB; ++m) {
        int32_t xp;
        std::memcpy(&xp, x.q16.data() + (m0 + m) * x.kp + g * 32 + 2 * pr, 4);
        s[m] = _mm256_add_epi32(s[m], _mm256_madd_epi16(c, _mm256_set1_epi32(xp)));
      }
    }
    for (int m = 0; m < MB; ++m)
      acc[m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[m]), _mm256_set1_ps(x.d[size_t((m0 + m) * x.nb + g)]), acc[m]);
  }
  for (int m = 0; m < MB; ++m) _mm256_storeu_ps(out + m * 8, acc[m]);
}

// Rows n .. n + valid − 1 of y from out [mb][8] (times scale[r] when given).
void store(const float* out, int mb, int64_t m0, int64_t n, int valid, const float* scale, float* y,
           int64_t ldy, bool accumulate) {
  if (valid == 8) {  // whole rows of 8: one vector each (the same products and sums as below)
    const __m256 sc = scale ? _mm256_loadu_ps(scale) : _mm256_set1_ps(1.0f);
    for (int m = 0; m < mb; ++m) {
      float* dst = y + (m0 + m) * ldy + n;
      __m256 v = _mm256_loadu_ps(out + m * 8);
      if (scale) v = _mm256_mul_ps(v, sc);
      _mm256_storeu_ps(dst, accumulate ? _mm256_add_ps(_mm256_loadu_ps(dst), v) : v);
    }
    return;
  }
  for (int m = 0; m < mb; ++m)
    for (int r = 0; r < valid; ++r) {
      float& dst = y[(m0 + m) * ldy + n + r];
      const float v = scale ? out[m * 8 + r] * scale[r] : out[m * 8 + r];
      dst = accumulate ? dst + v : v;
    }
}

// x rows in tiles of up to MB (4; 2 for Q8's two planes without VNNI) against one 8-row unit.
// kernel(MB, m0) over x's rows [m0, m1), MB at a time, then one at a time.
template <int MB, typename Kernel>
void over_rows(int64_t m0, int64_t m1, Kernel&& kernel) {
  for (; m0 + MB <= m1; m0 += MB) kernel(std::integral_constant<int, MB>(), m0);
  for (; m0 < m1; ++m0) kernel(std::integral_constant<int, 1>(), m0);
}



}  // namespace

void quantize_rows(const float* x, int64_t ldx, int64_t M, int64_t K, int offset, bool int16,
                   QuantRows& out) {
  out.M = M;
  out.K = K;
  out.kp = (K + 31) / 32 * 32;
  out.nb = out.kp / 32;
  out.q.resize(size_t(M * out.kp));
  out.d.resize(size_t(M * out.nb));
  out.corr.resize(size_t(M * out.nb));
  out.q16.resize(int16 ? size_t(M * out.kp) : 0);
  parallel_for(M, [&](int64_t m) {
    int32_t* c = out.corr.data() + m * out.nb;
    int8_t* q = out.q.data() + m * out.kp;
    quantize_blocks(x + m * ldx, K, out.kp, q, out.d.data() + m * out.nb, c);
    for (int64_t g = 0; g < out.nb; ++g) c[g] *= -offset;
    if (int16) std::copy(q, q + out.kp, out.q16.begin() + m * out.kp);
  });
}

void q4t_gemm(const uint8_t* w, size_t ws, int64_t n0, int64_t n1, const QuantRows& x, float* y,
              int64_t ldy, bool accumulate, bool vnni) {
  alignas(32) float out[4 * 8];
  for (int64_t t0 = 0; t0 < x.M; t0 += kRowTile) {
    const int64_t t1 = std::min(x.M, t0 + kRowTile);
    for (int64_t n = n0; n < n1; n += 16) {
      const int v = int(std::min<int64_t>(16, n1 - n));
      const uint8_t* wg = w + size_t(n) * ws;
      for (int h = 0; h * 8 < v; ++h)
        over_rows<4>(t0, t1, [&](auto mb, int64_t m0) {
          constexpr int MB = decltype(mb)::value;
          if (v == 16 && vnni) q4t_half<MB, true, true>(wg, v, h, x, m0, out);
          else if (v == 16) q4t_half<MB, false, true>(wg, v, h, x, m0, out);
          else if (vnni) q4t_half<MB, true, false>(wg, v, h, x, m0, out);
          else q4t_half<MB, false, false>(wg, v, h, x, m0, out);
          store(out, MB, m0, n + 8 * h, std::min(8, v - 8 * h), nullptr, y, ldy, accumulate);
        });
    }
  }
}

void q8_gemm(const uint8_t* w, size_t ws, int64_t n0, int64_t n1, const QuantRows& x, float* y,
             int64_t ldy, bool accumulate, bool vnni) {
  thread_local Q8Lanes wl;
  regroup_q8(w, ws, n0, n1, x.K, x.nb, vnni, wl);
  alignas(32) float out[4 * 8];
  for (int64_t t0 = 0; t0 < x.M; t0 += kRowTile) {
    const int64_t t1 = std::min(x.M, t0 + kRowTile);
    for (int64_t gi = 0; gi < wl.groups; ++gi) {
      const int64_t n = n0 + 8 * gi;
      const int valid = int(std::min<int64_t>(8, n1 - n));
      over_rows<4>(t0, t1, [&](auto mb, int64_t m0) {
        constexpr int MB = decltype(mb)::value;
        if (vnni) q8_half<MB>(wl, gi, x, m0, out);
        else q8_half16<MB>(wl, gi, x, m0, out);
        store(out, MB, m0, n, valid, wl.scale.data() + gi * 8, y, ldy, accumulate);
      });
    }
  }
}

bool q4t_on_avx512() { return cpu::has(cpu::kAvx512F | cpu::kAvx512Bw | cpu::kAvx512Vnni); }

void linear_int8(const float* x, int64_t ldx, int64_t M, const Tensor& W, float* y, int64_t ldy,
                 bool accumulate, int64_t chunk, float* block_sums, float* offsets) {
  // ggml's Q4_0 / Q4_K (a GGUF file's blocks) as Q4T: each chunk re-laid as Q4T rows in the
  // task's buffer (Q4_0 exactly; Q4_K with the offsets its caller adds), then Q4T's kernel.
  const DType src = W.dtype();
  const bool relaid = src == DType::kGQ4_0 || src == DType::kGQ4K;
  const DType t = relaid ? DType::kQ4T : src;
  const int64_t N = W.dim(0), K = W.dim(1);
  const bool vnni = cpu::has(cpu::kAvxVnni);
  const bool zmm = t == DType::kQ4T && q4t_on_avx512();
  thread_local QuantRows xq;
  QuantRows& X = xq;  // thread_local: the workers must use this thread's rows
  const int offset = t == DType::kQ8 ? 128 : 8;
  quantize_rows(x, ldx, M, K, offset, t == DType::kQ8 && !vnni, X);
  if (block_sums)
    for (size_t i = 0; i < X.d.size(); ++i) block_sums[i] = X.d[i] * float(-X.corr[i] / offset);
  const size_t ws = dtype_row_bytes(t, K), src_ws = dtype_row_bytes(src, K);
  const auto* wb = static_cast<const uint8_t*>(W.raw());
  parallel_tasks((N + chunk - 1) / chunk, [&](int64_t c) {
    int64_t n0 = c * chunk, n1 = std::min(N, n0 + chunk);
    const uint8_t* w = wb;
    float* yc = y;
    if (relaid) {
      thread_local std::vector<uint8_t> rows, tiled;
      rows.resize(size_t(n1 - n0) * ws);
      tiled.resize(rows.size());
      if (src == DType::kGQ4_0) ggml_q4_0_to_q4_rows(wb + size_t(n0) * src_ws, src_ws, n1 - n0, K, rows.data());
      else ggml_q4_k_to_q4_rows(wb + size_t(n0) * src_ws, src_ws, n1 - n0, K, rows.data(),
                                offsets ? offsets + n0 * (K / 32) : nullptr);
      q4_tile(rows.data(), n1 - n0, K, tiled.data());
      w = tiled.data(), yc = y + n0, n1 -= n0, n0 = 0;
    }
    if (t == DType::kQ8) q8_gemm(w, ws, n0, n1, X, yc, ldy, accumulate, vnni);
    else if (zmm) avx512::q4t_gemm(w, ws, n0, n1, X, yc, ldy, accumulate);
    else q4t_gemm(w, ws, n0, n1, X, yc, ldy, accumulate, vnni);
  });
}

}  // namespace hypic::kernels::avx2
#endif  // __x86_64__
