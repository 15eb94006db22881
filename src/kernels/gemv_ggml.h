// The decode GEMVs of kernels/gemv.h on ggml's blocks as a GGUF file stores them (core/ggml_quant.h:
// Q8_0, Q4_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K), internal to the kernels layer. x is quantized to
// int8 as llama.cpp quantizes it for these types: per 32 for the 32-element blocks, per 256 (a
// super-block) for the K-quants (d_x = max|x| / 127, codes round(x / d_x), and each 32's code
// sum); the weight codes are decoded to int8 and the products summed exactly in integers:
//   Q8_0, Q4_0, Q5_0:  Σ_b d_b·d_x,b·Σ q·q_x          (codes q − 8 / q − 16)
//   Q5_1:              Σ_b d_x,b·(d_b·Σ q·q_x + m_b·Σ q_x)
//   K-quants:    Σ_s d_x,s·(d·Σ_j sc_j·Σ q·q_x − dmin·Σ_j m_j·Σ q_x)   (Q6_K: sc per 16,
//                codes q − 32, no mins: d·Σ_j sc_j·(Σ q·q_x − 32·Σ q_x))
// Tiers: AVX2 (vpmaddubsw / vpmaddwd, the integer scale applied by vpmaddwd; 8 fp32 lanes per x
// row; Q5_0 / Q5_1, llama-quantize's fallback for a few small matrices, on the portable code)
// and the portable code; their fp32 sums are ordered differently (tested against the
// dequantized reference with one bound, not bit for bit).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace hypic::kernels::ggml {

// x quantized: codes [M][kp] (kp a multiple of the group, zero past K), scales dx
// [M][kp / group], code sums per 32 bsum [M][kp / 32] and per 16 bsum16 [M][kp / 16].
struct X {
  const int8_t* q;
  const float* dx;
  const int32_t* bsum;
  const int16_t* bsum16;
  int64_t kp, group;
};

// The group x is quantized in for weights of type t (32 or 256).
int64_t x_group(DType t);
// One row of x (K floats) quantized as above into q [kp], dx [kp / group], bsum [kp / 32],
// bsum16 [kp / 16] (|sum| ≤ 16·127: int16).
void quantize_x(const float* x, int64_t K, int64_t kp, int64_t group, int8_t* q, float* dx, int32_t* bsum,
                int16_t* bsum16);

// Rows [n0, n1) of W (type t, rows ws bytes apart from w) × the M rows of x into y (rows ldy
// apart; added when accumulate), prefetching pf bytes (a whole number of rows) ahead.
void rows(DType t, const uint8_t* w, size_t ws, int64_t n0, int64_t n1, int64_t K, const X& x,
          int64_t M, float* y, int64_t ldy, bool accumulate, bool avx2, size_t pf);

// One row of K elements of type t into floats (prefill panels): the reference decode's values
// (core/ggml_quant.h) on AVX2, or that decode itself.
void dequantize_row(DType t, const uint8_t* w, int64_t K, float* out, bool avx2);

}  // namespace hypic::kernels::ggml
