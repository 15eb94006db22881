#include "kernels/conv1d.h"

#include <cstring>
#include <vector>

#include "core/parallel.h"
#include "kernels/elementwise.h"

namespace hypic::kernels {

void causal_conv1d_silu(const float* x, int64_t L, int64_t C, const float* w, int K,
                        float* state, float* y) {
  const int P = K - 1;
  // Input row r of the virtual sequence (state ++ x): r < P from state, else x[r - P].
  auto row = [&](int64_t r) { return r < P ? state + r * C : x + (r - P) * C; };
  const int64_t kBlock = 256;  // channels per task
  parallel_for((C + kBlock - 1) / kBlock, [&](int64_t b) {
    const int64_t c0 = b * kBlock, c1 = std::min(C, c0 + kBlock);
    for (int64_t t = 0; t < L; ++t) {
      float* yt = y + t * C;
      for (int64_t c = c0; c < c1; ++c) {
        float acc = 0;
        for (int j = 0; j < K; ++j) acc += w[c * K + j] * row(t + j)[c];
        yt[c] = silu(acc);
      }
    }
  });
  // New state: last P rows of (state ++ x).
  std::vector<float> ns(size_t(P * C));
  for (int i = 0; i < P; ++i) std::memcpy(&ns[size_t(i * C)], row(L + i), size_t(C) * 4);
  std::memcpy(state, ns.data(), ns.size() * 4);
}

}  // namespace hypic::kernels
