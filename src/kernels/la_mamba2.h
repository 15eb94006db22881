// Mamba2 SSD as a decay family: the kernel inputs from a layer's raw quantities.
#pragma once

#include <cstdint>
#include <limits>

namespace hypic::kernels {

// Per token t and head h (Mamba2, Dao & Gu 2024, SSD recurrence
// h_t = e^{Δ_t A_h}·h_{t−1} + B_t (Δ_t x_t)ᵀ, y_t = h_tᵀ C_t):
//     Δ = clamp(softplus(dt + dt_bias), dt_min, dt_max),  A = −exp(A_log),
//     v = Δ·x,  g = Δ·A.
// The kernel then runs with k = B: [L, ngroups, dstate], q = C: [L, ngroups, dstate] as they
// are (LaDims{nk = ngroups, nv = nheads, dk = dstate, dv = headdim}) and scale = 1.
// The D-skip (y += D·x) and the z-gate stay outside the kernel. The clamp is transformers'
// time_step_limit (default (0, ∞): none).
//   x: [L, nheads, headdim]   dt: [L, nheads]   dt_bias, A_log: [nheads]
//   v: [L, nheads, headdim] written   g: [L, nheads] written   delta: [L, nheads] (optional)
void mamba2_kernel_inputs(int L, int nheads, int headdim, const float* x, const float* dt,
                          const float* dt_bias, const float* A_log, float* v, float* g,
                          float* delta = nullptr, float dt_min = 0.0f,
                          float dt_max = std::numeric_limits<float>::infinity());

}  // namespace hypic::kernels
