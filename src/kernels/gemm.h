// Matrix products on oneDNN. All activations are fp32 row-major; weights are fp32, bf16 or
// packed (core/quant.h) in torch's Linear layout W: [N, K] (out_features, in_features). Few
// rows go to the decode GEMVs (kernels/gemv.h). Many rows: with bf16 weights on CPUs with a
// bf16 matmul (AVX512-BF16 / AMX; the ISA cap, core/cpu.h) the activations are rounded to bf16
// and accumulated in fp32, packed weights dequantized to bf16 panels; below that tier bf16
// and packed weights are widened to fp32 panels and multiplied in fp32.
// Primitives are created once per shape and reused; calls are thread-safe.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "core/tensor.h"

namespace hypic::kernels {

// A product oneDNN could not create or run on this CPU: thrown by linear and
// batched_matmul_f32, its message naming the CPU, the ISA tier and what to do. The model's
// pass catches it (Model::run_pass: a Status); nothing above the model sees it.
class KernelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// y: [M, N] = x: [M, K] · Wᵀ  (y += ... when accumulate). W: [N, K], F32 or BF16.
void linear(const float* x, int64_t M, const Tensor& W, float* y, bool accumulate = false);

// Strided variant: x rows ldx apart, y rows ldy apart (e.g. writing into a slice).
void linear_strided(const float* x, int64_t ldx, int64_t M, const Tensor& W, float* y,
                    int64_t ldy, bool accumulate);

// Batched fp32 C[b] = op(A[b]) · op(B[b]) with op = optional transpose, row-major,
// A: [batch, M, K] (or [batch, K, M] if ta), B: [batch, K, N] (or [batch, N, K] if tb),
// C: [batch, M, N]. Each matrix contiguous; strides between batches are M*K, K*N, M*N.
void batched_matmul_f32(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A, bool ta,
                        const float* B, bool tb, float* C, bool accumulate = false);

// GFLOP/s of one oneDNN matmul [M,K]·[K,N] with weights of type `wt`, measured now (best of
// at least `reps` and 0.5 s of runs); the yardstick benchmarks compare achieved throughput against.
double measure_matmul_gflops(int64_t M, int64_t K, int64_t N, DType wt, int reps = 5);

// How many-row products of bf16 / packed weights are computed: kAuto, the faster on this CPU
// (gemm.cpp; HYPIC_PREFILL_GEMM=bf16|f32|int8 at start-up); kBf16, oneDNN's bf16 matmul where
// the CPU has one (AVX512-BF16); kF32, fp32 panels; kInt8, packed weights on integer dot
// products with x quantized per block (kernels/gemm_avx2.h; bf16 weights on fp32 panels). For
// tests and benchmarks.
enum class PrefillGemm { kAuto, kBf16, kF32, kInt8 };
void prefill_gemm_force(PrefillGemm p);

// How prefill multiplies many rows against weights of type t on this CPU: "onednn_f32",
// "onednn_bf16", "bf16_panels" (packed weights dequantized to bf16), "f32_panels", or
// "int8_avx2" / "int8_avx_vnni" (packed weights, kernels/gemm_avx2.h).
const char* prefill_impl(DType t);

// oneDNN's ISA in this process ("avx2", "avx512_core_bf16", …; set by the start-up cap).
std::string onednn_isa();

// oneDNN implementation name picked for a shape (diagnostics, `hypic inspect`).
std::string matmul_impl_name(int64_t M, int64_t K, int64_t N, DType wt);

}  // namespace hypic::kernels
