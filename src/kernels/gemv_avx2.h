// The decode GEMVs of kernels/gemv.h on 256-bit registers (AVX2 + FMA + F16C; AVX-VNNI's
// vpdpbusd where the CPU has it), internal to the kernels layer. Each reproduces the
// arithmetic of a twin bit for bit, so a row's result does not depend on which tier ran it
// (tested):
//   F32, BF16: the AVX-512 kernels keep 16 fp32 lanes per output, lane j summing the
//     products of positions j, j + 16, … (bf16: the pairs 2j, 2j + 1, the odd element
//     first, as vdpbf16ps does) and add the lanes as a fixed tree. Here each output has two
//     8-lane accumulators, lanes 0–7 and 8–15, added in the same tree. (bf16: vdpbf16ps
//     flushes denormal inputs and results to zero, these kernels do not.)
//   Q8: rows in lanes, per block of 32 one exact int32 dot product (vpmaddubsw of |q| and x
//     carrying q's sign, ≤ 2 · 128 · 127 a pair, then vpmaddwd; the lanes' partials summed by a
//     vphaddd tree), acc += float(dot) · d_x in block order, times d_w: the AMX tiles' and
//     amx::rows_lanes' arithmetic, and the integer GEMM's (gemm_avx2.h), which gemv runs for
//     5–16 rows (the rows regrouped there; here, for 1–4, read in place).
//   Q4T: rows in lanes as amx::rows_lanes, 8 rows a register: per block one exact int32
//     dot product (vpmaddubsw products of the 4-bit codes, at most 30,480 in int16 over a
//     block, then vpmaddwd; or vpdpbusd), acc += float(dot) · (d_w · d_x).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/gemv_amx.h"

namespace hypic::kernels::avx2 {

// RB rows of W from w (`ws` bytes apart, `pf` bytes ahead prefetched) against MB activation
// rows; out[r · MB + m] = the row's dot product.
// x: F32 [M][kp] (kp a multiple of 16), BF16 [M][kp] bf16 bits (kp a multiple of 32), zero
// past K. Supported (RB, MB): (4, 1) and (1, 1..4).
struct F32X {
  const float* v;
  int64_t kp;
};
struct Bf16X {
  const uint16_t* v;
  int64_t kp;
};
// Q8's x: codes [M][kp] (kp a multiple of 32, zero past K), block scales dx [M][kp / 32].
struct Q8X {
  const int8_t* q;
  const float* dx;
  int64_t kp;
};

template <int RB, int MB>
void f32_block(const uint8_t* w, size_t ws, size_t pf, int64_t K, const F32X& x, int64_t m0,
               float* out);
template <int RB, int MB>
void bf16_block(const uint8_t* w, size_t ws, size_t pf, int64_t K, const Bf16X& x, int64_t m0,
                float* out);
// BF16 rows [n0, n1) of W × M ≤ kBf16RowsMax rows of x into y: bf16_block's results bit for bit (its
// faster form for many rows). xs: x split by bf16_split_x, fp32 in blocks of kBf16SplitK
// elements, [kp / kBf16SplitK rounded up][M][kBf16SplitK] (contiguous per block: no two rows
// 4 KiB apart in L1), per 16 elements the 8 odd ones, then the 8 even ones.
constexpr int64_t kBf16SplitK = 256, kBf16RowsMax = 24;
inline int64_t bf16_split_floats(int64_t M, int64_t kp) {
  return (kp + kBf16SplitK - 1) / kBf16SplitK * M * kBf16SplitK;
}
void bf16_split_x(const uint16_t* v, int64_t M, int64_t kp, float* xs);
void bf16_rows(const uint8_t* w, size_t ws, int64_t n0, int64_t n1, int64_t K, const float* xs,
               int64_t kp, int64_t M, float* y, int64_t ldy, bool accumulate);
// Q8 rows [n0, n1) of W (row-major, `ws` bytes apart from w = row 0; `pf` bytes ahead
// prefetched: whole groups of 8 rows, as the kernel reads 8 rows at a time) × the M rows of x
// into y, times each row's scale d_w.
void q8_rows(const uint8_t* w, size_t ws, int64_t n0, int64_t n1, int64_t K, const Q8X& x,
             int64_t M, size_t pf, float* y, int64_t ldy, bool accumulate);

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
