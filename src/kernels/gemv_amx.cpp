#include "kernels/gemv_amx.h"

// GCC 12's AVX-512 headers pass _mm512_undefined_*() as merge sources (see gemv.cpp).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "core/quant.h"

#define HYPIC_AMX_TARGET \
  __attribute__((target("amx-tile,amx-int8,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16,f16c")))

namespace hypic::kernels::amx {
namespace {

// Tile registers: bf16: C accumulators of up to 4 row blocks 0–3, the activations' B tile 4,
// the weights' A tiles 5–7 (block 3 reuses 5); int8: see int8_tiles.
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// A chunk along K per tile product: 32 elements (64 bytes of bf16, 32 int8 codes = one
// quantization block).
constexpr int64_t kChunk = 32;

TileConfig config(DType t, int64_t mp) {
  TileConfig c;
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

bool request_tiles() {
  // ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA (Linux ≥ 5.16): once per process, all threads.
  constexpr long kReqPerm = 0x1023, kTileData = 18;
  return syscall(SYS_arch_prctl, kReqPerm, kTileData) == 0;
}

// Column index i of a tile row holds activation row i % mp; for Q4 the entry of zmm v of a
// stored C tile ([16 rows][mp] int32) belongs to weight row (16 v + i) / mp.
alignas(64) const int32_t kRowOf[5][16][16] = {
#define R(mp, v)                                                                            \
  {(16 * v + 0) / mp, (16 * v + 1) / mp, (16 * v + 2) / mp, (16 * v + 3) / mp,             \
   (16 * v + 4) / mp, (16 * v + 5) / mp, (16 * v + 6) / mp, (16 * v + 7) / mp,             \
   (16 * v + 8) / mp, (16 * v + 9) / mp, (16 * v + 10) / mp, (16 * v + 11) / mp,           \
   (16 * v + 12) / mp, (16 * v + 13) / mp, (16 * v + 14) / mp, (16 * v + 15) / mp}
#define V16(mp) \
  {R(mp, 0), R(mp, 1), R(mp, 2), R(mp, 3), R(mp, 4), R(mp, 5), R(mp, 6), R(mp, 7), R(mp, 8), \
   R(mp, 9), R(mp, 10), R(mp, 11), R(mp, 12), R(mp, 13), R(mp, 14), R(mp, 15)}
    V16(1), V16(2), V16(4), V16(8), V16(16)
#undef V16
#undef R
};
int log2_of(int64_t mp) { return mp == 1 ? 0 : mp == 2 ? 1 : mp == 4 ? 2 : mp == 8 ? 3 : 4; }

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
// Q8 / Q4: one int32 product per block of 32 and block of 16 rows, scaled into fp32
// accumulators acc [NB][16 rows][mp]. Q8's A tiles come from `a` (rows `as` apart); Q4's are
// unpacked per block from the packed rows at `w` (`ws` apart, rows ≥ `valid` read row 0).

// Q4 codes of block g, rows r0..r0+15 → abuf [16][32] offset-binary bytes in natural order.
HYPIC_AMX_TARGET inline void unpack_q4(const uint8_t* w, size_t ws, int valid, int r0,
                                       int64_t g, uint8_t* abuf) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i i01 = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
  const __m512i i23 = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
  for (int r = 0; r < 16; r += 4) {
    auto row = [&](int k) {
      const int n = r0 + r + k < valid ? r0 + r + k : 0;
      return _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + size_t(n) * ws + size_t(g) * 16));
    };
    __m512i v = _mm512_castsi128_si512(row(0));
    v = _mm512_inserti32x4(v, row(1), 1);
    v = _mm512_inserti32x4(v, row(2), 2);
    v = _mm512_inserti32x4(v, row(3), 3);
    const __m512i lo = _mm512_and_si512(v, low4);
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
    _mm512_store_si512(abuf + r * 32, _mm512_permutex2var_epi64(lo, i01, hi));
    _mm512_store_si512(abuf + r * 32 + 64, _mm512_permutex2var_epi64(lo, i23, hi));
  }
}

// Groups alternate between two sets of tiles (C 0–1 and B 4, or C 2–3 and B 5; A 6–7) and
// two C buffers, and each group's fp32 step runs after the next group's tile products are
// issued: the tile unit never waits for a stored C to be read back.
template <int NB, bool Q4>
HYPIC_AMX_TARGET void int8_tiles(const uint8_t* a, size_t as, const uint8_t* w, size_t ws,
                                 int valid, const X& x, size_t pf, float* acc) {
  static_assert(NB == 1 || NB == 2);
  const int64_t mp = x.mp, ng = x.kp / kChunk, K = x.K;
  const size_t bs = size_t(4 * mp);
  alignas(64) uint8_t abuf[2][16 * 32];
  alignas(64) int32_t cbuf[2][2][16 * 16];  // [group parity][block]
  alignas(64) float dw[2][2][2][16];        // Q4: [pair parity][block][g % 2] d_w per row
  const int32_t(*row_of)[16] = kRowOf[log2_of(mp)];
  __m512i gidx[2];  // Q4: byte offsets of the rows' scale pairs (rows ≥ valid: row 0)
  for (int i = 0; i < NB; ++i) {
    alignas(64) int32_t o[16];
    for (int r = 0; r < 16; ++r)
      o[r] = int32_t(size_t(i * 16 + r < valid ? i * 16 + r : 0) * ws + size_t(K / 2));
    gidx[i] = _mm512_load_si512(o);
  }
  for (int64_t i = 0; i < NB * 16 * mp; i += 16) _mm512_storeu_ps(acc + i, _mm512_setzero_ps());
  // acc += float(C + corr) · s for group g (its C in cbuf[g % 2]).
  auto scale = [&](int64_t g) HYPIC_AMX_TARGET {
    const __m512 dx = _mm512_loadu_ps(x.dx.data() + g * 16);
    const __m512i corr = _mm512_loadu_si512(x.corr.data() + g * 16);
    for (int i = 0; i < NB; ++i) {
      float* ai = acc + i * 16 * mp;
      const int32_t* c = cbuf[g % 2][i];
      __m512 s = dx;
      const __m512 dwg = _mm512_load_ps(dw[g / 2 % 2][i][g % 2]);
      for (int64_t v = 0; v < mp; ++v) {
        const __m512 dot = _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_load_si512(c + v * 16), corr));
        if constexpr (Q4) s = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_load_si512(row_of[v]), dwg), dx);
        _mm512_storeu_ps(ai + v * 16, _mm512_fmadd_ps(dot, s, _mm512_loadu_ps(ai + v * 16)));
      }
    }
  };
  for (int64_t g = 0; g < ng; ++g) {
    const int par = int(g % 2);
    const uint8_t* ag = a + size_t(g) * 32;
    if constexpr (Q4) {
      // The f16 scales of blocks g and g + 1 of each row in one 4-byte gather (for the last
      // block of an odd count, the pair ending at it: never past the row).
      const bool last_odd = g + 1 == ng && ng % 2 == 1;
      const __m512i off = _mm512_set1_epi32(int32_t(last_odd ? 2 * g - 2 : 2 * g));
      if (par == 0)
        for (int i = 0; i < NB; ++i) {
          const __m512i u = _mm512_i32gather_epi32(_mm512_add_epi32(gidx[i], off), w, 1);
          const __m512 lo = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(u));
          const __m512 hi = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(u, 16)));
          _mm512_store_ps(dw[g / 2 % 2][i][0], last_odd ? hi : lo);
          _mm512_store_ps(dw[g / 2 % 2][i][1], hi);
        }
      for (int i = 0; i < NB; ++i) unpack_q4(w, ws, valid, i * 16, g, abuf[i]);
      ag = abuf[0];
      if (pf && g % 4 == 0)
        for (int r = 0; r < 16 * NB && r < valid; ++r) {
          const uint8_t* p = w + size_t(r) * ws;
          _mm_prefetch(reinterpret_cast<const char*>(p + size_t(g) * 16 + pf), _MM_HINT_T0);
          if (g % 32 == 0)
            _mm_prefetch(reinterpret_cast<const char*>(p + size_t(K / 2 + 2 * g) + pf), _MM_HINT_T0);
        }
    } else if (pf && g % 2 == 0) {
      for (int r = 0; r < 16 * NB; ++r)
        _mm_prefetch(reinterpret_cast<const char*>(ag + size_t(r) * as + pf), _MM_HINT_T0);
    }
    // Block i's A: Q4 from abuf[i] (rows 32 apart), Q8 straight from the rows.
    const size_t astr = Q4 ? 32 : as, ablk = Q4 ? sizeof(abuf[0]) : 16 * as;
#define GROUP(B, C0, C1)                                      \
  HYPIC_TILE_LOAD(B, x.b.data() + size_t(g) * 8 * bs, bs);    \
  HYPIC_TILE_LOAD(6, ag, astr);                               \
  _tile_zero(C0);                                             \
  _tile_dpbusd(C0, 6, B);                                     \
  _tile_stored(C0, cbuf[par][0], bs);                         \
  if constexpr (NB > 1) {                                     \
    HYPIC_TILE_LOAD(7, ag + ablk, astr);                      \
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

bool available() {
  static const bool ok = [] {
    const char* e = std::getenv("HYPIC_AMX");
    if (e != nullptr && std::string(e) == "0") return false;
    return __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-int8") &&
           __builtin_cpu_supports("amx-bf16") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16") &&
           request_tiles();
  }();
  return ok;
}

void quantize_blocks(const float* x, int64_t K, int64_t kp, int8_t* q, float* d) {
  for (int64_t b = 0; b * kChunk < kp; ++b) {
    const int64_t k0 = b * kChunk, k1 = std::min(K, k0 + kChunk);
    float amax = 0.0f;
    for (int64_t k = k0; k < k1; ++k) amax = std::max(amax, std::fabs(x[k]));
    const float dv = amax / 127.0f, inv = dv > 0.0f ? 1.0f / dv : 0.0f;
    d[b] = dv;
    for (int64_t k = k0; k < k0 + kChunk; ++k)
      q[k] = k < k1 ? int8_t(std::clamp(int(std::nearbyint(x[k] * inv)), -127, 127)) : 0;
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
  q.resize(size_t(kp));
  d.resize(size_t(nc));
  auto* b = reinterpret_cast<uint32_t*>(out.b.data());
  for (int64_t m = 0; m < M; ++m) {
    quantize_blocks(x + m * ldx, K, kp, q.data(), d.data());
    for (int64_t p = 0; p < kp / 4; ++p)  // quad p = row p of the B tiles, stacked
      std::memcpy(b + p * mp + m, q.data() + 4 * p, 4);
    for (int64_t g = 0; g < nc; ++g) {
      int32_t s = 0;
      for (int64_t k = g * kChunk; k < (g + 1) * kChunk; ++k) s += q[size_t(k)];
      for (int64_t i = m; i < 16; i += mp) {
        out.dx[size_t(g * 16 + i)] = d[size_t(g)];
        out.corr[size_t(g * 16 + i)] = -offset * s;
      }
    }
  }
}

void rows(const uint8_t* w, size_t ws, int64_t n0, int64_t n1, const X& x, float* y,
          int64_t ldy, bool accumulate, size_t pf) {
  const DType t = x.t;
  const int64_t mp = x.mp, K = x.K, kp = x.kp;
  const size_t esize = t == DType::kBF16 ? 2 : 1;
  // bf16 and Q8 tiles load straight from W when its rows hold whole chunks; otherwise (and
  // for the last < 16 rows) from a zero-padded copy.
  const bool direct_k = t == DType::kQ4 || K % kChunk == 0;
  thread_local std::vector<uint8_t> stage;
  thread_local std::vector<float> out;
  out.resize(size_t(4 * 16 * mp));
  load_config(config(t, mp));
  for (int64_t n = n0; n < n1;) {
    const int64_t left = n1 - n;
    int nb = 1, valid = int(std::min<int64_t>(16, left));
    const uint8_t* a = w + size_t(n) * ws;
    size_t as = ws, apf = pf;
    if (left >= 16 && direct_k) {
      nb = int(std::min<int64_t>(t == DType::kBF16 ? 4 : 2, left / 16));
      valid = 16 * nb;
    } else if (t != DType::kQ4) {
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
        if (t == DType::kQ8) return int8_tiles<NB, false>(a, as, nullptr, 0, valid, x, apf, out.data());
        if (t == DType::kQ4) return int8_tiles<NB, true>(a, as, w + size_t(n) * ws, ws, valid, x, apf, out.data());
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

}  // namespace hypic::kernels::amx
