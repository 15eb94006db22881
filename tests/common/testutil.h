// Shared test helpers: seeded random fills and normalised error.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace hypic::test {

inline std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// ‖a − b‖ / ‖b‖ (plain ‖a−b‖ when b is 0).
inline double rel_err(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += double(a[i] - b[i]) * double(a[i] - b[i]);
    den += double(b[i]) * double(b[i]);
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}
inline double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  return rel_err(a.data(), b.data(), b.size());
}

// ‖a − b‖ / ‖b‖ against a double-precision reference.
inline double rel_err_d(const float* a, const double* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += b[i] * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}
inline double rel_err_d(const std::vector<float>& a, const std::vector<double>& b) {
  return rel_err_d(a.data(), b.data(), b.size());
}

// Tolerance for fp32 results accumulated over n terms: relative rounding of a dot product
// grows like sqrt(n)·ε for random-signed terms (ε = 2^-24); `c` covers the few chained ops
// of a kernel (products, exp, division).
inline double fp32_tol(double n, double c = 8.0) { return c * std::sqrt(n) * 5.96e-8; }

}  // namespace hypic::test
