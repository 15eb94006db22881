// Causal depthwise 1-D convolution (kernel K, no bias) followed by SiLU, with a rolling
// state of the last K-1 inputs so prefill and decode compose exactly.
#pragma once

#include <cstdint>

namespace hypic::kernels {

// x: [L, C] pre-conv inputs; wt: [K, C] (torch Conv1d weight [C, 1, K], transposed so the
// channel loop is contiguous);
// state: [K-1, C], the K-1 inputs before x (zeros at sequence start), updated to the last
// K-1 inputs of (state ++ x). y: [L, C] = silu(conv). y must not alias x.
void causal_conv1d_silu(const float* x, int64_t L, int64_t C, const float* wt, int K,
                        float* state, float* y);

}  // namespace hypic::kernels
