// Element types and scalar conversions. bf16/f16 are stored as raw uint16_t. kQ8 and kQ4 are
// packed row formats of quantized matrices (core/quant.h): their size is per row, not per
// element (dtype_row_bytes), and they exist only as [..., K] matrices with K the last dim.
// kQ4T is kQ4 regrouped by 16 rows for the kernels (core/quant.h): the form a model keeps
// its q4 matrices in, never stored in a file.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace hypic {

// kGQ8_0 … kGQ5_1: ggml's block formats as a GGUF file stores them (core/ggml_quant.h), rows of
// whole blocks, kept as stored and multiplied in place (kernels/gemv_ggml.h).
enum class DType : uint8_t { kF32, kBF16, kF16, kQ8, kQ4, kQ4T, kGQ8_0, kGQ4_0, kGQ4K, kGQ5K, kGQ6K, kGQ5_0, kGQ5_1 };

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kF16: return 2;
    default: return 0;  // packed: see dtype_row_bytes
  }
}
inline bool dtype_ggml(DType t) { return t >= DType::kGQ8_0 && t <= DType::kGQ5_1; }
inline bool dtype_packed(DType t) {
  return t == DType::kQ8 || t == DType::kQ4 || t == DType::kQ4T || dtype_ggml(t);
}
// Bytes of one row of `cols` elements (any type; the packed formats of core/quant.h).
size_t dtype_row_bytes(DType t, int64_t cols);
const char* dtype_name(DType t);

inline float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// Round to nearest even, NaN preserved (as torch does).
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// Converts n elements of `src` (type t) to fp32.
void to_f32(DType t, const void* src, float* dst, size_t n);
// Converts n fp32 elements to type t.
void from_f32(DType t, const float* src, void* dst, size_t n);

}  // namespace hypic
