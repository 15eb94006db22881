// Many-row products of Q4T weights on 512-bit integer dot products (AVX512-VNNI), the prefill
// GEMM of AVX-512 CPUs without AMX; internal to the kernels layer (kernels/gemm.h picks it).
// The 256-bit kernel's arithmetic (kernels/gemm_avx2.h) with a whole Q4T group of 16 rows in a
// register, and up to 8 rows of x per pass over it: per output element, per block, one exact
// int32 dot product, then acc += float(dot) · (d_w,b · d_x,b) in fp32 — lane for lane what the
// decode GEMVs compute, so a prefilled row is bit-identical to its decode row.
#pragma once

#include <cstdint>

#include "kernels/gemm_avx2.h"

namespace hypic::kernels::avx512 {

// y[m · ldy + n] (+)= row n of W · x_m for n in [n0, n1) and every row of x (quantized by
// avx2::quantize_rows with offset 8); W's rows `ws` bytes apart from w (row 0), n0 and n1
// splitting no group of 16. Only where cpu::has(kAvx512F | kAvx512Bw | kAvx512Vnni).
void q4t_gemm(const uint8_t* w, size_t ws, int64_t n0, int64_t n1, const avx2::QuantRows& x, float* y,
              int64_t ldy, bool accumulate);

}  // namespace hypic::kernels::avx512
