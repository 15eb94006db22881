// The decode GEMVs of kernels/gemv.h on ggml's blocks as a GGUF file stores them (core/ggml_quant.h:
// Q8_0, Q4_0, Q4_K, Q5_K, Q6_K), internal to the kernels layer. x is quantized per block of 32
// to int8 as for hypic's Q8 / Q4T (gemv.h: d_x = max|x_b| / 127), each weight block's codes are
// decoded to signed int8, and per 32 elements one exact int32 dot product is taken
// (vpmaddubsw of |w| and x carrying w's sign, then vpmaddwd; the scalar tier sums the same
// products), then scaled in fp32:
//   Q8_0, Q4_0:  Σ_b d_b·d_x,b·dot_b                       (Q4_0's codes q − 8)
//   Q4_K, Q5_K:  Σ_b d_x,b·(d·sc_j·dot_b − dmin·m_j·Σ_b q_x)  (sub-block j = block b)
//   Q6_K:        Σ_b d_x,b·d·(sc_lo·dot_lo + sc_hi·dot_hi)   (two 16-element halves, q − 32)
// Tiers: AVX2 (8 fp32 lanes per x row, summed once per output) and the portable code; their
// fp32 sums are ordered differently (tested against the dequantized reference with the same
// bound, not bit for bit).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace hypic::kernels::ggml {

// x quantized: codes [M][kp] (kp a multiple of 32, zero past K), block scales dx and block
// code sums bsum, [M][kp / 32] each.
struct X {
  const int8_t* q;
  const float* dx;
  const int32_t* bsum;
  int64_t kp;
};

// Rows [n0, n1) of W (type t, rows ws bytes apart from w) × the M rows of x into y (rows ldy
// apart; added when accumulate).
void rows(DType t, const uint8_t* w, size_t ws, int64_t n0, int64_t n1, int64_t K, const X& x,
          int64_t M, float* y, int64_t ldy, bool accumulate, bool avx2);

}  // namespace hypic::kernels::ggml
