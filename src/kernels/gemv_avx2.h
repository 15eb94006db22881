// The decode GEMVs of kernels/gemv.h on 256-bit registers (AVX2 + FMA + F16C; AVX-VNNI's
// vpdpbusd where the CPU has it), internal to the kernels layer. Each reproduces the
// arithmetic of its AVX-512 twin bit for bit, so a row's result does not depend on which
// of the two tiers ran it (tested):
//   F32, BF16, Q8: the AVX-512 kernels keep 16 fp32 lanes per output, lane j summing the
//     products of positions j, j + 16, … (bf16: the pairs 2j, 2j + 1, the odd element
//     first, as vdpbf16ps does; Q8: the int32 dot product of dword lane j, scaled by its
//     block's d_x) and add the lanes as a fixed tree. Here each output has two 8-lane
//     accumulators, lanes 0–7 and 8–15, added in the same tree. (bf16: vdpbf16ps flushes
//     denormal inputs and results to zero, these kernels do not.)
//   Q4T: rows in lanes as amx::rows_lanes, 8 rows a register: per block one exact int32
//     dot product (vpmaddubsw products of the 4-bit codes, at most 30,480 in int16 over a
//     block, then vpmaddwd; or vpdpbusd), acc += float(dot) · (d_w · d_x).
// Int8 without VNNI: vpmaddubsw of |w| and x carrying w's sign (products ≤ 2 · 127 · 127 per
// pair, no saturation), then vpmaddwd.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/gemv_amx.h"

namespace hypic::kernels::avx2 {

// RB rows of W from w (`ws` bytes apart, `pf` bytes ahead prefetched) against MB activation
// rows; out[r · MB + m] = the row's dot product (Q8: before the row scale d_w).
// x: F32 [M][kp] (kp a multiple of 16), BF16 [M][kp] bf16 bits (kp a multiple of 32), zero
// past K. Q8: codes [M][kp] (kp a multiple of 64), corr / dl [M][kp / 4] per dword lane as in
// gemv.cpp's XQuant. Supported (RB, MB): (4, 1) and (1, 1..4).
struct F32X {
  const float* v;
  int64_t kp;
};
struct Bf16X {
  const uint16_t* v;
  int64_t kp;
};
struct Q8X {
  const int8_t* q;
  const int32_t* corr;
  const float* dl;
  int64_t kp;
};

template <int RB, int MB>
void f32_block(const uint8_t* w, size_t ws, size_t pf, int64_t K, const F32X& x, int64_t m0,
               float* out);
template <int RB, int MB>
void bf16_block(const uint8_t* w, size_t ws, size_t pf, int64_t K, const Bf16X& x, int64_t m0,
                float* out);
template <int RB, int MB, bool VNNI>
void q8_block(const uint8_t* w, size_t ws, size_t pf, int64_t K, const Q8X& x, int64_t m0,
              float* out);

// Q4T rows [n0, n1) (whole groups) × every row of x (amx::prepare's layout), into y as
// amx::rows_lanes.
void q4t_rows(const uint8_t* w, size_t ws, int64_t n0, int64_t n1, const amx::X& x, float* y,
              int64_t ldy, bool accumulate, bool vnni);

// x quantized per block of 32 as amx::quantize_blocks (bit-identical).
void quantize_blocks(const float* x, int64_t K, int64_t kp, int8_t* q, float* d, int32_t* sums);

// Rows of a bf16 / Q8 / kQ4 matrix widened or dequantized to fp32 (prefill panels):
// bit-identical to to_f32 / dequantize_row.
void bf16_to_f32_row(const uint16_t* in, int64_t K, float* out);
void dequant_q8_row(const uint8_t* in, int64_t K, float* out);
void dequant_q4_row(const uint8_t* in, int64_t K, float* out);

}  // namespace hypic::kernels::avx2
