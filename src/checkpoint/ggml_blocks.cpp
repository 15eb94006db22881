// ggml's block formats decoded to floats, element by element as ggml's reference
// dequantization does (ggml-quants.c dequantize_row_*): the reference the GEMV kernels on
// these blocks are tested against, and the decode of tensors the engine keeps as floats.
#include <cstring>

#include "checkpoint/gguf.h"
#include "core/dtype.h"

namespace hypic {

namespace {

constexpr int kQK = 256;  // K-quant super-block

float half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K super-block, packed in 12
// bytes: j < 4 in the low 6 bits of q[j] / q[j + 4]; j >= 4 split between the low / high
// nibble of q[j + 4] and the top 2 bits of q[j - 4] / q[j].
void scale_min_k4(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
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

// Q4_K: f16 d, f16 dmin, 12 bytes of 6-bit scales / mins, 128 bytes of nibbles; 8 sub-blocks
// of 32: y = d·sc·q − dmin·m. Each 32 bytes hold two sub-blocks (low nibbles, then high).
void q4_k(const uint8_t* b, float* y) {
  const float d = half(b), dmin = half(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  for (int j = 0; j < kQK; j += 64, q += 32) {
    int sc, m;
    scale_min_k4(j / 32, scales, &sc, &m);
    const float d1 = d * float(sc), m1 = dmin * float(m);
    scale_min_k4(j / 32 + 1, scales, &sc, &m);
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
    scale_min_k4(j / 32, scales, &sc, &m);
    const float d1 = d * float(sc), m1 = dmin * float(m);
    scale_min_k4(j / 32 + 1, scales, &sc, &m);
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

Status ggml_dequantize(uint32_t type, const uint8_t* src, float* dst, int64_t n) {
  const GgmlTypeInfo* ti = ggml_type_info(type);
  if (!ti || !ti->supported)
    return unsupported(std::string("ggml type ") + (ti ? ti->name : std::to_string(type).c_str()) +
                         " is not read by hypic (it reads F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K)");
  if (n % ti->block_elems != 0)
    return invalid_argument(std::to_string(n) + " elements are not a whole number of " + ti->name + " blocks");
  const int64_t blocks = n / ti->block_elems;
  void (*block)(const uint8_t*, float*) = nullptr;
  switch (GgmlType(type)) {
    case GgmlType::kF32: std::memcpy(dst, src, size_t(n) * 4); return Status::ok();
    case GgmlType::kF16:
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = GgmlType(type) == GgmlType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
      return Status::ok();
    case GgmlType::kQ8_0: block = q8_0; break;
    case GgmlType::kQ4_0: block = q4_0; break;
    case GgmlType::kQ4_K: block = q4_k; break;
    case GgmlType::kQ5_K: block = q5_k; break;
    case GgmlType::kQ6_K: block = q6_k; break;
    default: break;
  }
  for (int64_t i = 0; i < blocks; ++i) block(src + i * ti->block_bytes, dst + i * ti->block_elems);
  return Status::ok();
}

}  // namespace hypic
