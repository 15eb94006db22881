#include "kernels/rope.h"

#include <cmath>

#include "core/parallel.h"

namespace hypic::kernels {

Rope::Rope(int rot, float theta, bool interleaved)
    : rot_(rot), interleaved_(interleaved), inv_freq_(size_t(rot / 2)) {
  // As transformers computes it in fp32: 1 / theta^(2i/rot).
  for (int i = 0; i < rot / 2; ++i)
    inv_freq_[size_t(i)] = 1.0f / std::pow(theta, float(2 * i) / float(rot));
}

void Rope::apply_at(float* x, int64_t L, int nh, int hd, const int64_t* pos) const {
  const int half = rot_ / 2;
  parallel_for(L, [&](int64_t t) {
    float cs[512], sn[512];
    for (int i = 0; i < half; ++i) {
      const float f = float(pos[t]) * inv_freq_[size_t(i)];  // fp32 product, as the reference
      cs[i] = std::cos(f);
      sn[i] = std::sin(f);
    }
    const int stride = interleaved_ ? 2 : 1, other = interleaved_ ? 1 : half;
    for (int h = 0; h < nh; ++h) {
      float* v = x + (t * nh + h) * hd;
      for (int i = 0; i < half; ++i) {
        float* p = v + i * stride;
        const float a = p[0], b = p[other];
        p[0] = a * cs[i] - b * sn[i];
        p[other] = b * cs[i] + a * sn[i];
      }
    }
  });
}

void Rope::apply(float* x, int64_t L, int nh, int hd, int64_t pos0) const {
  std::vector<int64_t> pos(static_cast<size_t>(L));
  for (int64_t i = 0; i < L; ++i) pos[size_t(i)] = pos0 + i;
  apply_at(x, L, nh, hd, pos.data());
}

}  // namespace hypic::kernels
