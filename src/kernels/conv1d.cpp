#include "kernels/conv1d.h"

#include <cstring>
#include <vector>

#include "core/parallel.h"
#include "kernels/elementwise.h"

namespace hypic::kernels {

void causal_conv1d_silu(const float* x, int64_t L, int64_t C, const float* wt, int K,
                        float* state, float* y) {
  const int P = K - 1;
  // Input row r of the virtual sequence (state ++ x): r < P from state, else x[r - P].
  auto row = [&](int64_t r) { return r < P ? state + r * C : x + (r - P) * C; };
  parallel_for(L, [&](int64_t t) {
    float* yt = y + t * C;
    const float* r0 = row(t);
    for (int64_t c = 0; c < C; ++c) yt[c] = wt[c] * r0[c];
    for (int j = 1; j < K; ++j) {
      const float* rj = row(t + j);
      const float* wj = wt + int64_t(j) * C;
      for (int64_t c = 0; c < C; ++c) yt[c] += wj[c] * rj[c];
    }
    silu_inplace(yt, C);
  });
  // New state: last P rows of (state ++ x).
  std::vector<float> ns(static_cast<size_t>(P * C));
  for (int i = 0; i < P; ++i) std::memcpy(&ns[size_t(i * C)], row(L + i), size_t(C) * 4);
  std::memcpy(state, ns.data(), ns.size() * 4);
}

}  // namespace hypic::kernels
