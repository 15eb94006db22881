// The decode products of kernels/gemv.h on AMX tiles (Intel Xeons with amx_bf16 / amx_int8),
// internal to the kernels layer. The weights are the tiles' rows (16 output channels a
// tile), the few activation rows its columns, so W streams from memory once for all M rows
// and the cost per weight byte hardly grows with M (the AVX-512 kernels' does, linearly).
//
// Arithmetic (each output element computed the same way whatever M is):
//   BF16: x rounded to bf16, tdpbf16ps over K in chunks of 32 (pairs summed in fp32).
//   Q8, Q4T: x quantized per block of 32 to int8 (as gemv.h says); per block one exact int32
//           dot product (offset-binary weight codes × int8 codes, minus offset·Σx: Q8 tdpbusd
//           with the weights as A, Q4T tdpbsud with them as B, core/quant.h's layout), then
//           acc += float(dot) · s in block order, s = d_x,b for Q8 (the row scale applied at
//           the end) and d_w,b · d_x,b for Q4T.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"

namespace hypic::kernels::amx {

// Whether this CPU has AMX (tile, bf16, int8), the OS granted this process the tile state and
// the ISA cap allows it (core/cpu.h; HYPIC_AMX=0 caps below amx).
bool available();

// x quantized per block of 32: q [kp] codes (zero past K), d [kp / 32] block scales, and
// when given sums [kp / 32] = Σ of each block's codes.
void quantize_blocks(const float* x, int64_t K, int64_t kp, int8_t* q, float* d,
                     int32_t* sums = nullptr);

// The activation rows in tile layout, prepared once per call and shared by every task.
struct X {
  DType t = DType::kBF16;
  int64_t M = 0, mp = 0, K = 0, kp = 0;  // mp: M rounded up to 1, 2, 4, 8 or 16 columns
  std::vector<uint8_t> b;                // B tiles: per chunk of 32 along K
  std::vector<int8_t> a;                 // Q4T: A tiles, the codes [mp][kp] (rows ≥ M zero)
  std::vector<float> dx;                 // Q8 / Q4: [kp / 32][16] d_x of column i % mp
  std::vector<int32_t> corr;             // Q8 / Q4: [kp / 32][16] −offset · Σ codes, likewise
};
void prepare(const float* x, int64_t ldx, int64_t M, int64_t K, DType t, X& out);

// y[m · ldy + n] (+)= row n of W · x_m for n in [n0, n1); W's rows are `ws` bytes apart
// from `w` (row 0); `pf` bytes ahead of each row read are prefetched.
void rows(const uint8_t* w, size_t ws, int64_t n0, int64_t n1, const X& x, float* y,
          int64_t ldy, bool accumulate, size_t pf);

// Q8 / Q4T: the same products with the same arithmetic (bit-identical) on AVX-512 registers
// (AVX512-VNNI only), for x.M ≤ kLanesMaxRows rows of x, where the tiles' fixed cost per
// block dominates, and for Q4T any row count on CPUs without AMX (kernels/gemv_lanes.cpp).
// Q4T: n0 and n1 split no group of 16 rows.
constexpr int64_t kLanesMaxRows = 4;
void rows_lanes(const uint8_t* w, size_t ws, int64_t n0, int64_t n1, const X& x, float* y,
                int64_t ldy, bool accumulate);

}  // namespace hypic::kernels::amx
