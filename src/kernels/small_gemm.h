// Register-blocked fp32 GEMM for the small per-head products of the linear-attention and
// attention kernels. Single-threaded per call: it is called from inside parallel regions.
//
//   C[M×N] = alpha · op(A)·B + beta · C      (beta == 0: C is not read)
// op(A) = A [M×K] (lda) or, when trans_a, A stored as [K×M] (lda). B: [K×N] (ldb), all
// row-major; operands are read in place with their strides (no packing).
// tri = kALower: A is lower triangular incl. diagonal; K-loops stop at the row block's
//       last row, so A's entries above the diagonal inside a 6-row block are read and must
//       be 0 (beyond that they are never read).
// tri = kCLower: only C's lower triangle incl. diagonal (j <= i) is computed / written
//       (in 16-column granularity more may be written; never read what you did not ask).
//
// Microkernels: AVX-512 6 rows × 64 columns (24 zmm accumulators, ≈110 GFLOP/s per core
// here), picked at run time; baseline x86-64-v3 (AVX2 + FMA) 6 × 16; scalar without AVX2.
#pragma once

#include <cstdint>

namespace hypic::kernels {

enum class Tri { kNone, kALower, kCLower };
void small_gemm(int M, int N, int K, float alpha, const float* A, int64_t lda, bool trans_a,
                const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                Tri tri = Tri::kNone);

// Which code path small_gemm (and so every kernel built on it) uses. kAuto picks AVX-512
// when the CPU has it and the ISA cap (core/cpu.h) allows it. Tests force kGeneric to cover
// the baseline path. Process-wide.
enum class Isa { kAuto, kGeneric, kAvx512 };
void set_isa(Isa isa);
Isa active_isa();  // kGeneric or kAvx512

}  // namespace hypic::kernels
