// ggml's block formats (the tensor types of llama.cpp's GGUF files) as hypic row types
// (core/dtype.h kGQ8_0 … kGQ5_1): a row of K elements is K / block_elems blocks back to back.
//   Q8_0 (32 elements, 34 bytes): f16 d, 32 int8 q; w = d·q.
//   Q4_0 (32, 18): f16 d, 16 bytes: element i in byte i's low nibble, i + 16 in its high one;
//        w = d·(q − 8).
//   Q5_0 (32, 22): f16 d, 4 bytes qh (bit i: element i's fifth bit), Q4_0's 16 bytes of
//        nibbles; w = d·(q − 16).   Q5_1 (32, 24): f16 d, f16 m, then as Q5_0; w = d·q + m.
//        (llama-quantize's fallback where a row is no whole number of K-quant super-blocks.)
//   Q4_K (256, 144): f16 d, f16 dmin, 12 bytes of 6-bit scales / mins of 8 sub-blocks of 32,
//        128 bytes of nibbles (each 32 bytes: a sub-block in the low nibbles, the next in the
//        high ones); w = d·sc·q − dmin·m.
//   Q5_K (256, 176): as Q4_K with 32 bytes qh of fifth bits before the nibbles.
//   Q6_K (256, 210): 128 bytes of low nibbles, 64 of 2-bit highs, 16 int8 scales (one per 16
//        elements), f16 d; w = d·sc·(q − 32).
// The decode is ggml's reference (ggml-quants.c dequantize_row_*) element by element: what the
// GEMV kernels are tested against.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace hypic {

int64_t ggml_block_elems(DType t);  // 32 or 256 (0: not a ggml type)
int64_t ggml_block_bytes(DType t);
// `blocks` whole blocks of type t into floats.
void ggml_dequantize_blocks(DType t, const uint8_t* src, float* dst, int64_t blocks);
// n rows of K elements of Q4_0 blocks (rows `stride` bytes apart) → hypic's kQ4 rows
// (core/quant.h): the same nibbles in the same order and the same f16 scales, the scales
// gathered at the row's end — exact (kQ4's codes are Q4_0's, −8 included).
void ggml_q4_0_to_q4_rows(const uint8_t* src, size_t stride, int64_t n, int64_t K, uint8_t* dst);
// n rows of Q4_K super-blocks → kQ4 rows: each sub-block j of 32 a kQ4 group, its nibbles
// re-laid (kQ4: elements i and i + 16 in byte i) and its scale s = f16(d·sc_j) (rounded: the
// product needs up to 17 significant bits). kQ4's value s·(q − 8) then lacks 8·s − dmin·m_j
// of the block's s·q − dmin·m_j, written to offsets [n][K / 32] when not null; dst may be
// null (offsets only).
void ggml_q4_k_to_q4_rows(const uint8_t* src, size_t stride, int64_t n, int64_t K, uint8_t* dst, float* offsets);
// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K super-block's 12 bytes:
// j < 4 the low 6 bits of q[j] / q[j + 4]; j >= 4 the low / high nibble of q[j + 4] and the
// top 2 bits of q[j - 4] / q[j].
inline void ggml_scale_min_k4(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

}  // namespace hypic
