// Many-row products of packed weights (Q8, Q4T) on 256-bit integer dot products, the
// prefill GEMM of CPUs without a bf16 matmul (kernels/gemm.h), internal to the kernels layer.
// x is quantized per block of 32 as the decode GEMVs do it (kernels/gemv.h; amx::quantize_
// blocks); per output element, per block: one exact int32 dot product of the weight codes and
// x's codes (vpmaddubsw of 4-bit planes summed in int16, then vpmaddwd; or AVX-VNNI's
// vpdpbusd), then in fp32:
//   Q4T: acc += float(dot) · (d_w,b · d_x,b)   — the GEMV lanes kernels' arithmetic, so a
//        row's result is bit-identical to its decode GEMV (every tier without AMX);
//   Q8:  acc += float(dot) · d_x,b, times the row scale d_w at the end.
// Weights are read rows in lanes, 8 rows a register: Q4T as stored (core/quant.h), its 4-bit
// codes' vpmaddubsw products (≤ 2 · 15 · 127 a pair) summed in int16 over a block; Q8 regrouped
// a chunk at a time: bytes for vpdpbusd, or (without VNNI) signed int16 pairs for vpmaddwd
// against x's codes as int16.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace hypic::kernels::avx2 {

// x's rows quantized per block of 32: codes [M][kp] (zero past K; also as int16 in q16 when
// asked), and per block d [M][nb] and corr [M][nb] = −offset · Σ codes (offset: the weights'
// code offset, 128 for Q8, 8 for Q4T).
struct QuantRows {
  int64_t M = 0, K = 0, kp = 0, nb = 0;
  std::vector<int8_t> q;
  std::vector<int16_t> q16;
  std::vector<float> d;
  std::vector<int32_t> corr;
};
void quantize_rows(const float* x, int64_t ldx, int64_t M, int64_t K, int offset, bool int16,
                   QuantRows& out);

// y[m · ldy + n] (+)= row n of W · x_m for n in [n0, n1) and every row of x.
// Q4T: W's rows `ws` bytes apart from w (row 0), n0 and n1 splitting no group of 16.
void q4t_gemm(const uint8_t* w, size_t ws, int64_t n0, int64_t n1, const QuantRows& x, float* y,
              int64_t ldy, bool accumulate, bool vnni);
// Q8: likewise (any n0, n1).
void q8_gemm(const uint8_t* w, size_t ws, int64_t n0, int64_t n1, const QuantRows& x, float* y,
             int64_t ldy, bool accumulate, bool vnni);

// x rows per pass over a chunk's weights: their codes (kRowTile · K bytes) stay in L2 with the
// chunk (≤ 1 MiB of fp32-equivalent rows, kernels/gemm.cpp), instead of being read from L3 once
// per group of weight rows when M is large.
inline constexpr int64_t kRowTile = 64;

// Whether Q4T runs on the 512-bit kernel (kernels/gemm_avx512.h): AVX512-VNNI, in the ISA cap.
bool q4t_on_avx512();

// y (+)= x · Wᵀ for a Q8, Q4T or ggml Q4_0 / Q4_K W [N, K] (re-laid as Q4T a chunk at a time,
// core/ggml_quant.h; Q4_K's block offsets are the caller's to add) and M rows of x: x quantized
// once, W's rows in chunks of `chunk` (a multiple of 16; no row's result depends on it) as tasks
// on the threads. For Q4_K, when not null: block_sums [M][K / 32] the sums of x's quantized
// blocks (d · Σ codes) and offsets [N][K / 32] W's block offsets (written by the same pass that
// re-lays the chunk): y += block_sums · offsetsᵀ completes the product.
void linear_int8(const float* x, int64_t ldx, int64_t M, const Tensor& W, float* y, int64_t ldy,
                 bool accumulate, int64_t chunk, float* block_sums = nullptr, float* offsets = nullptr);

}  // namespace hypic::kernels::avx2
