#include "kernels/elementwise.h"

#include <immintrin.h>

#include <algorithm>

#include "core/parallel.h"

namespace hypic::kernels {

// Cephes expf: range reduction by ln 2 in two parts and a degree-6 polynomial, ≈1 ulp.
// Arguments below ln(FLT_MIN) give 0 (no denormals reach the GEMMs); above 88 are clamped;
// NaN propagates.
namespace {
constexpr float kExpLo = -87.33654475f, kExpHi = 88.0f;

inline __m256 exp8(__m256 x) {
  const __m256 lo = _mm256_set1_ps(kExpLo);
  const __m256 xc = _mm256_min_ps(_mm256_set1_ps(kExpHi), _mm256_max_ps(lo, x));
  const __m256 fx = _mm256_floor_ps(
      _mm256_fmadd_ps(xc, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fmadd_ps(fx, _mm256_set1_ps(2.12194440e-4f), r);
  const __m256 z = _mm256_mul_ps(r, r);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_add_ps(_mm256_fmadd_ps(y, z, r), _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvttps_epi32(fx), _mm256_set1_epi32(127)), 23);
  const __m256 res = _mm256_mul_ps(y, _mm256_castsi256_ps(e));
  return _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LT_OQ), res);
}

inline __m256 silu8(__m256 x) {
  const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
  return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

inline __m256 sigmoid8(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

// body(r) for r in [0, count) in tasks of ≥ 4,096 elements (rows of n): a task per (often
// 64-wide) row cost more to schedule than to compute; a decode step's few rows stay on this
// thread.
template <typename F>
void row_tasks(int64_t count, int64_t n, const F& body) {
  const int64_t per = std::max<int64_t>(1, 4096 / n);
  parallel_for((count + per - 1) / per, [&](int64_t task) {
    for (int64_t r = task * per; r < std::min(count, (task + 1) * per); ++r) body(r);
  });
}
}  // namespace

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
  row_tasks(rows, n, [&](int64_t r) {
    const float* xr = x + r * n;
    const float* zr = z + r * n;
    float* yr = y + r * n;
    const float inv = 1.0f / std::sqrt(dot(xr, xr, n) / float(n) + eps);
    const __m256 vinv = _mm256_set1_ps(inv);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256 xn = _mm256_mul_ps(_mm256_loadu_ps(xr + i), vinv);
      _mm256_storeu_ps(yr + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(w + i), xn),
                                             silu8(_mm256_loadu_ps(zr + i))));
    }
    for (; i < n; ++i) yr[i] = w[i] * (xr[i] * inv) * silu(zr[i]);
  });
}

void group_rmsnorm_sigmoid(const float* x, const float* gate, const float* w, float* y,
                           int64_t rows, int64_t n, int64_t groups, float eps) {
  const int64_t g = n / groups;
  row_tasks(rows * groups, g, [&](int64_t rg) {
    const int64_t off = rg * g, c0 = (rg % groups) * g;
    const float* xr = x + off;
    const float* zr = gate + off;
    float* yr = y + off;
    const float inv = 1.0f / std::sqrt(dot(xr, xr, g) / float(g) + eps);
    const __m256 vinv = _mm256_set1_ps(inv);
    int64_t i = 0;
    for (; i + 8 <= g; i += 8) {
      const __m256 xn = _mm256_mul_ps(_mm256_loadu_ps(xr + i), vinv);
      _mm256_storeu_ps(yr + i, _mm256_mul_ps(_mm256_mul_ps(xn, _mm256_loadu_ps(w + c0 + i)),
                                             sigmoid8(_mm256_loadu_ps(zr + i))));
    }
    for (; i < g; ++i) yr[i] = (xr[i] * inv) * w[c0 + i] * sigmoid(zr[i]);
  });
}

void l2norm(float* x, int64_t rows, int64_t n, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = x + r * n;
    const float inv = 1.0f / std::sqrt(dot(xr, xr, n) + eps);
    for (int64_t i = 0; i < n; ++i) xr[i] *= inv;
  }
}

void silu_inplace(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, silu8(_mm256_loadu_ps(x + i)));
  for (; i < n; ++i) x[i] = silu(x[i]);
}

void swiglu(const float* gate, const float* up, float* y, int64_t n, float limit) {
  int64_t i = 0;
  if (limit > 0) {
    const __m256 hi = _mm256_set1_ps(limit), lo = _mm256_set1_ps(-limit);
    for (; i + 8 <= n; i += 8) {
      const __m256 g = _mm256_min_ps(silu8(_mm256_loadu_ps(gate + i)), hi);
      _mm256_storeu_ps(y + i, _mm256_mul_ps(g, _mm256_min_ps(_mm256_max_ps(_mm256_loadu_ps(up + i), lo), hi)));
    }
    for (; i < n; ++i) y[i] = std::min(silu(gate[i]), limit) * std::clamp(up[i], -limit, limit);
    return;
  }
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_mul_ps(silu8(_mm256_loadu_ps(gate + i)), _mm256_loadu_ps(up + i)));
  for (; i < n; ++i) y[i] = silu(gate[i]) * up[i];
}

void exp_array(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i)));
  if (i < n) {  // tail through the same vector code, so every element rounds alike
    alignas(32) float buf[8] = {};
    for (int64_t j = i; j < n; ++j) buf[j - i] = x[j];
    _mm256_store_ps(buf, exp8(_mm256_load_ps(buf)));
    for (int64_t j = i; j < n; ++j) y[j] = buf[j - i];
  }
}

void exp_inplace(float* x, int64_t n) { exp_array(x, x, n); }

void softmax(float* x, int64_t n) {
  const float m = *std::max_element(x, x + n);
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += (x[i] = std::exp(x[i] - m));
  const float inv = 1.0f / s;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

}  // namespace hypic::kernels
