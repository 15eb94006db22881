#include "kernels/gemv.h"

// GCC 12's AVX-512 headers pass _mm512_undefined_*() as merge sources, which -Wuninitialized
// reports at every use inside these kernels; the warning is about the headers, not this file.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif
#include <strings.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "core/cpu.h"
#include "core/parallel.h"
#include "core/quant.h"
#include "kernels/gemv_amx.h"
#if defined(__x86_64__)
#include "kernels/gemm_avx2.h"
#include "kernels/gemv_avx2.h"
#endif
#include "kernels/gemv_ggml.h"

namespace hypic::kernels {
namespace {

std::atomic<GemvPath> g_path{[] {
  const char* e = std::getenv("HYPIC_BATCH_INVARIANT");
  return e != nullptr && std::string(e) == "1" ? GemvPath::kBatchInvariant : GemvPath::kBest;
}()};
std::atomic<uint64_t> g_weight_bytes{0};

// The vector kernel family a type runs on under the ISA cap (core/cpu.h); the AMX tiles are
// chosen on top of it (use_amx). aarch64: every type on NEON, Q8 and Q4T on the dot-product
// instructions where there are.
enum class Vec { kGeneric, kAvx2, kAvxVnni, kAvx512, kNeon, kDotprod };

Vec vec_kernel(DType t) {
#if defined(__aarch64__)
  if (!cpu::has(cpu::kNeonFeature)) return Vec::kGeneric;
  const bool integer = t == DType::kQ8 || t == DType::kQ4T;
  return integer && cpu::has(cpu::kDotprod) ? Vec::kDotprod : Vec::kNeon;
#else
  using namespace cpu;
  const uint32_t avx512 = kAvx512F | kAvx512Bw | kAvx512Vl;
  switch (t) {
    case DType::kF32:
      if (has(avx512)) return Vec::kAvx512;
      break;
    case DType::kBF16:
      if (has(avx512 | kAvx512Bf16)) return Vec::kAvx512;
      break;
    default:  // Q8, Q4T
      if (has(avx512 | kAvx512Vnni)) return Vec::kAvx512;
      if (has(kAvx2 | kFma | kF16c | kAvxVnni)) return Vec::kAvxVnni;
      break;
  }
  return has(kAvx2 | kFma | kF16c) ? Vec::kAvx2 : Vec::kGeneric;
#endif
}

// AMX tiles take BF16, Q8 and Q4T (F32 stays on AVX-512).
bool cpu_amx(DType t) { return t != DType::kF32 && amx::available(); }

// bf16 products of up to this many rows of x run on the AVX512-BF16 kernel even where the
// tiles are available (not under kBatchInvariant: tdpbf16ps sums in an order of its own, so
// the two kernels' results differ in the last bits). One row fills 1 of a tile's 16 columns,
// and 64 weight rows are read side by side against the vector kernel's 4. Measured with
// `hypic bench decode` (Xeon with AMX, alternate runs), vector / tiles tok/s: 35B-A3B shape
// 4 layers B = 1 13.8 / 10.2–12.7, B = 2 24.7–24.8 / 20.4–24.3, B = 4 45.3–45.7 / 42.9–44.7;
// hypic-tiny B = 1 1,476–1,921 / 1,461–1,608, B = 4 3,474–3,601 / 4,008–4,198.
constexpr int64_t kBf16VectorMaxRows = 2;

bool use_amx(DType t, int64_t M) {
  return cpu_amx(t) && (t != DType::kBF16 || M > kBf16VectorMaxRows ||
                        g_path.load() == GemvPath::kBatchInvariant);
}

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// ---------------------------------------------------------------------------------------
// x prepared once per call, shared by every row of W.

// BF16: [M][kp] bf16, kp = K rounded up to 32, zero padded.
struct XBf16 {
  int64_t kp = 0;
  std::vector<uint16_t> v;
};

void prep_bf16(const float* x, int64_t ldx, int64_t M, int64_t K, XBf16& X) {
  X.kp = round_up(K, 32);
  X.v.assign(size_t(M * X.kp), 0);
  for (int64_t m = 0; m < M; ++m) from_f32(DType::kBF16, x + m * ldx, X.v.data() + m * X.kp, size_t(K));
}

// F32: [M][kp] fp32, kp = K rounded up to 16, zero padded.
struct XF32 {
  int64_t kp = 0;
  std::vector<float> v;
};

void prep_f32(const float* x, int64_t ldx, int64_t M, int64_t K, XF32& X) {
  X.kp = round_up(K, 16);
  X.v.assign(size_t(M * X.kp), 0.0f);
  for (int64_t m = 0; m < M; ++m) std::copy(x + m * ldx, x + m * ldx + K, X.v.data() + m * X.kp);
}

// Q8 (and Q4T's portable path, which reads q and dx): x quantized per block of 32 (kp = K
// rounded up to 64, zero padded).
//   q [M][kp] codes, dx [M][kp/32] block scales (the portable path), and per dword lane of q
//   (4 codes): corr [M][kp/4] = −128 · Σ of the lane's codes (the weights' offset-binary
//   bias), dl [M][kp/4] = d_x of the lane's block.
struct XQuant {
  int64_t kp = 0;
  std::vector<int8_t> q;
  std::vector<float> dx, dl;
  std::vector<int32_t> corr;
  std::vector<int16_t> sum16;  // ggml's blocks: code sums per 16
};

void prep_q8(const float* x, int64_t ldx, int64_t M, int64_t K, XQuant& X) {
  const int64_t kp = X.kp = round_up(K, 64), nb = kp / 32, nl = kp / 4;
  X.q.assign(size_t(M * kp), 0);
  X.dx.assign(size_t(M * nb), 0.0f);
  X.dl.assign(size_t(M * nl), 0.0f);
  X.corr.assign(size_t(M * nl), 0);
  for (int64_t m = 0; m < M; ++m) {
    int8_t* q = X.q.data() + m * kp;
    amx::quantize_blocks(x + m * ldx, K, kp, q, X.dx.data() + m * nb);
    for (int64_t l = 0; l < nl; ++l) {
      const int64_t p = l * 4;
      X.corr[size_t(m * nl + l)] = -128 * (q[p] + q[p + 1] + q[p + 2] + q[p + 3]);
      X.dl[size_t(m * nl + l)] = X.dx[size_t(m * nb + p / 32)];
    }
  }
}

// ggml's blocks: x per group of kernels/gemv_ggml.h, the code sums per 32 in corr, per 16 in
// sum16.
void prep_ggml(DType t, const float* x, int64_t ldx, int64_t M, int64_t K, XQuant& X) {
  const int64_t group = ggml::x_group(t), kp = X.kp = round_up(K, group);
  X.q.assign(size_t(M * kp), 0);
  X.dx.assign(size_t(M * kp / group), 0.0f);
  X.corr.assign(size_t(M * kp / 32), 0);
  X.sum16.assign(size_t(M * kp / 16), 0);
  for (int64_t m = 0; m < M; ++m)
    ggml::quantize_x(x + m * ldx, K, kp, group, X.q.data() + m * kp, X.dx.data() + m * kp / group,
                     X.corr.data() + m * kp / 32, X.sum16.data() + m * kp / 16);
}

// ggml's blocks on 256-bit integer ops (AVX2; no AVX-512 kernels for them yet), else the
// portable code.
bool ggml_avx2(DType) {
#if defined(__x86_64__)
  return cpu::has(cpu::kAvx2 | cpu::kFma | cpu::kF16c);
#else
  return false;
#endif
}

#if defined(__x86_64__)

// Sum of 16 lanes as a fixed tree (GCC 12's _mm512_reduce_add_ps warns spuriously).
__attribute__((target("avx512f"))) inline float hsum(__m512 v) {
  alignas(64) float t[16];
  _mm512_store_ps(t, v);
  for (int w = 8; w >= 1; w /= 2)
    for (int i = 0; i < w; ++i) t[i] += t[i + w];
  return t[0];
}

// The RB × MB accumulators of a kernel: cleared, and summed into out[r * MB + m].
template <int RB, int MB>
__attribute__((target("avx512f"), always_inline)) inline void zero(__m512 (&acc)[RB][MB]) {
#pragma GCC unroll 4
  for (int r = 0; r < RB; ++r)
#pragma GCC unroll 4
    for (int m = 0; m < MB; ++m) acc[r][m] = _mm512_setzero_ps();
}
template <int RB, int MB>
__attribute__((target("avx512f"), always_inline)) inline void store_sums(__m512 (&acc)[RB][MB],
                                                                          float* out) {
#pragma GCC unroll 4
  for (int r = 0; r < RB; ++r)
#pragma GCC unroll 4
    for (int m = 0; m < MB; ++m) out[r * MB + m] = hsum(acc[r][m]);
}

// 64 bytes of each of RB rows at byte offset `off` (those past `left` bytes read as zero), and
// a prefetch of the same bytes RB rows further on: the next block's rows arrive while this
// block computes.
template <int RB>
__attribute__((target("avx512f,avx512bw"), always_inline)) inline void load_rows(
    const uint8_t* w, size_t ws, size_t pf, size_t off, int64_t left, __m512i (&wr)[RB]) {
  const __mmask64 mk = left >= 64 ? ~__mmask64(0) : (__mmask64(1) << left) - 1;
#pragma GCC unroll 4
  for (int r = 0; r < RB; ++r) {
    wr[r] = _mm512_maskz_loadu_epi8(mk, w + size_t(r) * ws + off);
    _mm_prefetch(reinterpret_cast<const char*>(w + size_t(r) * ws + pf + off), _MM_HINT_T0);
  }
}

// ---------------------------------------------------------------------------------------
// Kernels: RB rows of W (starting at w, `ws` bytes apart) against MB rows of x (from m0);
// out[r * MB + m] = the row's dot product (for Q8 before the row scale).

template <int RB, int MB>
__attribute__((target("avx512f,avx512bw,avx512bf16"))) void bf16_block(
    const uint8_t* w, size_t ws, size_t pf, int64_t K, const XBf16& X, int64_t m0, float* out) {
  __m512 acc[RB][MB];
  zero(acc);
  const int64_t nc = X.kp / 32;
  for (int64_t c = 0; c < nc; ++c) {
    __m512i wr[RB];
    load_rows(w, ws, pf, size_t(c) * 64, (K - c * 32) * 2, wr);
#pragma GCC unroll 4
    for (int m = 0; m < MB; ++m) {
      const __m512i xv = _mm512_loadu_si512(X.v.data() + (m0 + m) * X.kp + c * 32);
#pragma GCC unroll 4
      for (int r = 0; r < RB; ++r)
        acc[r][m] = _mm512_dpbf16_ps(acc[r][m], (__m512bh)wr[r], (__m512bh)xv);
    }
  }
  store_sums(acc, out);
}

template <int RB, int MB>
__attribute__((target("avx512f,avx512bw"))) void f32_block(
    const uint8_t* w, size_t ws, size_t pf, int64_t K, const XF32& X, int64_t m0, float* out) {
  __m512 acc[RB][MB];
  zero(acc);
  const int64_t nc = X.kp / 16;
  for (int64_t c = 0; c < nc; ++c) {
    __m512i wr[RB];
    load_rows(w, ws, pf, size_t(c) * 64, (K - c * 16) * 4, wr);
#pragma GCC unroll 4
    for (int m = 0; m < MB; ++m) {
      const __m512 xv = _mm512_loadu_ps(X.v.data() + (m0 + m) * X.kp + c * 16);
#pragma GCC unroll 4
      for (int r = 0; r < RB; ++r)
        acc[r][m] = _mm512_fmadd_ps(_mm512_castsi512_ps(wr[r]), xv, acc[r][m]);
    }
  }
  store_sums(acc, out);
}

template <int RB, int MB>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void q8_block(
    const uint8_t* w, size_t ws, size_t pf, int64_t K, const XQuant& X, int64_t m0, float* out) {
  __m512 acc[RB][MB];
  zero(acc);
  const int64_t nc = X.kp / 64, nl = X.kp / 4;
  for (int64_t c = 0; c < nc; ++c) {
    __m512i wr[RB];
    load_rows(w, ws, pf, size_t(c) * 64, K - c * 64, wr);
#pragma GCC unroll 4
    for (int m = 0; m < MB; ++m) {
      const int64_t xm = m0 + m;
      const __m512i xq = _mm512_loadu_si512(X.q.data() + xm * X.kp + c * 64);
      const __m512i cr = _mm512_loadu_si512(X.corr.data() + xm * nl + c * 16);
      const __m512 dl = _mm512_loadu_ps(X.dl.data() + xm * nl + c * 16);
#pragma GCC unroll 4
      for (int r = 0; r < RB; ++r)
        acc[r][m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_dpbusd_epi32(cr, wr[r], xq)), dl,
                                    acc[r][m]);
    }
  }
  store_sums(acc, out);
}
#endif  // __x86_64__

// Portable path: the same arithmetic, one row and one x row at a time.
float bf16_generic(const uint8_t* w, int64_t K, const XBf16& X, int64_t m) {
  const auto* wv = reinterpret_cast<const uint16_t*>(w);
  const uint16_t* xv = X.v.data() + m * X.kp;
  float s = 0.0f;
  for (int64_t k = 0; k < K; ++k) s += bf16_to_f32(wv[k]) * bf16_to_f32(xv[k]);
  return s;
}

float f32_generic(const uint8_t* w, int64_t K, const XF32& X, int64_t m) {
  const auto* wv = reinterpret_cast<const float*>(w);
  const float* xv = X.v.data() + m * X.kp;
  float s = 0.0f;
  for (int64_t k = 0; k < K; ++k) s += wv[k] * xv[k];
  return s;
}

float q8_generic(const uint8_t* w, int64_t K, const XQuant& X, int64_t m) {
  const int8_t* xq = X.q.data() + m * X.kp;
  const float* dx = X.dx.data() + m * (X.kp / 32);
  float s = 0.0f;
  for (int64_t b = 0; b * 32 < K; ++b) {
    int32_t dot = 0;
    for (int64_t k = b * 32; k < std::min(K, b * 32 + 32); ++k) dot += (int(w[k]) - 128) * xq[k];
    s += dx[b] * float(dot);
  }
  return s;
}

#if defined(__aarch64__)
// Q8 on NEON: per block of 32 the exact int32 Σ (w − 128) · x (w ^ 0x80 is w − 128 as int8),
// then s += d_x · dot in block order, as q8_generic: bit-identical to it. The tail of a row
// whose K is not a multiple of 32 is q8_generic's loop (the row's scale follows its codes).
template <typename Dot32>
float q8_blocks(const uint8_t* w, int64_t K, const XQuant& X, int64_t m, Dot32 dot32) {
  const int8_t* xq = X.q.data() + m * X.kp;
  const float* dx = X.dx.data() + m * (X.kp / 32);
  float s = 0.0f;
  int64_t b = 0;
  for (; (b + 1) * 32 <= K; ++b) s += dx[b] * float(dot32(w + b * 32, xq + b * 32));
  if (b * 32 < K) {
    int32_t dot = 0;
    for (int64_t k = b * 32; k < K; ++k) dot += (int(w[k]) - 128) * xq[k];
    s += dx[b] * float(dot);
  }
  return s;
}

inline int8x16_t signed_codes(const uint8_t* w) {
  return vreinterpretq_s8_u8(veorq_u8(vld1q_u8(w), vdupq_n_u8(0x80)));
}

// Σ a · x over 32 int8 pairs (a in two halves), exactly: widening multiplies (|product| ≤
// 128 · 127 fits int16) on neon, sdot on dotprod.
int32_t dot32_neon(int8x16_t a0, int8x16_t a1, const int8_t* x) {
  int32x4_t acc = vdupq_n_s32(0);
  for (const auto& [a, xv] : {std::pair{a0, vld1q_s8(x)}, std::pair{a1, vld1q_s8(x + 16)}}) {
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(xv)));
    acc = vpadalq_s16(acc, vmull_high_s8(a, xv));
  }
  return vaddvq_s32(acc);
}

__attribute__((target("arch=armv8.2-a+dotprod"))) int32_t dot32_sdot(int8x16_t a0, int8x16_t a1,
                                                                     const int8_t* x) {
  return vaddvq_s32(vdotq_s32(vdotq_s32(vdupq_n_s32(0), a0, vld1q_s8(x)), a1, vld1q_s8(x + 16)));
}

using Dot32 = int32_t (*)(int8x16_t, int8x16_t, const int8_t*);

float q8_neon(const uint8_t* w, int64_t K, const XQuant& X, int64_t m, Dot32 dot) {
  return q8_blocks(w, K, X, m, [dot](const uint8_t* wb, const int8_t* xb) {
    return dot(signed_codes(wb), signed_codes(wb + 16), xb);
  });
}

// Row r of a Q4T group of v rows on NEON: its four dwords of a block gathered (codes 4d + j in
// the low nibbles, 16 + 4d + j in the high), then q4t_generic's arithmetic: bit-identical.
float q4t_neon(const uint8_t* w, int v, int r, int64_t K, const XQuant& X, int64_t m, Dot32 dot) {
  const int8_t* xq = X.q.data() + m * X.kp;
  const float* dx = X.dx.data() + m * (X.kp / 32);
  float s = 0.0f;
  for (int64_t b = 0; b * 32 < K; ++b) {
    const uint8_t* blk = w + size_t(b * 18 * v);
    uint32_t q[4];
    for (int d = 0; d < 4; ++d) std::memcpy(&q[d], blk + 4 * (d * v + r), 4);
    const uint8x16_t c = vreinterpretq_u8_u32(vld1q_u32(q));
    const int8x16_t eight = vdupq_n_s8(8);
    const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(c, vdupq_n_u8(15))), eight);
    const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(c, 4)), eight);
    const int32_t d = dot(lo, hi, xq + b * 32);
    uint16_t h;
    std::memcpy(&h, blk + 16 * v + 2 * r, 2);
    s += f16_to_f32(h) * dx[b] * float(d);
  }
  return s;
}

// F32 / BF16 on NEON: Σ w · x, 16 products a step in four fp32 accumulators (bf16 widened
// exactly by a 16-bit shift), the tail of K scalar; the portable kernels' arithmetic in
// another order.
template <typename T>
float dot_neon(const T* wv, const T* xv, int64_t K) {
  auto load16 = [](const T* p, float32x4_t (&o)[4]) {
    if constexpr (std::is_same_v<T, float>) {
      for (int i = 0; i < 4; ++i) o[i] = vld1q_f32(p + 4 * i);
    } else {
      for (int h = 0; h < 2; ++h) {
        const uint16x8_t v = vld1q_u16(p + 8 * h);
        o[2 * h] = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(v), 16));
        o[2 * h + 1] = vreinterpretq_f32_u32(vshll_high_n_u16(v, 16));
      }
    }
  };
  auto scalar = [](T v) {
    if constexpr (std::is_same_v<T, float>) return v;
    else return bf16_to_f32(v);
  };
  float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
  int64_t k = 0;
  for (; k + 16 <= K; k += 16) {
    float32x4_t a[4], b[4];
    load16(wv + k, a);
    load16(xv + k, b);
    for (int i = 0; i < 4; ++i) acc[i] = vfmaq_f32(acc[i], a[i], b[i]);
  }
  float s = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
  for (; k < K; ++k) s += scalar(wv[k]) * scalar(xv[k]);
  return s;
}

float f32_neon(const uint8_t* w, int64_t K, const XF32& X, int64_t m) {
  return dot_neon(reinterpret_cast<const float*>(w), X.v.data() + m * X.kp, K);
}

float bf16_neon(const uint8_t* w, int64_t K, const XBf16& X, int64_t m) {
  return dot_neon(reinterpret_cast<const uint16_t*>(w), X.v.data() + m * X.kp, K);
}
#endif

// Row r of the kQ4T group of v rows at w (core/quant.h): dword d of a block holds the codes
// 4d + j (low nibbles) and 16 + 4d + j (high) of its row.
float q4t_generic(const uint8_t* w, int v, int r, int64_t K, const XQuant& X, int64_t m) {
  const int8_t* xq = X.q.data() + m * X.kp;
  const float* dx = X.dx.data() + m * (X.kp / 32);
  float s = 0.0f;
  for (int64_t b = 0; b * 32 < K; ++b) {
    const uint8_t* blk = w + size_t(b * 18 * v);
    int32_t dot = 0;
    for (int d = 0; d < 4; ++d)
      for (int j = 0; j < 4; ++j) {
        const uint8_t c = blk[4 * (d * v + r) + j];
        dot += (int(c & 15) - 8) * xq[b * 32 + 4 * d + j] + (int(c >> 4) - 8) * xq[b * 32 + 16 + 4 * d + j];
      }
    uint16_t h;
    std::memcpy(&h, blk + 16 * v + 2 * r, 2);
    s += f16_to_f32(h) * dx[b] * float(dot);
  }
  return s;
}

}  // namespace

bool gemv_handles(DType t) {
  return t == DType::kF32 || t == DType::kBF16 || t == DType::kQ8 || t == DType::kQ4T || dtype_ggml(t);
}

void gemv_force_path(GemvPath p) { g_path = p; }

uint64_t gemv_weight_bytes() { return g_weight_bytes.load(std::memory_order_relaxed); }

namespace {

// BF16 without AMX: the GEMV beats widening W to fp32 panels up to avx2::kBf16RowsMax rows
// (a MoE expert's share of a prompt). On AVX2, 2 rows of x or more run on avx2::bf16_rows (x
// split once, K in blocks). GemmBench, W 64 MiB (cold), GFLOP/s: AVX2 cap, bf16_rows / the
// 1 × 4 blocks / fp32 panels: 1 row 46 / 54 / —, 2 rows 71 / 46 / —, 4 rows 78 / 66 / —; one
// thread, 16 rows 40–53 / — / 35–36, 24 rows 36–45 / — / 36, 32 rows 33–44 / — / 49.
// AVX512-BF16 (its 4 × 4 blocks / fp32 panels, one thread): 20 rows 50–64 / 32–34, 24 rows
// 51–64 / 33–34, 32 rows 52–65 / 58–60, 48 rows 52–66 / 75–76.
constexpr int64_t kBf16RowsMin = 2;

}  // namespace

int64_t gemv_max_rows(DType t) {
#if defined(__x86_64__)
  const bool vector = vec_kernel(t) != Vec::kGeneric;
  if (t == DType::kBF16 && vector && !cpu_amx(t)) return avx2::kBf16RowsMax;
#endif
  return kGemvMaxRows;
}

const char* gemv_impl(DType t, int64_t M) {
  if (!gemv_handles(t)) return "none";
  if (dtype_ggml(t)) return ggml_avx2(t) ? "avx2" : "generic";
  if (use_amx(t, M)) return t == DType::kBF16 ? "amx_bf16" : "amx_int8";
  switch (vec_kernel(t)) {
    case Vec::kAvx512:
      return t == DType::kF32 ? "avx512f" : t == DType::kBF16 ? "avx512_bf16" : "avx512_vnni";
    case Vec::kAvxVnni: return t == DType::kQ8 && M <= 4 ? "avx2" : "avx_vnni";  // Q8 ≤ 4 rows: no vpdpbusd
    case Vec::kAvx2: return "avx2";
    case Vec::kNeon: return "neon";
    case Vec::kDotprod: return "dotprod";
    default: return "generic";
  }
}

namespace {

// Dispatch on (RB, MB) for one type's kernel family.
#define HYPIC_GEMV_DISPATCH(fn, X)                                                        \
  [&](const uint8_t* w, int rb, int64_t m0, int mb, float* out) {                         \
    switch (rb * 8 + mb) {                                                                \
      case 4 * 8 + 4: return fn<4, 4>(w, ws, pf, K, X, m0, out);                              \
      case 4 * 8 + 3: return fn<4, 3>(w, ws, pf, K, X, m0, out);                              \
      case 4 * 8 + 2: return fn<4, 2>(w, ws, pf, K, X, m0, out);                              \
      case 4 * 8 + 1: return fn<4, 1>(w, ws, pf, K, X, m0, out);                              \
      case 1 * 8 + 4: return fn<1, 4>(w, ws, pf, K, X, m0, out);                              \
      case 1 * 8 + 3: return fn<1, 3>(w, ws, pf, K, X, m0, out);                              \
      case 1 * 8 + 2: return fn<1, 2>(w, ws, pf, K, X, m0, out);                              \
      default: return fn<1, 1>(w, ws, pf, K, X, m0, out);                                     \
    }                                                                                     \
  }

// The same for the AVX2 kernels (kernels/gemv_avx2.h), blocks (4, 1) and (1, 1..4).
#define HYPIC_GEMV_AVX2(fn, X, ...)                                                     \
  [&](const uint8_t* w, int rb, int64_t m0, int mb, float* out) {                     \
    if (rb == 4) return avx2::fn<4, 1 __VA_ARGS__>(w, ws, pf, K, X, m0, out);          \
    switch (mb) {                                                                     \
      case 4: return avx2::fn<1, 4 __VA_ARGS__>(w, ws, pf, K, X, m0, out);             \
      case 3: return avx2::fn<1, 3 __VA_ARGS__>(w, ws, pf, K, X, m0, out);             \
      case 2: return avx2::fn<1, 2 __VA_ARGS__>(w, ws, pf, K, X, m0, out);             \
      default: return avx2::fn<1, 1 __VA_ARGS__>(w, ws, pf, K, X, m0, out);            \
    }                                                                                 \
  }

// Bytes of each weight stream prefetched ahead of the kernels (HYPIC_GEMV_LOOKAHEAD). One row
// block ahead (the first version) left int8 rows of 1 KiB short of memory-level parallelism:
// single-sequence decode of the h1024 model in alternate runs, lookahead one block / 4 KiB /
// 8 KiB: int8 130–139 / 134–135 / 149–155 tok/s, q4 155–168 / 188–195 / 194–203, bf16 71–74 /
// 75 / 72–78.
const size_t kLookahead = [] {
  const char* e = std::getenv("HYPIC_GEMV_LOOKAHEAD");
  return size_t(e ? std::atol(e) : 8192);
}();

// Bytes ahead of the AMX kernels' reads that they prefetch: Q8 / Q4 64 rows, bf16 none;
// measured on the 248k × 1024 lm_head (alternate GemvBench runs, 1 / 16 rows of x):
// int8 none 18.7 / 13.0 GB/s, 64 rows ahead 22.1 / 15.9, 128 rows 21.8 / 14.7; bf16 none
// 26.0 / 23.3, 64 rows 19.3 / 19.3 (its 64 concurrent rows already keep memory busy).
[[maybe_unused]] size_t amx_prefetch(DType t, size_t ws) { return t == DType::kBF16 ? 0 : 64 * ws; }

// Q8 / Q4 with up to amx::kLanesMaxRows rows of x run on rows_lanes (the tiles' results, on
// AVX-512). 248k-row lm_heads, lanes / tiles, weight GB/s: K = 1024, 1 and 2 rows: int8 23.7 /
// 17.7 and 22.8 / 16.2, q4 21.6 / 14.7 and 20.0 / 12.4; K = 2048, 4 rows (alternate runs):
// int8 19.4–19.7 / 19.8–20.4, q4 14.8–14.9 / 11.7–12.3.

// Rows of W per task: long runs of consecutive rows keep the hardware prefetchers streaming
// (64-row tasks read the 248k × 1024 bf16 lm_head at 55–58 GB/s, 512-row tasks at 64–68 in
// alternate runs), while at least 8 tasks keep two cores balanced.
int64_t rows_per_task(int64_t N) { return std::clamp<int64_t>(N / 8 / 4 * 4, 64, 1024); }
// Weight bytes × rows below which gemv runs on the calling thread alone (HYPIC_GEMV_INLINE_KB).
// It follows the cost of waking the other thread: where OpenMP threads sleep at once
// (OMP_WAIT_POLICY=passive, no GOMP_SPINCOUNT) a fork-join is a futex wake, and 1 MiB was
// best (hypic-tiny bf16 on an AMD EPYC: 256 KiB 1466–1583 tok/s, 1 MiB 1839–2018); where
// they spin between regions (the CLI's brief spin, the runtime's default) 64 KiB is (Xeon
// with AMX, spinning ~150 µs: 32–128 KiB 1680–1925 tok/s, 1 MiB 1306–1375).
const size_t kInlineBytes = [] {
  const char* e = std::getenv("HYPIC_GEMV_INLINE_KB");
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  const bool sleeps = policy && !strcasecmp(policy, "passive") && !std::getenv("GOMP_SPINCOUNT");
  return size_t(e ? std::atol(e) : sleeps ? 1024 : 64) << 10;
}();

}  // namespace

void gemv(const float* x, int64_t ldx, int64_t M, const Tensor& W, float* y, int64_t ldy,
          bool accumulate) {
  HYPIC_CHECK(W.ndim() == 2 && gemv_handles(W.dtype()) && M >= 1 && M <= gemv_max_rows(W.dtype()),
              "gemv: needs F32 / BF16 / Q8 / Q4T [N, K] weights and 1..gemv_max_rows rows");
  const DType t = W.dtype();
  const int64_t N = W.dim(0), K = W.dim(1);
  const size_t ws = dtype_row_bytes(t, K);
  const auto* wbase = static_cast<const uint8_t*>(W.raw());
  g_weight_bytes.fetch_add(W.nbytes(), std::memory_order_relaxed);
  thread_local XF32 xf;
  thread_local XBf16 xb;
  thread_local XQuant xq;
  const Vec vk = vec_kernel(t);
  // Prefetch distance: the rows ≥ kLookahead bytes ahead (at least the next block of 4), so
  // short rows (int8 at K = 1024: 1 KiB) still have a few row blocks in flight.
  const int64_t ahead = (int64_t(kLookahead) + int64_t(ws) - 1) / int64_t(ws);  // rows
  [[maybe_unused]] const size_t pf = ws * size_t(std::max<int64_t>(4, (ahead + 3) / 4 * 4));
  // A small matrix is cheaper on this thread than waking the others (a fork-join costs
  // microseconds, as long as reading ~kInlineBytes from cache).
  auto run_tasks = [&](int64_t tasks, const auto& body) {
    if (size_t(N) * ws * size_t(M) <= kInlineBytes) {
      for (int64_t task = 0; task < tasks; ++task) body(task);
    } else {
      parallel_for(tasks, body);
    }
  };
  if (dtype_ggml(t)) {  // ggml's blocks as stored (kernels/gemv_ggml.h)
    prep_ggml(t, x, ldx, M, K, xq);
    const ggml::X gx{xq.q.data(), xq.dx.data(), xq.corr.data(), xq.sum16.data(), xq.kp, ggml::x_group(t)};
    const bool vec = ggml_avx2(t);
    const int64_t per_task = rows_per_task(N);
    const size_t pf_rows = ws * size_t(std::max<int64_t>(1, ahead));
    return run_tasks((N + per_task - 1) / per_task, [&](int64_t task) {
      const int64_t n0 = task * per_task, n1 = std::min(N, n0 + per_task);
      ggml::rows(t, wbase, ws, n0, n1, K, gx, M, y, ldy, accumulate, vec, pf_rows);
    });
  }
#if defined(__x86_64__)
  // Q4T without AMX: rows in lanes for every row count (AVX-512 or AVX2; or the portable code).
  const bool amx = use_amx(t, M), q4t_lanes = t == DType::kQ4T && !amx && vk != Vec::kGeneric;
  if (amx || q4t_lanes) {
    // Row tasks of whole 64-row tile groups.
    thread_local amx::X xa;
    amx::prepare(x, ldx, M, K, t, xa);
    const amx::X& XA = xa;
    const int64_t per_task = std::max<int64_t>(64, rows_per_task(N) / 64 * 64);
    const bool lanes = q4t_lanes || (t != DType::kBF16 && M <= amx::kLanesMaxRows);
    const bool avx2_lanes = q4t_lanes && vk != Vec::kAvx512;
    return run_tasks((N + per_task - 1) / per_task, [&](int64_t task) {
      const int64_t n0 = task * per_task, n1 = std::min(N, n0 + per_task);
      if (avx2_lanes) avx2::q4t_rows(wbase, ws, n0, n1, XA, y, ldy, accumulate, vk == Vec::kAvxVnni);
      else if (lanes) amx::rows_lanes(wbase, ws, n0, n1, XA, y, ldy, accumulate);
      else amx::rows(wbase, ws, n0, n1, XA, y, ldy, accumulate, amx_prefetch(t, ws));
    });
  }
  if (t == DType::kQ8 && (vk == Vec::kAvx2 || vk == Vec::kAvxVnni)) {
    // Q8 on AVX2: rows in lanes, per-block arithmetic: 1–4 rows of x read W in place, more on
    // the integer GEMM (W regrouped a chunk at a time), whose rows have the same bits.
    if (M > 4) return avx2::linear_int8(x, ldx, M, W, y, ldy, accumulate, 256);
    prep_q8(x, ldx, M, K, xq);
    const avx2::Q8X q8x{xq.q.data(), xq.dx.data(), xq.kp};
    // The kernel reads 8 rows at a time: prefetch whole groups of 8 ahead (4 rows ahead
    // would fetch half a group: MoE shape, AVX2, int8 decode 24 → 31 tok/s).
    const size_t pf8 = ws * size_t(std::max<int64_t>(8, (ahead + 7) / 8 * 8));
    const int64_t per_task = rows_per_task(N);
    return run_tasks((N + per_task - 1) / per_task, [&](int64_t task) {
      const int64_t n0 = task * per_task, n1 = std::min(N, n0 + per_task);
      avx2::q8_rows(wbase, ws, n0, n1, K, q8x, M, pf8, y, ldy, accumulate);
    });
  }
  if (t == DType::kBF16 && M >= kBf16RowsMin && (vk == Vec::kAvx2 || vk == Vec::kAvxVnni)) {
    prep_bf16(x, ldx, M, K, xb);
    thread_local std::vector<float> xs;
    xs.resize(size_t(avx2::bf16_split_floats(M, xb.kp)));
    avx2::bf16_split_x(xb.v.data(), M, xb.kp, xs.data());
    const float* xsp = xs.data();  // this thread's (a thread_local named in the tasks is theirs)
    const int64_t kp = xb.kp, per_task = rows_per_task(N);
    return run_tasks((N + per_task - 1) / per_task, [&](int64_t task) {
      const int64_t n0 = task * per_task, n1 = std::min(N, n0 + per_task);
      avx2::bf16_rows(wbase, ws, n0, n1, K, xsp, kp, M, y, ldy, accumulate);
    });
  }
#endif  // __x86_64__
  if (t == DType::kF32) prep_f32(x, ldx, M, K, xf);
  else if (t == DType::kBF16) prep_bf16(x, ldx, M, K, xb);
  else prep_q8(x, ldx, M, K, xq);
  const XF32& XF = xf;
  const XBf16& XB = xb;
  const XQuant& XQ = xq;
  auto store = [&](int64_t n, int64_t m, float v) {
    if (t == DType::kQ8) {
      float d;
      std::memcpy(&d, wbase + size_t(n) * ws + size_t(K), 4);
      v *= d;
    }
    float& o = y[m * ldy + n];
    o = accumulate ? o + v : v;
  };
#if defined(__x86_64__)
  auto f32 = HYPIC_GEMV_DISPATCH(f32_block, XF);
  auto bf = HYPIC_GEMV_DISPATCH(bf16_block, XB);
  auto k8 = HYPIC_GEMV_DISPATCH(q8_block, XQ);
  const avx2::F32X f32x{XF.v.data(), XF.kp};
  const avx2::Bf16X bf16x{XB.v.data(), XB.kp};

  auto f32_2 = HYPIC_GEMV_AVX2(f32_block, f32x);
  auto bf_2 = HYPIC_GEMV_AVX2(bf16_block, bf16x);
#endif
  auto q4t = [&](int64_t n, int64_t m) {  // row n's group: rows g0 .. g0 + v − 1
    const int64_t g0 = n / 16 * 16;
    const uint8_t* g = wbase + size_t(g0) * ws;
    const int v = int(std::min<int64_t>(16, N - g0)), r = int(n - g0);
#if defined(__aarch64__)
    if (vk != Vec::kGeneric) return q4t_neon(g, v, r, K, XQ, m, vk == Vec::kDotprod ? dot32_sdot : dot32_neon);
#endif
    return q4t_generic(g, v, r, K, XQ, m);
  };
  auto block = [&](const uint8_t* w, int64_t n, int rb, int64_t m0, int mb, float* out) {
    switch (vk) {
#if defined(__x86_64__)
      case Vec::kAvx512:
        return t == DType::kF32 ? f32(w, rb, m0, mb, out) : t == DType::kBF16 ? bf(w, rb, m0, mb, out)
                                                                               : k8(w, rb, m0, mb, out);
      case Vec::kAvxVnni:
      case Vec::kAvx2:
        return t == DType::kF32 ? f32_2(w, rb, m0, mb, out) : bf_2(w, rb, m0, mb, out);
#endif
#if defined(__aarch64__)
      case Vec::kNeon:
      case Vec::kDotprod:
        for (int r = 0; r < rb; ++r)
          for (int m = 0; m < mb; ++m) {
            const uint8_t* wr = w + size_t(r) * ws;
            out[r * mb + m] = t == DType::kF32    ? f32_neon(wr, K, XF, m0 + m)
                              : t == DType::kBF16 ? bf16_neon(wr, K, XB, m0 + m)
                              : t == DType::kQ8   ? q8_neon(wr, K, XQ, m0 + m, vk == Vec::kDotprod ? dot32_sdot : dot32_neon)
                                                  : q4t(n + r, m0 + m);
          }
        return;
#endif
      default:
        for (int r = 0; r < rb; ++r)
          for (int m = 0; m < mb; ++m)
            out[r * mb + m] = t == DType::kF32    ? f32_generic(w + size_t(r) * ws, K, XF, m0 + m)
                              : t == DType::kBF16 ? bf16_generic(w + size_t(r) * ws, K, XB, m0 + m)
                              : t == DType::kQ8   ? q8_generic(w + size_t(r) * ws, K, XQ, m0 + m)
                                                  : q4t(n + r, m0 + m);
    }
  };
  // Blocks of rb rows of W × mb rows of x: 4 × 4 on AVX-512 (32 zmm); on AVX2 (16 ymm, two
  // accumulators an output) 4 × 1 for one row of x, else 1 × 4.
  const bool avx2 = vk == Vec::kAvx2 || vk == Vec::kAvxVnni;
  const int64_t per_task = rows_per_task(N), tasks = (N + per_task - 1) / per_task;
  auto body = [&](int64_t task) {
    const int64_t n0 = task * per_task, n1 = std::min(N, n0 + per_task);
    float out[16];
    for (int64_t n = n0; n < n1;) {
      const int rb = n1 - n >= 4 && !(avx2 && M > 1) ? 4 : 1;
      const uint8_t* w = wbase + size_t(n) * ws;
      for (int64_t m0 = 0; m0 < M; m0 += 4) {
        const int mb = int(std::min<int64_t>(4, M - m0));
        block(w, n, rb, m0, mb, out);
        for (int r = 0; r < rb; ++r)
          for (int m = 0; m < mb; ++m) store(n + r, m0 + m, out[r * mb + m]);
      }
      n += rb;
    }
  };
  run_tasks(tasks, body);
}

namespace {

#if defined(__x86_64__)
// One packed row dequantized to bf16: d·(q − offset) in fp32, rounded to nearest even, the
// arithmetic of dequantize_row + f32_to_bf16 (so the result is bit-identical to it).
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,f16c"))) void dequant_row_q4(
    const uint8_t* in, int64_t K, uint16_t* out) {
  const uint8_t* scales = in + K / 2;
  const __m128i low4 = _mm_set1_epi8(0x0f), eight = _mm_set1_epi8(8);
  for (int64_t g = 0; g < K / 32; ++g) {
    uint16_t h;
    std::memcpy(&h, scales + 2 * g, 2);
    const __m512 d = _mm512_set1_ps(_cvtsh_ss(h));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + g * 16));
    const __m128i lo = _mm_sub_epi8(_mm_and_si128(b, low4), eight);  // codes j
    const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(b, 4), low4), eight);  // j + 16
    const __m512 flo = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo)));
    const __m512 fhi = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi)));
    _mm512_storeu_si512(out + g * 32, (__m512i)_mm512_cvtne2ps_pbh(fhi, flo));
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) void dequant_row_q8(
    const uint8_t* in, int64_t K, uint16_t* out) {
  float dv;
  std::memcpy(&dv, in + K, 4);
  const __m512 d = _mm512_set1_ps(dv);
  const __m512i off = _mm512_set1_epi32(128);
  for (int64_t k = 0; k < K; k += 32) {
    const int64_t left = std::min<int64_t>(32, K - k);
    const __mmask32 mk = left >= 32 ? ~__mmask32(0) : (__mmask32(1) << left) - 1;
    const __m256i b = _mm256_maskz_loadu_epi8(mk, in + k);
    const __m512 f0 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_sub_epi32(
                                           _mm512_cvtepu8_epi32(_mm256_castsi256_si128(b)), off)));
    const __m512 f1 = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_sub_epi32(
                                           _mm512_cvtepu8_epi32(_mm256_extracti128_si256(b, 1)), off)));
    _mm512_mask_storeu_epi16(out + k, mk, (__m512i)_mm512_cvtne2ps_pbh(f1, f0));
  }
}

}  // namespace

namespace {

bool avx512_bf16() {
  return cpu::has(cpu::kAvx512F | cpu::kAvx512Bw | cpu::kAvx512Vl | cpu::kAvx512Bf16);
}
#endif  // __x86_64__

// Rows [n0, n1) of a Q8 or Q4T matrix as `cols`-wide output rows: `rows(t, w, n, o)` turns n
// rows of stored type t (Q8, or Q4's rows: a Q4T group is untiled first) at w into o.
template <typename T, typename Rows>
void packed_rows(const Tensor& W, int64_t n0, int64_t n1, T* out, Rows&& rows) {
  const int64_t N = W.dim(0), K = W.dim(1);
  const size_t ws = dtype_row_bytes(W.dtype(), K);
  const auto* base = static_cast<const uint8_t*>(W.raw());
  if (W.dtype() == DType::kQ8 || dtype_ggml(W.dtype()))
    return rows(W.dtype(), base + size_t(n0) * ws, n1 - n0, out);
  HYPIC_CHECK(W.dtype() == DType::kQ4T && n0 % kQ4TRows == 0 && (n1 % kQ4TRows == 0 || n1 == N),
              "dequantize_rows: Q8 or Q4T rows of whole groups");
  thread_local std::vector<uint8_t> group;
  group.resize(size_t(kQ4TRows) * ws);
  for (int64_t g0 = n0; g0 < n1; g0 += kQ4TRows) {
    const int64_t v = std::min(kQ4TRows, N - g0);
    q4_untile(base + size_t(g0) * ws, v, K, group.data());
    rows(DType::kQ4, group.data(), v, out + (g0 - n0) * K);
  }
}

}  // namespace

void dequantize_rows_bf16(const Tensor& W, int64_t n0, int64_t n1, uint16_t* out) {
  const int64_t K = W.dim(1);
  const size_t ws = dtype_row_bytes(W.dtype(), K);
  packed_rows(W, n0, n1, out, [&](DType t, const uint8_t* w, int64_t n, uint16_t* o) {
    const size_t rs = t == DType::kQ4 ? dtype_row_bytes(t, K) : ws;
#if defined(__x86_64__)
    if (avx512_bf16() && !dtype_ggml(t)) {
      for (int64_t r = 0; r < n; ++r) {
        if (t == DType::kQ4) dequant_row_q4(w + size_t(r) * rs, K, o + r * K);
        else dequant_row_q8(w + size_t(r) * rs, K, o + r * K);
      }
      return;
    }
#endif
    std::vector<float> row(static_cast<size_t>(K));
    for (int64_t r = 0; r < n; ++r) {
      if (dtype_ggml(t)) ggml::dequantize_row(t, w + size_t(r) * rs, K, row.data(), ggml_avx2(t));
      else dequantize_row(t, w + size_t(r) * rs, K, row.data());
      from_f32(DType::kBF16, row.data(), o + r * K, size_t(K));
    }
  });
}

void rows_f32(const Tensor& W, int64_t n0, int64_t n1, float* out) {
  const int64_t K = W.dim(1);
  if (W.dtype() == DType::kBF16) {
    const auto* w = static_cast<const uint16_t*>(W.raw());
    for (int64_t r = n0; r < n1; ++r) {
#if defined(__x86_64__)
      if (cpu::has(cpu::kAvx2 | cpu::kFma | cpu::kF16c)) {
        avx2::bf16_to_f32_row(w + r * K, K, out + (r - n0) * K);
        continue;
      }
#endif
      to_f32(DType::kBF16, w + r * K, out + (r - n0) * K, size_t(K));
    }
    return;
  }
  packed_rows(W, n0, n1, out, [&](DType t, const uint8_t* w, int64_t n, float* o) {
    const size_t rs = dtype_row_bytes(t, K);
    for (int64_t r = 0; r < n; ++r) {
      const uint8_t* in = w + size_t(r) * rs;
      if (dtype_ggml(t)) {
        ggml::dequantize_row(t, in, K, o + r * K, ggml_avx2(t));
        continue;
      }
#if defined(__x86_64__)
      if (cpu::has(cpu::kAvx2 | cpu::kFma | cpu::kF16c)) {
        if (t == DType::kQ4) avx2::dequant_q4_row(in, K, o + r * K);
        else avx2::dequant_q8_row(in, K, o + r * K);
        continue;
      }
#endif
      dequantize_row(t, in, K, o + r * K);
    }
  });
}

}  // namespace hypic::kernels
