#include "core/dtype.h"

#include <cmath>

#include "core/status.h"

namespace hypic {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kQ8: return "INT8";
    case DType::kQ4: return "Q4";
    case DType::kQ4T: return "Q4T";
    case DType::kGQ8_0: return "Q8_0";
    case DType::kGQ4_0: return "Q4_0";
    case DType::kGQ4K: return "Q4_K";
    case DType::kGQ5K: return "Q5_K";
    case DType::kGQ6K: return "Q6_K";
    case DType::kGQ5_0: return "Q5_0";
    case DType::kGQ5_1: return "Q5_1";
  }
  return "?";
}

size_t dtype_row_bytes(DType t, int64_t cols) {
  const size_t k = size_t(cols);
  switch (t) {
    case DType::kQ8: return k + 4;                 // u8 codes, f32 scale
    case DType::kQ4:
    case DType::kQ4T: return k / 2 + k / 32 * 2;   // nibbles, one f16 scale per 32 (kQ4T: a
                                                   // group of 16 rows is 16 rows' bytes)
    case DType::kGQ8_0: return k / 32 * 34;
    case DType::kGQ4_0: return k / 32 * 18;
    case DType::kGQ4K: return k / 256 * 144;
    case DType::kGQ5K: return k / 256 * 176;
    case DType::kGQ6K: return k / 256 * 210;
    case DType::kGQ5_0: return k / 32 * 22;
    case DType::kGQ5_1: return k / 32 * 24;
    default: return k * dtype_size(t);
  }
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while (!(man & 0x400)) { man <<= 1; --exp; }
      man &= 0x3ff;
      u = sign | (exp << 23) | (man << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (man << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000;
  const int32_t exp = int32_t((u >> 23) & 0xff) - 127 + 15;
  uint32_t man = u & 0x7fffff;
  if (((u >> 23) & 0xff) == 0xff) return uint16_t(sign | 0x7c00 | (man ? 0x200 : 0));
  if (exp >= 31) return uint16_t(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10) return uint16_t(sign);
    man |= 0x800000;
    const int shift = 14 - exp;
    uint32_t half = man >> shift;
    const uint32_t rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return uint16_t(sign | half);
  }
  uint32_t half = sign | (uint32_t(exp) << 10) | (man >> 13);
  const uint32_t rem = man & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
  return uint16_t(half);
}

void to_f32(DType t, const void* src, float* dst, size_t n) {
  switch (t) {
    case DType::kF32: std::memcpy(dst, src, n * 4); return;
    case DType::kBF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::kF16: {
      const auto* s = static_cast<const uint16_t*>(src);
      for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    default: break;
  }
  HYPIC_CHECK(false, std::string("to_f32 of a packed type (") + dtype_name(t) + "): use core/quant.h");
}

void from_f32(DType t, const float* src, void* dst, size_t n) {
  switch (t) {
    case DType::kF32: std::memcpy(dst, src, n * 4); return;
    case DType::kBF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::kF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
      return;
    }
    default: break;
  }
  HYPIC_CHECK(false, std::string("from_f32 of a packed type (") + dtype_name(t) + "): use core/quant.h");
}

}  // namespace hypic
