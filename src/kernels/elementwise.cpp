#include "kernels/elementwise.h"

#include <immintrin.h>

#include <algorithm>

#include "core/parallel.h"

namespace hypic::kernels {

float dot(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8)
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  acc0 = _mm256_add_ps(acc0, acc1);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc0), _mm256_extractf128_ps(acc0, 1));
  s = _mm_hadd_ps(s, s);
  s = _mm_hadd_ps(s, s);
  float r = _mm_cvtss_f32(s);
  for (; i < n; ++i) r += a[i] * b[i];
  return r;
}

void axpy(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void rmsnorm(const float* x, const float* w, float* y, int64_t rows, int64_t n, float eps,
             bool zero_centred) {
  parallel_for(rows, [&](int64_t r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    const float inv = 1.0f / std::sqrt(dot(xr, xr, n) / float(n) + eps);
    if (zero_centred) {
      for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] * inv) * (1.0f + w[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] * inv) * w[i];
    }
  });
}

void rmsnorm_gated(const float* x, const float* z, const float* w, float* y, int64_t rows,
                   int64_t n, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    const float* zr = z + r * n;
    float* yr = y + r * n;
    const float inv = 1.0f / std::sqrt(dot(xr, xr, n) / float(n) + eps);
    for (int64_t i = 0; i < n; ++i) yr[i] = w[i] * (xr[i] * inv) * silu(zr[i]);
  }
}

void l2norm(float* x, int64_t rows, int64_t n, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = x + r * n;
    const float inv = 1.0f / std::sqrt(dot(xr, xr, n) + eps);
    for (int64_t i = 0; i < n; ++i) xr[i] *= inv;
  }
}

void silu_inplace(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = silu(x[i]);
}

void swiglu(const float* gate, const float* up, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = silu(gate[i]) * up[i];
}

void softmax(float* x, int64_t n) {
  const float m = *std::max_element(x, x + n);
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += (x[i] = std::exp(x[i] - m));
  const float inv = 1.0f / s;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace hypic::kernels
