// Matrix-vector products for decode: y [M, N] (+)= x [M, K] · Wᵀ with few rows (one decode
// step, a batched decode step, a short piece). Bound by the bytes of W: each weight row is
// read from memory once for all M rows, the rows of W are split over the threads (a matrix
// under 64 KiB × M — 1 MiB where OpenMP threads sleep at once — stays on the calling
// thread: HYPIC_GEMV_INLINE_KB), and every output element is computed the same way
// whatever M is (a sequence's logits do not depend on the batch it decodes in), except bf16
// on AMX CPUs (see GemvPath).
//
// Arithmetic per weight type (W as in kernels/gemm.h, [N, K] rows; packed types core/quant.h):
//   F32:  products summed in fp32 (routers and gates kept in fp32, f32 models).
//   BF16: x rounded to bf16, products summed in fp32 (as the oneDNN bf16 GEMM does).
//   Q8, Q4T: x quantized per block of 32 along K to int8 (d_x = max|x_b| / 127, round to
//           nearest), integer dot products per block, then Σ_b d_w·d_x,b·dot_b in fp32.
// Kernels are chosen at run time under the ISA cap (core/cpu.h): AMX tiles for BF16 / Q8 / Q4T
// where the CPU has them (kernels/gemv_amx.h: per-block int32 products scaled once per block,
// so its fp32 sums are ordered differently), else AVX-512 for F32, AVX512-BF16 for BF16,
// AVX512-VNNI for Q8 / Q4T, else AVX2 (+ AVX-VNNI for Q8 / Q4T; kernels/gemv_avx2.h, the
// AVX-512 kernels' results bit for bit), else a portable path (tier generic).
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace hypic::kernels {

// Row counts up to this take gemv (kernels::linear dispatches); bf16 on CPUs without AMX up to
// gemv_max_rows (its kernels there beat widening W to fp32 panels up to that many rows).
constexpr int64_t kGemvMaxRows = 16;
int64_t gemv_max_rows(DType t);

// Whether gemv handles weights of type t (F32, BF16, Q8, Q4T; not kQ4's stored rows).
bool gemv_handles(DType t);

// y rows ldy apart (+)= x rows ldx apart · Wᵀ, M ≤ gemv_max_rows(t), W [N, K] of a handled
// type t.
void gemv(const float* x, int64_t ldx, int64_t M, const Tensor& W, float* y, int64_t ldy,
          bool accumulate);

// The kernel gemv runs for type t and M rows of x on this CPU: "amx_bf16", "amx_int8" (its
// 1–4-row twin on AVX-512 included), "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni",
// "avx2" or "generic" ("none" for a type it does not handle).
const char* gemv_impl(DType t, int64_t M);

// kBest: the fastest kernels this CPU has per type and row count; bf16 of 1–2 rows then runs
// on AVX512-BF16 and more rows on AMX tiles, so on an AMX CPU a bf16 row's last bits depend on
// its batch (every other type and CPU: they never do). kBatchInvariant: bf16 on the tiles for
// every row count (the process starts so with HYPIC_BATCH_INVARIANT=1). Lower tiers: the ISA
// cap (cpu::set_cap; HYPIC_MAX_ISA).
enum class GemvPath { kBest, kBatchInvariant };
void gemv_force_path(GemvPath p);

// Weight bytes gemv has read since the process started (each call adds W's bytes; all
// threads): what a decode step streams, for benchmarks.
uint64_t gemv_weight_bytes();

// Rows [n0, n1) of a packed W ([N, K] Q8, or Q4T in whole groups) as bf16 [n1 − n0, K]
// (prefill GEMM panels): bit-identical to dequantize_row rounded to bf16.
void dequantize_rows_bf16(const Tensor& W, int64_t n0, int64_t n1, uint16_t* out);
// Rows [n0, n1) of a BF16 or packed W as fp32 [n1 − n0, K] (prefill panels on CPUs without a
// bf16 GEMM): bit-identical to to_f32 / dequantize_row.
void rows_f32(const Tensor& W, int64_t n0, int64_t n1, float* out);

}  // namespace hypic::kernels
