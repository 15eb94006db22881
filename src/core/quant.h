// Quantized matrix rows (DType::kQ8, kQ4): the formats, and plain quantize / dequantize.
// A quantized matrix [N, K] is N rows stored back to back, each self-contained, so a slice of
// rows (Tensor::rows, stacked experts) is a plain byte range. One row = one output channel:
//
//   kQ8 (int8, symmetric per output channel), K + 4 bytes:
//     u8 code[K] = q + 128, q = round(w / d) ∈ [−127, 127];  f32 d = max|w| / 127.
//   kQ4 (4-bit, symmetric per group of 32 along K), K/2 + K/16 bytes (4.5 bits per weight):
//     for each group g: 16 bytes, byte j = (q[32g + j] + 8) | (q[32g + 16 + j] + 8) << 4,
//     q = round(w / d_g) ∈ [−7, 7];  then K/32 f16 scales d_g = f16(max|w_g| / 7).
//   w ≈ d·q. The codes are offset-binary so that the kernels (kernels/gemv.h) multiply them
//   as unsigned bytes against signed int8 activations (AVX512-VNNI vpdpbusd).
//
//   kQ4T (the same codes and scales, regrouped for the kernels): each matrix (the last two
//   dims [N, K]) is groups of 16 rows (the last group: N mod 16 rows, when not 0), a group of
//   v rows taking v rows' bytes. Within a group, block g (32 along K) is 18v bytes: for each
//   dword d = 0..3 of the block's 16 kQ4 bytes, that dword of rows 0..v−1 (16v bytes), then
//   the v rows' f16 scales. So a decode kernel streams a group front to back and finds each
//   block's codes with the rows in lanes (AMX's B-tile layout once the nibbles are split),
//   with no transposition. A slice of whole groups (Tensor::rows) is a byte range.
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/status.h"

namespace hypic {

constexpr int64_t kQ4Group = 32;

// Whether a matrix whose rows have `cols` elements can be stored as `t` (q4: cols a multiple of
// the group); the error says what to do.
Status check_quantizable(DType t, int64_t cols);

// One row of `cols` floats → `t`'s row format (dst: dtype_row_bytes(t, cols) bytes).
void quantize_row(DType t, const float* src, int64_t cols, void* dst);
// One packed row → `cols` floats.
void dequantize_row(DType t, const void* src, int64_t cols, float* dst);

constexpr int64_t kQ4TRows = 16;
// One [n, cols] matrix of kQ4 rows → kQ4T (q4_tile) and back (q4_untile).
void q4_tile(const uint8_t* rows, int64_t n, int64_t cols, uint8_t* out);
void q4_untile(const uint8_t* tiled, int64_t n, int64_t cols, uint8_t* rows);

// The type a model keeps its matrices in for compute type t: kQ4T for kQ4, else t.
inline DType matrix_dtype(DType t) { return t == DType::kQ4 ? DType::kQ4T : t; }

}  // namespace hypic
