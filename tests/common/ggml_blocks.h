// Random matrices in ggml's block formats (core/ggml_quant.h) for the kernel tests and benchmarks.
#pragma once

#include <cstring>
#include <random>

#include "core/ggml_quant.h"
#include "core/tensor.h"

namespace hypic::test {

// N rows of K elements of type t: random codes and scale bytes, f16 super-block scales in a
// sane range (a random f16 may be Inf or NaN).
inline Tensor random_ggml_blocks(DType t, int64_t N, int64_t K, uint32_t seed) {
  Tensor W = Tensor::zeros(t, {N, K});
  auto* p = static_cast<uint8_t*>(W.raw());
  std::mt19937 g(seed);
  for (size_t i = 0; i < W.nbytes(); ++i) p[i] = uint8_t(g());
  std::uniform_real_distribution<float> scale(0.002f, 0.02f);
  const int64_t bb = ggml_block_bytes(t), blocks = int64_t(W.nbytes()) / bb;
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* blk = p + b * bb;
    auto put = [&](size_t off) {
      const uint16_t h = f32_to_f16(scale(g));
      std::memcpy(blk + off, &h, 2);
    };
    if (t == DType::kGQ6K) {
      put(208);
    } else {
      put(0);
      if (t == DType::kGQ4K || t == DType::kGQ5K || t == DType::kGQ5_1) put(2);
    }
  }
  return W;
}

}  // namespace hypic::test
