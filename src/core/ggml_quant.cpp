#include "core/ggml_quant.h"

#include <cstring>

#include "core/status.h"

namespace hypic {

namespace {

constexpr int kQK = 256;  // K-quant super-block

float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// Q8_0: f16 d, 32 × int8.
void q8_0(const uint8_t* b, float* y) {
  const float d = half(b);
  for (int i = 0; i < 32; ++i) y[i] = d * float(int8_t(b[2 + i]));
}

// Q4_0: f16 d, 16 bytes: element i in the low nibble of byte i, element i + 16 in its high
// nibble, both offset by 8.
void q4_0(const uint8_t* b, float* y) {
  const float d = half(b);
  const uint8_t* q = b + 2;
  for (int i = 0; i < 16; ++i) {
    y[i] = d * float((q[i] & 0xF) - 8);
    y[i + 16] = d * float((q[i] >> 4) - 8);
  }
}

// Q5_0 / Q5_1: [f16 d][f16 m, Q5_1 only] u32 qh, 16 bytes of nibbles; element i's fifth bit
// is bit i of qh; Q5_0's codes offset by 16, Q5_1's plus m.
template <bool ONE>
void q5(const uint8_t* b, float* y) {
  const float d = half(b), m = ONE ? half(b + 2) : 0.0f;
  uint32_t qh;
  std::memcpy(&qh, b + (ONE ? 4 : 2), 4);
  const uint8_t* q = b + (ONE ? 8 : 6);
  for (int i = 0; i < 16; ++i) {
    const int lo = (q[i] & 0xF) | int((qh >> i) << 4 & 0x10), hi = (q[i] >> 4) | int((qh >> (i + 12)) & 0x10);
    if (ONE) {
      y[i] = float(lo) * d + m;
      y[i + 16] = float(hi) * d + m;
    } else {
      y[i] = float(lo - 16) * d;
      y[i + 16] = float(hi - 16) * d;
    }
  }
}

// Q4_K: f16 d, f16 dmin, 12 bytes of 6-bit scales / mins, 128 bytes of nibbles; 8 sub-blocks
// of 32: y = d·sc·q − dmin·m. Each 32 bytes hold two sub-blocks (low nibbles, then high).
void q4_k(const uint8_t* b, float* y) {
  const float d = half(b), dmin = half(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  for (int j = 0; j < kQK; j += 64, q += 32) {
    int sc, m;
    ggml_scale_min_k4(j / 32, scales, &sc, &m);
    const float d1 = d * float(sc), m1 = dmin * float(m);
    ggml_scale_min_k4(j / 32 + 1, scales, &sc, &m);
    const float d2 = d * float(sc), m2 = dmin * float(m);
    for (int l = 0; l < 32; ++l) *y++ = d1 * float(q[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * float(q[l] >> 4) - m2;
  }
}

// Q5_K: as Q4_K with a fifth bit per element in 32 bytes qh (bit 2k / 2k + 1 of qh[l] for
// the k-th pair of sub-blocks).
void q5_k(const uint8_t* b, float* y) {
  const float d = half(b), dmin = half(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + 48;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0; j < kQK; j += 64, ql += 32, u1 <<= 2, u2 <<= 2) {
    int sc, m;
    ggml_scale_min_k4(j / 32, scales, &sc, &m);
    const float d1 = d * float(sc), m1 = dmin * float(m);
    ggml_scale_min_k4(j / 32 + 1, scales, &sc, &m);
    const float d2 = d * float(sc), m2 = dmin * float(m);
    for (int l = 0; l < 32; ++l) *y++ = d1 * float((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * float((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
  }
}

// Q6_K: 128 bytes of low nibbles, 64 of 2-bit highs, 16 int8 scales (one per 16 elements),
// f16 d; y = d·scale·(q − 32). Each half (128 elements) interleaves four 32-element runs.
void q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = half(b + 208);
  for (int n = 0; n < kQK; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = int((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = int((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * float(sc[is]) * float(q1);
      y[l + 32] = d * float(sc[is + 2]) * float(q2);
      y[l + 64] = d * float(sc[is + 4]) * float(q3);
      y[l + 96] = d * float(sc[is + 6]) * float(q4);
    }
  }
}

}  // namespace

int64_t ggml_block_elems(DType t) {
  switch (t) {
    case DType::kGQ8_0:
    case DType::kGQ4_0:
    case DType::kGQ5_0:
    case DType::kGQ5_1: return 32;
    case DType::kGQ4K:
    case DType::kGQ5K:
    case DType::kGQ6K: return kQK;
    default: return 0;
  }
}

int64_t ggml_block_bytes(DType t) { return int64_t(dtype_row_bytes(t, ggml_block_elems(t))); }

void ggml_dequantize_blocks(DType t, const uint8_t* src, float* dst, int64_t blocks) {
  void (*block)(const uint8_t*, float*) = nullptr;
  switch (t) {
    case DType::kGQ8_0: block = q8_0; break;
    case DType::kGQ4_0: block = q4_0; break;
    case DType::kGQ4K: block = q4_k; break;
    case DType::kGQ5K: block = q5_k; break;
    case DType::kGQ6K: block = q6_k; break;
    case DType::kGQ5_0: block = q5<false>; break;
    case DType::kGQ5_1: block = q5<true>; break;
    default: HYPIC_CHECK(false, std::string("ggml_dequantize_blocks: ") + dtype_name(t) + " is not a ggml type");
  }
  const int64_t be = ggml_block_elems(t), bb = ggml_block_bytes(t);
  for (int64_t i = 0; i < blocks; ++i) block(src + i * bb, dst + i * be);
}

void ggml_q4_0_to_q4_rows(const uint8_t* src, size_t stride, int64_t n, int64_t K, uint8_t* dst) {
  const int64_t blocks = K / 32;
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* b = src + size_t(r) * stride;
    uint8_t* codes = dst + size_t(r) * size_t(K / 2 + blocks * 2);
    uint8_t* scales = codes + K / 2;
    for (int64_t g = 0; g < blocks; ++g, b += 18) {
      std::memcpy(codes + 16 * g, b + 2, 16);
      std::memcpy(scales + 2 * g, b, 2);
    }
  }
}

void ggml_q4_k_to_q4_rows(const uint8_t* src, size_t stride, int64_t n, int64_t K, uint8_t* dst, float* offsets) {
  const int64_t supers = K / kQK, groups = K / 32;
  for (int64_t r = 0; r < n; ++r) {
    uint8_t* codes = dst ? dst + size_t(r) * size_t(K / 2 + groups * 2) : nullptr;
    uint8_t* scales = codes ? codes + K / 2 : nullptr;
    for (int64_t i = 0; i < supers; ++i) {
      const uint8_t* b = src + size_t(r) * stride + size_t(i) * 144;
      const float d = half(b), dmin = half(b + 2);
      for (int j = 0; j < 8; ++j) {
        int sc, m;
        ggml_scale_min_k4(j, b + 4, &sc, &m);
        const uint16_t h = f32_to_f16(d * float(sc));
        const int64_t g = i * 8 + j;
        if (offsets) offsets[r * groups + g] = 8.0f * f16_to_f32(h) - dmin * float(m);
        if (!codes) continue;
        const uint8_t* q = b + 16 + 32 * (j / 2);  // sub-block j: low (even j) or high nibbles
        for (int e = 0; e < 16; ++e) {
          const int lo = j % 2 ? q[e] >> 4 : q[e] & 0xF, hi = j % 2 ? q[e + 16] >> 4 : q[e + 16] & 0xF;
          codes[16 * g + e] = uint8_t(lo | hi << 4);
        }
        std::memcpy(scales + 2 * g, &h, 2);
      }
    }
  }
}

}  // namespace hypic
