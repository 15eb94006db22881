// Row-wise and element-wise ops on fp32 activations. Shapes: x: [rows, n] row-major.
#pragma once

#include <cmath>
#include <cstdint>

namespace hypic::kernels {

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// torch.nn.functional.softplus with beta=1, threshold=20.
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

float dot(const float* a, const float* b, int64_t n);
// y += a * x
void axpy(float a, const float* x, float* y, int64_t n);

// RMSNorm: y = x * rsqrt(mean(x²) + eps) * (zero_centred ? 1 + w : w). w: [n]. y may alias x.
void rmsnorm(const float* x, const float* w, float* y, int64_t rows, int64_t n, float eps,
             bool zero_centred);
// Gated RMSNorm (Qwen3-Next GDN output): y = rmsnorm(x; w as is) * silu(z). x, z, y: [rows, n].
void rmsnorm_gated(const float* x, const float* z, const float* w, float* y, int64_t rows,
                   int64_t n, float eps);
// Group RMSNorm with a sigmoid gate (Ring-linear / MiniMax Lightning output): each row of n
// splits into `groups` contiguous groups of n/groups, each normalised by its own RMS;
// y = x̂·w ⊙ σ(gate). x, gate, y: [rows, n]; w: [n] (as is). y may alias x.
void group_rmsnorm_sigmoid(const float* x, const float* gate, const float* w, float* y,
                           int64_t rows, int64_t n, int64_t groups, float eps);
// x / sqrt(sum(x²) + eps), per row.
void l2norm(float* x, int64_t rows, int64_t n, float eps);
void silu_inplace(float* x, int64_t n);
// y = silu(gate) * up, elementwise; gate, up, y: [n]. y may alias gate. limit > 0 clamps
// both factors first: min(silu(gate), limit) * clamp(up, -limit, limit) (Ling-3.0's limits).
void swiglu(const float* gate, const float* up, float* y, int64_t n, float limit = 0);
// x[i] = exp(x[i]) for i < n, vectorised (Cephes, ≈1 ulp; arguments below ln(FLT_MIN),
// −inf included, give 0: no denormals; NaN propagates; every element rounds alike).
void exp_inplace(float* x, int64_t n);
// y[i] = exp(x[i]), the same function out of place (y may alias x).
void exp_array(const float* x, float* y, int64_t n);
// In-place softmax of one row.
void softmax(float* x, int64_t n);

}  // namespace hypic::kernels
