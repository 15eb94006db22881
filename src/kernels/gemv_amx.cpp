#include "kernels/gemv_amx.h"

// GCC 12's AVX-512 headers pass _mm512_undefined_*() as merge sources (see gemv.cpp).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "core/cpu.h"
#include "core/quant.h"
#if defined(__x86_64__)
#include "kernels/gemv_avx2.h"
#endif

#define HYPIC_AMX_TARGET \
  __attribute__((target("amx-tile,amx-int8,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16,f16c")))

namespace hypic::kernels::amx {
namespace {

// A chunk along K per tile product: 32 elements (64 bytes of bf16, 32 int8 codes = one
// quantization block).
constexpr int64_t kChunk = 32;

}  // namespace

#if defined(__x86_64__)
namespace {

// Tile registers: bf16: C accumulators of up to 4 row blocks 0–3, the activations' B tile 4,
// the weights' A tiles 5–7 (block 3 reuses 5); int8: see int8_tiles.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

TileConfig config(DType t, int64_t mp) {
  TileConfig c;
  if (t == DType::kQ4T) {  // C 0–1 [mp][16] int32, B 4–5 [8][64] codes, A 6–7 [mp][32] x
    for (int i : {0, 1, 6, 7}) c.rows[i] = uint8_t(mp);
    for (int i : {4, 5}) c.rows[i] = 8;
    for (int i : {0, 1, 4, 5}) c.colsb[i] = 64;
    for (int i : {6, 7}) c.colsb[i] = 32;
    return c;
  }
  const bool bf = t == DType::kBF16;
  for (int i = 0; i < 4; ++i) {
    c.rows[i] = 16;
    c.colsb[i] = uint16_t(4 * mp);
  }
  // bf16: B 4, A 5–7; int8: B 4–5, A 6–7. B: rows = K-chunk / 4 bytes.
  const int a0 = bf ? 5 : 6;
  for (int i = 4; i < a0; ++i) {
    c.rows[i] = bf ? 16 : 8;
    c.colsb[i] = uint16_t(4 * mp);
  }
  for (int i = a0; i < 8; ++i) {
    c.rows[i] = 16;
    c.colsb[i] = bf ? 64 : 32;
  }
  return c;
}



// ---------------------------------------------------------------------------------------
// BF16: C (fp32) accumulates over all of K in the tiles; NB blocks of 16 rows from `a`.

// tileloadd's asm names no memory input: a compiler barrier keeps the stores that filled the
// tile's source (the unpacked Q4 codes) before it.
#define HYPIC_TILE_LOAD(t, base, stride)  \
  do {                                    \
    __asm__ volatile("" ::: "memory");    \
    _tile_loadd(t, base, stride);         \
  } while (0)

#define HYPIC_AMX_BLOCKS(NB, OP)         \
  do {                                   \
    OP(0, 5);                            \
    if constexpr (NB > 1) OP(1, 6);      \
    if constexpr (NB > 2) OP(2, 7);      \
    if constexpr (NB > 3) OP(3, 5);      \
  } while (0)

template <int NB>
HYPIC_AMX_TARGET void bf16_tiles(const uint8_t* a, size_t as, const X& x, size_t pf,
                                 float* cbuf) {
  const size_t bs = size_t(4 * x.mp);
  const int64_t nc = x.kp / kChunk;
#define ZERO(i, t) _tile_zero(i)
  HYPIC_AMX_BLOCKS(NB, ZERO);
#undef ZERO
  for (int64_t c = 0; c < nc; ++c) {
    HYPIC_TILE_LOAD(4, x.b.data() + size_t(c) * 16 * bs, bs);
    const uint8_t* ac = a + size_t(c) * 64;
#define DP(i, t)                                  \
  HYPIC_TILE_LOAD(t, ac + size_t(i) * 16 * as, as); \
  _tile_dpbf16ps(i, t, 4)
    HYPIC_AMX_BLOCKS(NB, DP);
#undef DP
    if (pf)
      for (int r = 0; r < 16 * NB; ++r)
        _mm_prefetch(reinterpret_cast<const char*>(ac + size_t(r) * as + pf), _MM_HINT_T0);
  }
#define STORE(i, t) _tile_stored(i, cbuf + i * 16 * x.mp, bs)
  HYPIC_AMX_BLOCKS(NB, STORE);
#undef STORE
}

// ---------------------------------------------------------------------------------------
// Q8: one int32 product per block of 32 and block of 16 rows, scaled into fp32 accumulators
// acc [NB][16 rows][mp]; the A tiles come from `a` (rows `as` apart).

// Groups alternate between two sets of tiles (C 0–1 and B 4, or C 2–3 and B 5; A 6–7) and
// two C buffers, and each group's fp32 step runs after the next group's tile products are
// issued: the tile unit never waits for a stored C to be read back.
template <int NB>
HYPIC_AMX_TARGET void q8_tiles(const uint8_t* a, size_t as, const X& x, size_t pf, float* acc) {
  static_assert(NB == 1 || NB == 2);
  const int64_t mp = x.mp, ng = x.kp / kChunk;
  const size_t bs = size_t(4 * mp);
  alignas(64) int32_t cbuf[2][2][16 * 16];  // [group parity][block]
  for (int64_t i = 0; i < NB * 16 * mp; i += 16) _mm512_storeu_ps(acc + i, _mm512_setzero_ps());
  // acc += float(C + corr) · d_x for group g (its C in cbuf[g % 2]); entry i of a stored C's
  // zmm v is column (16 v + i) % mp = i % mp, as dx and corr are laid out.
  auto scale = [&](int64_t g) HYPIC_AMX_TARGET {
    const __m512 dx = _mm512_loadu_ps(x.dx.data() + g * 16);
    const __m512i corr = _mm512_loadu_si512(x.corr.data() + g * 16);
    for (int i = 0; i < NB; ++i) {
      float* ai = acc + i * 16 * mp;
      const int32_t* c = cbuf[g % 2][i];
      for (int64_t v = 0; v < mp; ++v) {
        const __m512 dot = _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_load_si512(c + v * 16), corr));
        _mm512_storeu_ps(ai + v * 16, _mm512_fmadd_ps(dot, dx, _mm512_loadu_ps(ai + v * 16)));
      }
    }
  };
  for (int64_t g = 0; g < ng; ++g) {
    const int par = int(g % 2);
    const uint8_t* ag = a + size_t(g) * 32;
    if (pf && g % 2 == 0)
      for (int r = 0; r < 16 * NB; ++r)
        _mm_prefetch(reinterpret_cast<const char*>(ag + size_t(r) * as + pf), _MM_HINT_T0);
#define GROUP(B, C0, C1)                                      \
  HYPIC_TILE_LOAD(B, x.b.data() + size_t(g) * 8 * bs, bs);    \
  HYPIC_TILE_LOAD(6, ag, as);                                 \
  _tile_zero(C0);                                             \
  _tile_dpbusd(C0, 6, B);                                     \
  _tile_stored(C0, cbuf[par][0], bs);                         \
  if constexpr (NB > 1) {                                     \
    HYPIC_TILE_LOAD(7, ag + 16 * as, as);                     \
    _tile_zero(C1);                                           \
    _tile_dpbusd(C1, 7, B);                                   \
    _tile_stored(C1, cbuf[par][1], bs);                       \
  }
    if (par == 0) {
      GROUP(4, 0, 1)
    } else {
      GROUP(5, 2, 3)
    }
#undef GROUP
    if (g > 0) scale(g - 1);
  }
  scale(ng - 1);
}

// ---------------------------------------------------------------------------------------
// Q4T: a group of v ≤ 16 rows (core/quant.h) as the B operand, x's codes (x.a) as A:
// C [mp][16] int32 per block, rows in lanes, scaled into out [mp][16]. Blocks alternate
// between tile sets (C 0 / 1, B 4 / 5, A 6 / 7) and unpack buffers, each block's fp32 step
// running after the next block's product is issued.
// MP = x.mp: the accumulators stay in registers (columns ≥ M hold zeros: x's codes, scales
// and sums there are 0).
template <int MP>
HYPIC_AMX_TARGET void q4t_tiles(const uint8_t* w, int v, const X& x, size_t pf, float* out) {
  const int64_t ng = x.K / kChunk;
  const __mmask16 lanes = v >= 16 ? __mmask16(0xffff) : __mmask16((1u << v) - 1);
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const size_t bsz = size_t(18 * v), as = size_t(x.kp);
  alignas(64) uint8_t bbuf[2][8 * 64];  // B: quad q of the 16 rows, row q
  alignas(64) int32_t cbuf[2][MP * 16];
  __m512 acc[MP], dw[2];
  for (int m = 0; m < MP; ++m) acc[m] = _mm512_setzero_ps();
  auto scale = [&](int64_t g) HYPIC_AMX_TARGET {
    const __m512 d = dw[g % 2];
    for (int m = 0; m < MP; ++m) {
      const __m512 dot = _mm512_cvtepi32_ps(_mm512_add_epi32(
          _mm512_load_si512(cbuf[g % 2] + m * 16), _mm512_set1_epi32(x.corr[size_t(g * 16 + m)])));
      const __m512 s = _mm512_mul_ps(d, _mm512_set1_ps(x.dx[size_t(g * 16 + m)]));
      acc[m] = _mm512_fmadd_ps(dot, s, acc[m]);
    }
  };
  for (int64_t g = 0; g < ng; ++g) {
    const int par = int(g % 2);
    const uint8_t* p = w + size_t(g) * bsz;
    if (pf)
      for (size_t o = 0; o < bsz; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + pf + o), _MM_HINT_T0);
    for (int d = 0; d < 4; ++d) {
      const __m512i c = _mm512_maskz_loadu_epi32(lanes, p + 4 * d * v);
      _mm512_store_si512(bbuf[par] + 64 * d, _mm512_and_si512(c, low4));
      _mm512_store_si512(bbuf[par] + 64 * (d + 4), _mm512_and_si512(_mm512_srli_epi16(c, 4), low4));
    }
    dw[par] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes, p + 16 * v));
    const int8_t* ag = x.a.data() + size_t(g) * kChunk;
    if (par == 0) {
      HYPIC_TILE_LOAD(4, bbuf[0], 64);
      HYPIC_TILE_LOAD(6, ag, as);
      _tile_zero(0);
      _tile_dpbsud(0, 6, 4);
      _tile_stored(0, cbuf[0], 64);
    } else {
      HYPIC_TILE_LOAD(5, bbuf[1], 64);
      HYPIC_TILE_LOAD(7, ag, as);
      _tile_zero(1);
      _tile_dpbsud(1, 7, 5);
      _tile_stored(1, cbuf[1], 64);
    }
    if (g > 0) scale(g - 1);
  }
  scale(ng - 1);
  for (int m = 0; m < MP; ++m) _mm512_storeu_ps(out + m * 16, acc[m]);
}

#undef HYPIC_AMX_BLOCKS
#undef HYPIC_TILE_LOAD

template <typename F>
void by_blocks(int nb, F&& f) {
  switch (nb) {
    case 4: return f(std::integral_constant<int, 4>());
    case 3: return f(std::integral_constant<int, 3>());
    case 2: return f(std::integral_constant<int, 2>());
    default: return f(std::integral_constant<int, 1>());
  }
}

// ldtilecfg through asm that names the config as its input: GCC 12's _tile_loadconfig does
// not, and the stores that fill the config were dropped as dead.
HYPIC_AMX_TARGET void load_config(const TileConfig& c) { __asm__ volatile("ldtilecfg %0" ::"m"(c)); }
HYPIC_AMX_TARGET void release_tiles() { _tile_release(); }

}  // namespace
#endif  // __x86_64__

bool available() {
#if defined(__x86_64__)
  return cpu::has(cpu::kAmxTile | cpu::kAmxInt8 | cpu::kAmxBf16);
#else
  return false;
#endif
}

#if defined(__x86_64__)
namespace {

// quantize_blocks on AVX-512: the same operations per element (|x| max, d = amax / 127,
// round-to-nearest-even of x · (1 / d) by cvtps under the default rounding mode, as
// nearbyint, clamped), so bit-identical to the scalar loop.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void quantize_blocks_avx512(
    const float* x, int64_t K, int64_t kp, int8_t* q, float* d, int32_t* sums) {
  const __m512i lim = _mm512_set1_epi32(127), nlim = _mm512_set1_epi32(-127);
  for (int64_t b = 0; b * kChunk < kp; ++b) {
    const int64_t k0 = b * kChunk, n = std::clamp<int64_t>(K - k0, 0, kChunk);
    const __mmask16 m0 = n >= 16 ? __mmask16(0xffff) : __mmask16((1u << n) - 1);
    const __mmask16 m1 = n >= 32 ? __mmask16(0xffff) : n <= 16 ? __mmask16(0) : __mmask16((1u << (n - 16)) - 1);
    const __m512 v0 = _mm512_maskz_loadu_ps(m0, x + k0), v1 = _mm512_maskz_loadu_ps(m1, x + k0 + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float dv = amax / 127.0f, inv = dv > 0.0f ? 1.0f / dv : 0.0f;
    d[b] = dv;
    const __m512 vi = _mm512_set1_ps(inv);
    const __m512i i0 = _mm512_max_epi32(nlim, _mm512_min_epi32(lim, _mm512_cvtps_epi32(_mm512_mul_ps(v0, vi))));
    const __m512i i1 = _mm512_max_epi32(nlim, _mm512_min_epi32(lim, _mm512_cvtps_epi32(_mm512_mul_ps(v1, vi))));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + k0), _mm512_cvtepi32_epi8(i0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + k0 + 16), _mm512_cvtepi32_epi8(i1));
    if (sums) sums[b] = _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
  }
}

}  // namespace
#endif  // __x86_64__

void quantize_blocks(const float* x, int64_t K, int64_t kp, int8_t* q, float* d, int32_t* sums) {
#if defined(__x86_64__)
  if (cpu::has(cpu::kAvx512F | cpu::kAvx512Bw | cpu::kAvx512Vl))
    return quantize_blocks_avx512(x, K, kp, q, d, sums);
  if (cpu::has(cpu::kAvx2 | cpu::kFma)) return avx2::quantize_blocks(x, K, kp, q, d, sums);
#endif
  for (int64_t b = 0; b * kChunk < kp; ++b) {
    const int64_t k0 = b * kChunk, k1 = std::min(K, k0 + kChunk);
    float amax = 0.0f;
    for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(x[k]));
    const float dv = amax / 127.0f, inv = dv > 0.0f ? 1.0f / dv : 0.0f;
    d[b] = dv;
    int32_t s = 0;
    for (int64_t k = k0; k < k0 + kChunk; ++k) {
      q[k] = k < k1 ? int8_t(std::clamp(int(std::nearbyint(x[k] * inv)), -127, 127)) : 0;
      s += q[k];
    }
    if (sums) sums[b] = s;
  }
}

void prepare(const float* x, int64_t ldx, int64_t M, int64_t K, DType t, X& out) {
  out.t = t;
  out.M = M;
  out.K = K;
  out.mp = M <= 1 ? 1 : M <= 2 ? 2 : M <= 4 ? 4 : M <= 8 ? 8 : 16;
  out.kp = (K + kChunk - 1) / kChunk * kChunk;
  const int64_t mp = out.mp, kp = out.kp, nc = kp / kChunk;
  out.b.assign(size_t(kp * mp * (t == DType::kBF16 ? 2 : 1)), 0);
  if (t == DType::kBF16) {
    // Chunk c, row r, column m: x_m[32c + 2r], x_m[32c + 2r + 1] as bf16.
    auto* b = reinterpret_cast<uint32_t*>(out.b.data());
    thread_local std::vector<uint16_t> row;
    row.assign(size_t(kp), 0);
    for (int64_t m = 0; m < M; ++m) {
      from_f32(DType::kBF16, x + m * ldx, row.data(), size_t(K));
      for (int64_t p = 0; p < kp / 2; ++p)  // pair p = row p of the B tiles, stacked
        std::memcpy(b + p * mp + m, row.data() + 2 * p, 4);
    }
    return;
  }
  // Block g, row r, column m: the codes x_m[32g + 4r .. 32g + 4r + 3].
  const int offset = t == DType::kQ8 ? 128 : 8;
  out.dx.assign(size_t(nc * 16), 0.0f);
  out.corr.assign(size_t(nc * 16), 0);
  thread_local std::vector<int8_t> q;
  thread_local std::vector<float> d;
  thread_local std::vector<int32_t> sums;
  q.resize(size_t(kp));
  d.resize(size_t(nc));
  sums.resize(size_t(nc));
  auto* b = reinterpret_cast<uint32_t*>(out.b.data());
  if (t == DType::kQ4T) out.a.assign(size_t(mp * kp), 0);
  for (int64_t m = 0; m < M; ++m) {
    quantize_blocks(x + m * ldx, K, kp, q.data(), d.data(), sums.data());
    if (t == DType::kQ4T) std::copy(q.begin(), q.end(), out.a.begin() + m * kp);
    if (mp == 1) {
      std::memcpy(b, q.data(), size_t(kp));
    } else {
      for (int64_t p = 0; p < kp / 4; ++p)  // quad p = row p of the B tiles, stacked
        std::memcpy(b + p * mp + m, q.data() + 4 * p, 4);
    }
    for (int64_t g = 0; g < nc; ++g) {
      const int32_t s = sums[size_t(g)];
      for (int64_t i = m; i < 16; i += mp) {
        out.dx[size_t(g * 16 + i)] = d[size_t(g)];
        out.corr[size_t(g * 16 + i)] = -offset * s;
      }
    }
  }
}

#if defined(__x86_64__)
void rows(const uint8_t* w, size_t ws, int64_t n0, int64_t n1, const X& x, float* y,
          int64_t ldy, bool accumulate, size_t pf) {
  const DType t = x.t;
  const int64_t mp = x.mp, K = x.K, kp = x.kp;
  thread_local std::vector<float> out;
  out.resize(size_t(4 * 16 * mp));
  load_config(config(t, mp));
  if (t == DType::kQ4T) {  // group by group; n0 and n1 split none
    for (int64_t n = n0; n < n1; n += 16) {
      const int valid = int(std::min<int64_t>(16, n1 - n));
      switch (mp) {
        case 1: q4t_tiles<1>(w + size_t(n) * ws, valid, x, pf, out.data()); break;
        case 2: q4t_tiles<2>(w + size_t(n) * ws, valid, x, pf, out.data()); break;
        case 4: q4t_tiles<4>(w + size_t(n) * ws, valid, x, pf, out.data()); break;
        case 8: q4t_tiles<8>(w + size_t(n) * ws, valid, x, pf, out.data()); break;
        default: q4t_tiles<16>(w + size_t(n) * ws, valid, x, pf, out.data()); break;
      }
      for (int64_t m = 0; m < x.M; ++m)
        for (int r = 0; r < valid; ++r) {
          float& dst = y[m * ldy + n + r];
          dst = accumulate ? dst + out[size_t(m * 16 + r)] : out[size_t(m * 16 + r)];
        }
    }
    return release_tiles();
  }
  const size_t esize = t == DType::kBF16 ? 2 : 1;
  // bf16 and Q8 tiles load straight from W when its rows hold whole chunks; otherwise (and
  // for the last < 16 rows) from a zero-padded copy.
  const bool direct_k = K % kChunk == 0;
  thread_local std::vector<uint8_t> stage;
  for (int64_t n = n0; n < n1;) {
    const int64_t left = n1 - n;
    int nb = 1, valid = int(std::min<int64_t>(16, left));
    const uint8_t* a = w + size_t(n) * ws;
    size_t as = ws, apf = pf;
    if (left >= 16 && direct_k) {
      nb = int(std::min<int64_t>(t == DType::kBF16 ? 4 : 2, left / 16));
      valid = 16 * nb;
    } else {
      as = size_t(kp) * esize;
      stage.assign(16 * as, 0);
      for (int r = 0; r < valid; ++r)
        std::memcpy(stage.data() + size_t(r) * as, a + size_t(r) * ws, size_t(K) * esize);
      a = stage.data();
      apf = 0;
    }
    by_blocks(nb, [&](auto c) {
      constexpr int NB = decltype(c)::value;
      if constexpr (NB <= 2) {
        if (t == DType::kQ8) return q8_tiles<NB>(a, as, x, apf, out.data());
      }
      bf16_tiles<NB>(a, as, x, apf, out.data());
    });
    for (int r = 0; r < valid; ++r) {
      float d = 1.0f;
      if (t == DType::kQ8) std::memcpy(&d, w + size_t(n + r) * ws + size_t(K), 4);
      const float* o = out.data() + size_t(r) * size_t(mp);  // blocks are 16 · mp apart
      for (int64_t m = 0; m < x.M; ++m) {
        float& dst = y[m * ldy + n + r];
        const float v = o[m] * d;
        dst = accumulate ? dst + v : v;
      }
    }
    n += valid;
  }
  release_tiles();
}
#endif  // __x86_64__

}  // namespace hypic::kernels::amx
