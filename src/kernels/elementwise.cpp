#include "kernels/elementwise.h"

#include <algorithm>

#include "core/parallel.h"
#include "kernels/vec8.h"

namespace hypic::kernels {

// Cephes expf: range reduction by ln 2 in two parts and a degree-6 polynomial, ≈1 ulp.
// Arguments below ln(FLT_MIN) give 0 (no denormals reach the GEMMs); above 88 are clamped;
// NaN propagates.
namespace {
constexpr float kExpLo = -87.33654475f, kExpHi = 88.0f;

using v8::F;

inline F exp8(F x) {
  const F lo = v8::set1(kExpLo);
  const F xc = v8::min(v8::set1(kExpHi), v8::max(lo, x));
  const F fx = v8::floor(v8::fmadd(xc, v8::set1(1.44269504088896341f), v8::set1(0.5f)));
  F r = v8::fnmadd(fx, v8::set1(0.693359375f), xc);
  r = v8::fmadd(fx, v8::set1(2.12194440e-4f), r);
  const F z = v8::mul(r, r);
  F y = v8::set1(1.9875691500e-4f);
  y = v8::fmadd(y, r, v8::set1(1.3981999507e-3f));
  y = v8::fmadd(y, r, v8::set1(8.3334519073e-3f));
  y = v8::fmadd(y, r, v8::set1(4.1665795894e-2f));
  y = v8::fmadd(y, r, v8::set1(1.6666665459e-1f));
  y = v8::fmadd(y, r, v8::set1(5.0000001201e-1f));
  y = v8::add(v8::fmadd(y, z, r), v8::set1(1.0f));
  return v8::zero_below(v8::mul(y, v8::pow2(v8::trunc_i32(fx))), x, lo);
}

inline F silu8(F x) {
  const F e = exp8(v8::sub(v8::zero(), x));
  return v8::div(x, v8::add(v8::set1(1.0f), e));
}

inline F sigmoid8(F x) {
  const F one = v8::set1(1.0f);
  return v8::div(one, v8::add(one, exp8(v8::sub(v8::zero(), x))));
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
  F acc0 = v8::zero(), acc1 = v8::zero();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = v8::fmadd(v8::load(a + i), v8::load(b + i), acc0);
    acc1 = v8::fmadd(v8::load(a + i + 8), v8::load(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = v8::fmadd(v8::load(a + i), v8::load(b + i), acc0);
  float r = v8::hsum(v8::add(acc0, acc1));
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
    const F vinv = v8::set1(inv);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const F xn = v8::mul(v8::load(xr + i), vinv);
      v8::store(yr + i, v8::mul(v8::mul(v8::load(w + i), xn), silu8(v8::load(zr + i))));
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
    const F vinv = v8::set1(inv);
    int64_t i = 0;
    for (; i + 8 <= g; i += 8) {
      const F xn = v8::mul(v8::load(xr + i), vinv);
      v8::store(yr + i, v8::mul(v8::mul(xn, v8::load(w + c0 + i)), sigmoid8(v8::load(zr + i))));
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
  for (; i + 8 <= n; i += 8) v8::store(x + i, silu8(v8::load(x + i)));
  for (; i < n; ++i) x[i] = silu(x[i]);
}

void swiglu(const float* gate, const float* up, float* y, int64_t n, float limit) {
  int64_t i = 0;
  if (limit > 0) {
    const F hi = v8::set1(limit), lo = v8::set1(-limit);
    for (; i + 8 <= n; i += 8) {
      const F g = v8::min(silu8(v8::load(gate + i)), hi);
      v8::store(y + i, v8::mul(g, v8::min(v8::max(v8::load(up + i), lo), hi)));
    }
    for (; i < n; ++i) y[i] = std::min(silu(gate[i]), limit) * std::clamp(up[i], -limit, limit);
    return;
  }
  for (; i + 8 <= n; i += 8)
    v8::store(y + i, v8::mul(silu8(v8::load(gate + i)), v8::load(up + i)));
  for (; i < n; ++i) y[i] = silu(gate[i]) * up[i];
}

void exp_array(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) v8::store(y + i, exp8(v8::load(x + i)));
  if (i < n) {  // tail through the same vector code, so every element rounds alike
    float buf[8] = {};
    for (int64_t j = i; j < n; ++j) buf[j - i] = x[j];
    v8::store(buf, exp8(v8::load(buf)));
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
