#include "core/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/ggml_quant.h"

namespace hypic {
namespace {

float abs_max(const float* x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

// q = round(x / d) clamped to [−lim, lim]; 0 when d is 0.
int quant(float x, float inv_d, int lim) {
  const int q = int(std::nearbyint(x * inv_d));
  return std::clamp(q, -lim, lim);
}

}  // namespace

Status check_quantizable(DType t, int64_t cols) {
  if (t == DType::kQ4 && cols % kQ4Group != 0)
    return invalid_argument("q4 quantizes groups of " + std::to_string(kQ4Group) +
                            " along the input dimension, which must be a multiple of " +
                            std::to_string(kQ4Group) + "; this matrix's is " +
                            std::to_string(cols) + ": use --dtype int8 or bf16 for this model");
  if (dtype_packed(t) && cols <= 0) return invalid_argument("an empty matrix cannot be quantized");
  return Status::ok();
}

void quantize_row(DType t, const float* src, int64_t cols, void* dst) {
  auto* out = static_cast<uint8_t*>(dst);
  if (t == DType::kQ8) {
    const float d = abs_max(src, cols) / 127.0f;
    const float inv = d > 0.0f ? 1.0f / d : 0.0f;
    for (int64_t k = 0; k < cols; ++k) out[k] = uint8_t(quant(src[k], inv, 127) + 128);
    std::memcpy(out + cols, &d, 4);
    return;
  }
  HYPIC_CHECK(t == DType::kQ4 && cols % kQ4Group == 0, "quantize_row: not a q4 row of 32s (ggml's "
              "types are read, never written)");
  auto* scales = reinterpret_cast<uint16_t*>(out + cols / 2);
  for (int64_t g = 0; g < cols / kQ4Group; ++g) {
    const float* w = src + g * kQ4Group;
    // The stored f16 scale is the one the codes are computed against.
    const uint16_t h = f32_to_f16(abs_max(w, kQ4Group) / 7.0f);
    const float d = f16_to_f32(h);
    const float inv = d > 0.0f && std::isfinite(d) ? 1.0f / d : 0.0f;
    std::memcpy(scales + g, &h, 2);
    uint8_t* b = out + g * (kQ4Group / 2);
    for (int j = 0; j < 16; ++j)
      b[j] = uint8_t((quant(w[j], inv, 7) + 8) | (quant(w[j + 16], inv, 7) + 8) << 4);
  }
}

void dequantize_row(DType t, const void* src, int64_t cols, float* dst) {
  const auto* in = static_cast<const uint8_t*>(src);
  if (dtype_ggml(t)) return ggml_dequantize_blocks(t, in, dst, cols / ggml_block_elems(t));
  if (t == DType::kQ8) {
    float d;
    std::memcpy(&d, in + cols, 4);
    for (int64_t k = 0; k < cols; ++k) dst[k] = d * float(int(in[k]) - 128);
    return;
  }
  HYPIC_CHECK(t == DType::kQ4, "dequantize_row: not a packed type");
  const auto* scales = in + cols / 2;
  for (int64_t g = 0; g < cols / kQ4Group; ++g) {
    uint16_t h;
    std::memcpy(&h, scales + 2 * g, 2);
    const float d = f16_to_f32(h);
    const uint8_t* b = in + g * (kQ4Group / 2);
    for (int j = 0; j < 16; ++j) {
      dst[g * kQ4Group + j] = d * float(int(b[j] & 15) - 8);
      dst[g * kQ4Group + j + 16] = d * float(int(b[j] >> 4) - 8);
    }
  }
}

namespace {

// Visits every (row r, block g) of an [n, cols] kQ4 / kQ4T pair: f(row bytes offset of the
// block's 16 code bytes and its scale in the kQ4 row, group base, v, r within the group).
template <typename F>
void q4_groups(int64_t n, int64_t cols, F&& f) {
  const size_t rb = dtype_row_bytes(DType::kQ4, cols);
  const int64_t blocks = cols / kQ4Group;
  for (int64_t g0 = 0; g0 < n; g0 += kQ4TRows) {
    const int64_t v = std::min(kQ4TRows, n - g0);
    for (int64_t r = 0; r < v; ++r)
      for (int64_t b = 0; b < blocks; ++b) {
        const size_t row = size_t(g0 + r) * rb;
        const size_t tile = size_t(g0) * rb + size_t(b * 18 * v);
        // kQ4 row: codes at 16b, scale at cols/2 + 2b; kQ4T block: dword d of row r at
        // 4(dv + r), scale at 16v + 2r.
        f(row + size_t(16 * b), row + size_t(cols / 2 + 2 * b), tile, v, r);
      }
  }
}

}  // namespace

void q4_tile(const uint8_t* rows, int64_t n, int64_t cols, uint8_t* out) {
  q4_groups(n, cols, [&](size_t codes, size_t scale, size_t tile, int64_t v, int64_t r) {
    for (int64_t d = 0; d < 4; ++d) std::memcpy(out + tile + size_t(4 * (d * v + r)), rows + codes + 4 * d, 4);
    std::memcpy(out + tile + size_t(16 * v + 2 * r), rows + scale, 2);
  });
}

void q4_untile(const uint8_t* tiled, int64_t n, int64_t cols, uint8_t* rows) {
  q4_groups(n, cols, [&](size_t codes, size_t scale, size_t tile, int64_t v, int64_t r) {
    for (int64_t d = 0; d < 4; ++d) std::memcpy(rows + codes + 4 * d, tiled + tile + size_t(4 * (d * v + r)), 4);
    std::memcpy(rows + scale, tiled + tile + size_t(16 * v + 2 * r), 2);
  });
}

}  // namespace hypic
