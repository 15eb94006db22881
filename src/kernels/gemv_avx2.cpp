#if defined(__x86_64__)  // x86-64 kernels only (core/cpu.h's tiers)
#include "kernels/gemv_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/avx2_util.h"

namespace hypic::kernels::avx2 {
namespace {

// The AVX-512 kernels' 16-lane tree (gemv.cpp's hsum) over lanes lo (0–7) and hi (8–15).
inline float hsum16(__m256 lo, __m256 hi) {
  alignas(32) float t[8];
  _mm256_store_ps(t, _mm256_add_ps(lo, hi));
  for (int w = 4; w >= 1; w /= 2)
    for (int i = 0; i < w; ++i) t[i] += t[i + w];
  return t[0];
}

inline void prefetch_rows(const uint8_t* w, size_t ws, size_t off, int rb) {
  for (int r = 0; r < rb; ++r)
    _mm_prefetch(reinterpret_cast<const char*>(w + size_t(r) * ws + off), _MM_HINT_T0);
}

}  // namespace

// ---------------------------------------------------------------------------------------
// F32: chunk c is 16 floats: lanes 0–7 = w[16c .. 16c + 7], 8–15 the next 8.

template <int RB, int MB>
void f32_block(const uint8_t* w, size_t ws, size_t pf, int64_t K, const F32X& x, int64_t m0,
               float* out) {
  __m256 acc[RB][MB][2];
  for (int r = 0; r < RB; ++r)
    for (int m = 0; m < MB; ++m) acc[r][m][0] = acc[r][m][1] = _mm256_setzero_ps();
  const int64_t nc = x.kp / 16;
  for (int64_t c = 0; c < nc; ++c) {
    const int64_t k0 = c * 16;
    prefetch_rows(w + pf, ws, size_t(k0) * 4, RB);
    __m256 wr[RB][2];
    for (int r = 0; r < RB; ++r) {
      const float* wp = reinterpret_cast<const float*>(w + size_t(r) * ws) + k0;
      if (K - k0 >= 16) {
        wr[r][0] = _mm256_loadu_ps(wp);
        wr[r][1] = _mm256_loadu_ps(wp + 8);
      } else {
        wr[r][0] = _mm256_maskload_ps(wp, first_lanes(K - k0));
        wr[r][1] = _mm256_maskload_ps(wp + 8, first_lanes(K - k0 - 8));
      }
    }
    for (int m = 0; m < MB; ++m) {
      const float* xp = x.v + (m0 + m) * x.kp + k0;
      const __m256 x0 = _mm256_loadu_ps(xp), x1 = _mm256_loadu_ps(xp + 8);
      for (int r = 0; r < RB; ++r) {
        acc[r][m][0] = _mm256_fmadd_ps(wr[r][0], x0, acc[r][m][0]);
        acc[r][m][1] = _mm256_fmadd_ps(wr[r][1], x1, acc[r][m][1]);
      }
    }
  }
  for (int r = 0; r < RB; ++r)
    for (int m = 0; m < MB; ++m) out[r * MB + m] = hsum16(acc[r][m][0], acc[r][m][1]);
}

// ---------------------------------------------------------------------------------------
// BF16: chunk c is 32 elements; lane j (0–15) takes the pair 2j, 2j + 1: odd element first
// (the high half of the pair's dword, as fp32 when masked), then the even (shifted up).

inline void bf16_split(__m256i v, __m256& odd, __m256& even) {
  odd = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(int32_t(0xffff0000u))));
  even = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}

template <int RB, int MB>
void bf16_block(const uint8_t* w, size_t ws, size_t pf, int64_t K, const Bf16X& x, int64_t m0,
                float* out) {
  __m256 acc[RB][MB][2];
  for (int r = 0; r < RB; ++r)
    for (int m = 0; m < MB; ++m) acc[r][m][0] = acc[r][m][1] = _mm256_setzero_ps();
  const int64_t nc = x.kp / 32;
  for (int64_t c = 0; c < nc; ++c) {
    const int64_t k0 = c * 32, left = (K - k0) * 2;  // bytes of the row from k0
    prefetch_rows(w + pf, ws, size_t(k0) * 2, RB);
    for (int h = 0; h < 2; ++h) {
      __m256 wo[RB], we[RB];
      for (int r = 0; r < RB; ++r)
        bf16_split(load32(w + size_t(r) * ws + size_t(k0 + 16 * h) * 2, left - 32 * h), wo[r], we[r]);
      for (int m = 0; m < MB; ++m) {
        __m256 xo, xe;
        bf16_split(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.v + (m0 + m) * x.kp + k0 + 16 * h)),
                   xo, xe);
        for (int r = 0; r < RB; ++r) {
          acc[r][m][h] = _mm256_fmadd_ps(wo[r], xo, acc[r][m][h]);
          acc[r][m][h] = _mm256_fmadd_ps(we[r], xe, acc[r][m][h]);
        }
      }
    }
  }
  for (int r = 0; r < RB; ++r)
    for (int m = 0; m < MB; ++m) out[r * MB + m] = hsum16(acc[r][m][0], acc[r][m][1]);
}

// BF16 for 2–24 rows of x: bf16_block's outputs, bit for bit, with x split once (bf16_split_x)
// instead of per weight row, and the accumulators of a block of rows kept in memory between
// blocks of K so that the split x (fp32, twice bf16's bytes) stays in L1.

void bf16_split_x(const uint16_t* v, int64_t M, int64_t kp, float* out) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t j = 0; j < kp / 16; ++j) {  // piece j of row m
      __m256 o, e;
      bf16_split(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + m * kp + 16 * j)), o, e);
      constexpr int64_t per = kBf16SplitK / 16;  // pieces a block
      float* p = out + ((j / per * M + m) * per + j % per) * 16;
      _mm256_storeu_ps(p, o);
      _mm256_storeu_ps(p + 8, e);
    }
}

namespace {

constexpr int kTileRows = 8;      // rows of W a block
constexpr int64_t kTileK = kBf16SplitK;

// Row w (its bytes from piece j0 on; `left` bytes of it remain) × MB rows of split x (xs: the
// first's block, kTileK floats a row), pieces [j0, j1) of 16 elements; acc[m][h] as
// bf16_block's.
template <int MB>
__attribute__((always_inline)) inline void bf16_tile_row(const uint8_t* w, int64_t left,
                                                          const float* xs, int64_t j0, int64_t j1,
                                                          __m256 (*acc)[2]) {
  __m256 a[MB][2];
  for (int m = 0; m < MB; ++m) a[m][0] = acc[m][0], a[m][1] = acc[m][1];
  const __m256i odd = _mm256_set1_epi32(int32_t(0xffff0000u));
  auto piece = [&](__m256i wv, int64_t p, int h) {  // piece j0 + p, lanes h
    const __m256 wo = _mm256_castsi256_ps(_mm256_and_si256(wv, odd));
    const __m256 we = _mm256_castsi256_ps(_mm256_slli_epi32(wv, 16));
    for (int m = 0; m < MB; ++m) {
      const float* xp = xs + m * kTileK + p * 16;
      a[m][h] = _mm256_fmadd_ps(wo, _mm256_loadu_ps(xp), a[m][h]);
      a[m][h] = _mm256_fmadd_ps(we, _mm256_loadu_ps(xp + 8), a[m][h]);
    }
  };
  // Pairs of pieces (h = 0, 1) whose 64 bytes lie within the row, then the rest (j0 even).
  const int64_t np = j1 - j0, whole = std::min(np, left / 64 * 2);
  int64_t p = 0;
  for (; p < whole; p += 2) {
    piece(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + p * 32)), p, 0);
    piece(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + p * 32 + 32)), p + 1, 1);
  }
  for (; p < np; ++p) {
    const __m256i wv = load32(w + p * 32, left - p * 32);
    if (p & 1) piece(wv, p, 1);
    else piece(wv, p, 0);
  }
  for (int m = 0; m < MB; ++m) acc[m][0] = a[m][0], acc[m][1] = a[m][1];
}

}  // namespace

void bf16_rows(const uint8_t* w, size_t ws, int64_t n0, int64_t n1, int64_t K, const float* xs,
               int64_t kp, int64_t M, float* y, int64_t ldy, bool accumulate) {
  alignas(32) __m256 acc[kTileRows][kBf16RowsMax][2];
  const int64_t pieces = kp / 16;
  for (int64_t nb = n0; nb < n1; nb += kTileRows) {
    const int rows = int(std::min<int64_t>(kTileRows, n1 - nb));
    for (int r = 0; r < rows; ++r)
      for (int64_t m = 0; m < M; ++m) acc[r][m][0] = acc[r][m][1] = _mm256_setzero_ps();
    for (int64_t j0 = 0; j0 < pieces; j0 += kTileK / 16) {
      const int64_t j1 = std::min(pieces, j0 + kTileK / 16);
      const int64_t left = (K - j0 * 16) * 2;  // bytes of a row from piece j0
      // Each row's next block of K (or the next block of rows' first) while this one computes.
      for (int r = 0; r < rows; ++r) {
        const uint8_t* wr = w + size_t(nb + r) * ws + size_t(j0) * 32;
        const uint8_t* next = j1 < pieces ? wr + kTileK * 2 : w + size_t(nb + kTileRows + r) * ws;
        for (int64_t b = 0; b < kTileK * 2; b += 64)
          _mm_prefetch(reinterpret_cast<const char*>(next + b), _MM_HINT_T0);
      }
      for (int64_t m0 = 0; m0 < M; m0 += 6) {
        const float* xs0 = xs + (j0 / 16 * M + m0) * kTileK;  // x's block j0 / 16, row m0
        for (int r = 0; r < rows; ++r) {
          const uint8_t* wr = w + size_t(nb + r) * ws + size_t(j0) * 32;
          auto* a = acc[r] + m0;
          switch (std::min<int64_t>(6, M - m0)) {
            case 6: bf16_tile_row<6>(wr, left, xs0, j0, j1, a); break;
            case 5: bf16_tile_row<5>(wr, left, xs0, j0, j1, a); break;
            case 4: bf16_tile_row<4>(wr, left, xs0, j0, j1, a); break;
            case 3: bf16_tile_row<3>(wr, left, xs0, j0, j1, a); break;
            case 2: bf16_tile_row<2>(wr, left, xs0, j0, j1, a); break;
            default: bf16_tile_row<1>(wr, left, xs0, j0, j1, a); break;
          }
        }
      }
    }
    for (int r = 0; r < rows; ++r)
      for (int64_t m = 0; m < M; ++m) {
        float& o = y[m * ldy + nb + r];
        const float v = hsum16(acc[r][m][0], acc[r][m][1]);
        o = accumulate ? o + v : v;
      }
  }
}

// ---------------------------------------------------------------------------------------
// Q8: 8 rows in lanes, per block of 32 one int32 dot product a row (gemm_avx2.h's arithmetic).

namespace {

// The 8 rows' int32 sums of 8 vectors of lane partials (p[r]: row r's 8 dword partials).
inline __m256i row_sums(const __m256i (&p)[8]) {
  const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
  const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

// Rows n .. n + 7 of a Q8 W (row-major; rows ≥ valid read row n) × x row m: per block of 32 the
// 8 rows' exact int32 dot products of the signed codes (c − 128, |q| · x carrying q's sign:
// vpmaddubsw pairs ≤ 2 · 128 · 127), then acc += float(dot) · d_x in block order, in lanes.
void q8_rows8(const uint8_t* w, size_t ws, int valid, int64_t K, const Q8X& x, int64_t m, size_t pf,
              float* out /*[8]*/) {
  __m256 acc = _mm256_setzero_ps();
  const uint8_t* row[8];
  for (int r = 0; r < 8; ++r) row[r] = w + size_t(r < valid ? r : 0) * ws;
  const int64_t nb = (K + 31) / 32;
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t k0 = b * 32;
    if (b % 2 == 0)
      for (int r = 0; r < 8; ++r) _mm_prefetch(reinterpret_cast<const char*>(row[r] + pf + size_t(k0)), _MM_HINT_T0);
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + m * x.kp + k0));
    __m256i p[8];
    for (int r = 0; r < 8; ++r) {
      const __m256i q = _mm256_xor_si256(load32(row[r] + k0, K - k0), _mm256_set1_epi8(int8_t(0x80)));
      p[r] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(q), _mm256_sign_epi8(xq, q)),
                               _mm256_set1_epi16(1));
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(row_sums(p)), _mm256_set1_ps(x.dx[m * (x.kp / 32) + b]), acc);
  }
  _mm256_storeu_ps(out, acc);
}

}  // namespace

void q8_rows(const uint8_t* w, size_t ws, int64_t n0, int64_t n1, int64_t K, const Q8X& x,
             int64_t M, size_t pf, float* y, int64_t ldy, bool accumulate) {
  alignas(32) float out[8];
  for (int64_t n = n0; n < n1; n += 8) {
    const int valid = int(std::min<int64_t>(8, n1 - n));
    const uint8_t* wn = w + size_t(n) * ws;
    for (int64_t m = 0; m < M; ++m) {
      q8_rows8(wn, ws, valid, K, x, m, pf, out);
      for (int r = 0; r < valid; ++r) {
        float d;
        std::memcpy(&d, wn + size_t(r) * ws + size_t(K), 4);
        float& dst = y[m * ldy + n + r];
        dst = accumulate ? dst + out[r] * d : out[r] * d;
      }
    }
  }
}

#define HYPIC_AVX2_BLOCKS(fn, X, ...)                                                              \
  template void fn<4, 1 __VA_ARGS__>(const uint8_t*, size_t, size_t, int64_t, const X&, int64_t, float*); \
  template void fn<1, 1 __VA_ARGS__>(const uint8_t*, size_t, size_t, int64_t, const X&, int64_t, float*); \
  template void fn<1, 2 __VA_ARGS__>(const uint8_t*, size_t, size_t, int64_t, const X&, int64_t, float*); \
  template void fn<1, 3 __VA_ARGS__>(const uint8_t*, size_t, size_t, int64_t, const X&, int64_t, float*); \
  template void fn<1, 4 __VA_ARGS__>(const uint8_t*, size_t, size_t, int64_t, const X&, int64_t, float*);
HYPIC_AVX2_BLOCKS(f32_block, F32X)
HYPIC_AVX2_BLOCKS(bf16_block, Bf16X)
#undef HYPIC_AVX2_BLOCKS

// ---------------------------------------------------------------------------------------
// Q4T: a group of v ≤ 16 rows (core/quant.h); half h holds rows 8h .. 8h + 7 in its lanes.

namespace {

// Bytes ahead of a group's reads that are prefetched (the group is one stream; as the
// AVX-512 lanes kernel).
constexpr size_t kQ4TAhead = 2048;

// Dword q (0–7: the codes 4q .. 4q + 3 of the block) of activation row m, block g.
inline int32_t xword(const amx::X& x, int64_t g, int q, int64_t m) {
  int32_t v;
  std::memcpy(&v, x.b.data() + size_t(((g * 8 + q) * x.mp + m) * 4), 4);
  return v;
}

template <int MB, bool VNNI>
void q4t_group(const uint8_t* w, int v, const amx::X& x, int64_t m0, float* out /*[MB][16]*/) {
  __m256 acc[MB][2];
  for (int m = 0; m < MB; ++m) acc[m][0] = acc[m][1] = _mm256_setzero_ps();
  const int64_t ng = x.K / 32;
  const size_t bs = size_t(18 * v);
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  const int halves = v > 8 ? 2 : 1;
  const __m256i lanes[2] = {first_lanes(v), first_lanes(v - 8)};
  for (int64_t g = 0; g < ng; ++g) {
    const uint8_t* p = w + size_t(g) * bs;
    for (size_t o = 0; o < bs; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + kQ4TAhead + o), _MM_HINT_T0);
    for (int h = 0; h < halves; ++h) {
      __m256i s[MB];  // VNNI: int32 dot products from corr; else int16 pair sums
      for (int m = 0; m < MB; ++m)
        s[m] = VNNI ? _mm256_set1_epi32(x.corr[size_t(g * 16 + m0 + m)]) : _mm256_setzero_si256();
      for (int d = 0; d < 4; ++d) {
        const int32_t* src = reinterpret_cast<const int32_t*>(p + 4 * (d * v + 8 * h));
        const __m256i c = v == 16 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src))
                                  : _mm256_maskload_epi32(src, lanes[h]);
        const __m256i lo = _mm256_and_si256(c, low4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(c, 4), low4);
        for (int m = 0; m < MB; ++m) {
          const __m256i xl = _mm256_set1_epi32(xword(x, g, d, m0 + m));
          const __m256i xh = _mm256_set1_epi32(xword(x, g, d + 4, m0 + m));
          if constexpr (VNNI) {
            s[m] = dpbusd(dpbusd(s[m], lo, xl), hi, xh);
          } else {
            s[m] = _mm256_add_epi16(s[m], _mm256_add_epi16(_mm256_maddubs_epi16(lo, xl),
                                                           _mm256_maddubs_epi16(hi, xh)));
          }
        }
      }
      const __m256 dw = q4t_scales8(p + 16 * v, v, h);  // the 8 rows' scales
      for (int m = 0; m < MB; ++m) {
        const size_t gi = size_t(g * 16 + m0 + m);
        const __m256i dot = VNNI ? s[m]
                                 : _mm256_add_epi32(_mm256_madd_epi16(s[m], _mm256_set1_epi16(1)),
                                                    _mm256_set1_epi32(x.corr[gi]));
        const __m256 sc = _mm256_mul_ps(dw, _mm256_set1_ps(x.dx[gi]));
        acc[m][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), sc, acc[m][h]);
      }
    }
  }
  for (int m = 0; m < MB; ++m) {
    _mm256_storeu_ps(out + m * 16, acc[m][0]);
    _mm256_storeu_ps(out + m * 16 + 8, acc[m][1]);
  }
}

}  // namespace

void q4t_rows(const uint8_t* w, size_t ws, int64_t n0, int64_t n1, const amx::X& x, float* y,
              int64_t ldy, bool accumulate, bool vnni) {
  alignas(32) float out[2 * 16];
  for (int64_t n = n0; n < n1; n += 16) {
    const int valid = int(std::min<int64_t>(16, n1 - n));
    const uint8_t* wn = w + size_t(n) * ws;
    // Activation rows 2 at a time (the group again, from cache, for the next two).
    for (int64_t m0 = 0; m0 < x.M; m0 += 2) {
      const int mb = int(std::min<int64_t>(2, x.M - m0));
      if (mb == 2) vnni ? q4t_group<2, true>(wn, valid, x, m0, out) : q4t_group<2, false>(wn, valid, x, m0, out);
      else vnni ? q4t_group<1, true>(wn, valid, x, m0, out) : q4t_group<1, false>(wn, valid, x, m0, out);
      for (int m = 0; m < mb; ++m)
        for (int r = 0; r < valid; ++r) {
          float& dst = y[(m0 + m) * ldy + n + r];
          dst = accumulate ? dst + out[m * 16 + r] : out[m * 16 + r];
        }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Activation blocks: |x| max, d = amax / 127, cvtps (round to nearest even under the default
// rounding mode, as nearbyint) of x · (1 / d), clamped: amx::quantize_blocks' operations.

void quantize_blocks(const float* x, int64_t K, int64_t kp, int8_t* q, float* d, int32_t* sums) {
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i lim = _mm256_set1_epi32(127), nlim = _mm256_set1_epi32(-127);
  for (int64_t b = 0; b * 32 < kp; ++b) {
    const int64_t k0 = b * 32, n = std::clamp<int64_t>(K - k0, 0, 32);
    __m256 v[4];
    for (int i = 0; i < 4; ++i)
      v[i] = n >= 8 * (i + 1) ? _mm256_loadu_ps(x + k0 + 8 * i)
                              : _mm256_maskload_ps(x + k0 + 8 * i, first_lanes(n - 8 * i));
    __m256 mx = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v[0], absmask), _mm256_and_ps(v[1], absmask)),
                              _mm256_max_ps(_mm256_and_ps(v[2], absmask), _mm256_and_ps(v[3], absmask)));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    const float dv = amax / 127.0f, inv = dv > 0.0f ? 1.0f / dv : 0.0f;
    d[b] = dv;
    const __m256 vi = _mm256_set1_ps(inv);
    __m256i c[4];
    for (int i = 0; i < 4; ++i)
      c[i] = _mm256_max_epi32(nlim, _mm256_min_epi32(lim, _mm256_cvtps_epi32(_mm256_mul_ps(v[i], vi))));
    // int32 → int8 in order: packs interleave 128-bit lanes, the permute undoes it.
    const __m256i p16a = _mm256_packs_epi32(c[0], c[1]), p16b = _mm256_packs_epi32(c[2], c[3]);
    const __m256i p8 = _mm256_packs_epi16(p16a, p16b);
    const __m256i ordered = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + k0), ordered);
    if (sums) {
      const __m256i s = _mm256_add_epi32(_mm256_add_epi32(c[0], c[1]), _mm256_add_epi32(c[2], c[3]));
      __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
      sums[b] = _mm_cvtsi128_si32(s4);
    }
  }
}

// ---------------------------------------------------------------------------------------
// Prefill panels in fp32.

void bf16_to_f32_row(const uint16_t* in, int64_t K, float* out) {
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + k)));
    _mm256_storeu_ps(out + k, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
  }
  for (; k < K; ++k) {
    const uint32_t u = uint32_t(in[k]) << 16;
    std::memcpy(out + k, &u, 4);
  }
}

void dequant_q8_row(const uint8_t* in, int64_t K, float* out) {
  float dv;
  std::memcpy(&dv, in + K, 4);
  const __m256 d = _mm256_set1_ps(dv);
  const __m256i off = _mm256_set1_epi32(128);
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    const __m256i c = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(in + k)));
    _mm256_storeu_ps(out + k, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(c, off))));
  }
  for (; k < K; ++k) out[k] = dv * float(int(in[k]) - 128);
}

void dequant_q4_row(const uint8_t* in, int64_t K, float* out) {
  const uint8_t* scales = in + K / 2;
  const __m128i low4 = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
  for (int64_t g = 0; g < K / 32; ++g) {
    uint16_t h;
    std::memcpy(&h, scales + 2 * g, 2);
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(h));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + g * 16));
    const __m128i lo = _mm_sub_epi8(_mm_and_si128(b, low4), eight);                     // codes j
    const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(b, 4), low4), eight);  // j + 16
    float* o = out + g * 32;
    _mm256_storeu_ps(o, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo))));
    _mm256_storeu_ps(o + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)))));
    _mm256_storeu_ps(o + 16, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi))));
    _mm256_storeu_ps(o + 24, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)))));
  }
}

}  // namespace hypic::kernels::avx2
#endif  // __x86_64__
