// The quantized row formats (core/quant.h) and the decode GEMV kernels (kernels/gemv.h)
// against plain references written here, in double: every dispatch path this CPU runs
// (the AVX-512 kernels where present, and the portable path, forced).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/testutil.h"
#include "core/quant.h"
#include "core/tensor.h"
#include "kernels/gemm.h"
#include "kernels/gemv.h"
#include "kernels/gemv_amx.h"

namespace hypic::kernels {
namespace {

using test::randn;

Tensor matrix(int64_t N, int64_t K, uint32_t seed, float scale = 0.05f) {
  Tensor W = Tensor::zeros_f32({N, K});
  auto w = randn(size_t(N * K), seed, scale);
  std::copy(w.begin(), w.end(), W.f32());
  return W;
}

// The activation quantization gemv documents, written independently: per block of 32,
// d = max|x| / 127, code = round(x / d).
void quantize_x(const float* x, int64_t K, std::vector<double>* deq) {
  deq->assign(size_t(K), 0.0);
  for (int64_t b = 0; b < K; b += 32) {
    float amax = 0;
    for (int64_t k = b; k < std::min(K, b + 32); ++k) amax = std::max(amax, std::fabs(x[k]));
    const float d = amax / 127.0f;
    for (int64_t k = b; k < std::min(K, b + 32); ++k)
      (*deq)[size_t(k)] = d > 0 ? double(d) * std::nearbyint(x[k] * (1.0f / d)) : 0.0;
  }
}

// Reference y = x' · W_deqᵀ in double, x' the activations as the kernel sees them
// (bf16-rounded for BF16, block-quantized for Q8 / Q4T); also Σ|terms| for the tolerance.
void reference(const std::vector<float>& x, int64_t M, const Tensor& W, std::vector<double>* y,
               std::vector<double>* mag) {
  const int64_t N = W.dim(0), K = W.dim(1);
  Tensor Wf = W.to(DType::kF32);
  y->assign(size_t(M * N), 0.0);
  mag->assign(size_t(M * N), 0.0);
  std::vector<double> xd(static_cast<size_t>(K));
  for (int64_t m = 0; m < M; ++m) {
    const float* xm = x.data() + m * K;
    if (W.dtype() == DType::kF32) {
      for (int64_t k = 0; k < K; ++k) xd[size_t(k)] = xm[k];
    } else if (W.dtype() == DType::kBF16) {
      for (int64_t k = 0; k < K; ++k) xd[size_t(k)] = bf16_to_f32(f32_to_bf16(xm[k]));
    } else {
      quantize_x(xm, K, &xd);
    }
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        const double t = xd[size_t(k)] * Wf.f32()[n * K + k];
        (*y)[size_t(m * N + n)] += t;
        (*mag)[size_t(m * N + n)] += std::fabs(t);
      }
  }
}

struct Case {
  DType t;
  int64_t M, N, K;
};

void check_against_reference(const Case& c, GemvPath path) {
  gemv_force_path(path);
  const Tensor W = matrix(c.N, c.K, uint32_t(7 + c.K)).to(c.t);
  auto x = randn(size_t(c.M * c.K), uint32_t(11 + c.M));
  std::vector<double> ref, mag;
  reference(x, c.M, W, &ref, &mag);
  std::vector<float> y(size_t(c.M * c.N), 0.5f);
  gemv(x.data(), c.K, c.M, W, y.data(), c.N, false);
  const std::string what = std::string(dtype_name(c.t)) + " " + gemv_impl(c.t, c.M) + " M=" +
                           std::to_string(c.M) + " N=" + std::to_string(c.N) + " K=" +
                           std::to_string(c.K);
  // fp32 accumulation of K products, each exact or rounded once: ≤ K·2⁻²³·Σ|terms| (the
  // integer block sums of Q8 / Q4 are exact; their block scales add two roundings per term).
  for (size_t i = 0; i < ref.size(); ++i)
    ASSERT_NEAR(y[i], ref[i], 1e-6 + double(c.K + 4) * 1.2e-7 * mag[i]) << what << " at " << i;
  // accumulate adds onto y
  std::vector<float> y2(y.size(), 1.0f);
  gemv(x.data(), c.K, c.M, W, y2.data(), c.N, true);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y2[i], y[i] + 1.0f, 1e-5) << what;
  gemv_force_path(GemvPath::kBest);
}

const Case kCases[] = {
    {DType::kF32, 1, 7, 64},      {DType::kF32, 3, 130, 81},    {DType::kF32, 16, 67, 2048},
    {DType::kBF16, 1, 7, 64},     {DType::kBF16, 3, 130, 80},   {DType::kBF16, 16, 67, 2048},
    {DType::kQ8, 1, 7, 64},       {DType::kQ8, 5, 130, 96},     {DType::kQ8, 16, 67, 2050},
    {DType::kQ8, 2, 9, 1},        {DType::kQ4T, 1, 7, 64},      {DType::kQ4T, 5, 130, 96},
    {DType::kQ4T, 16, 67, 2080},  {DType::kQ4T, 4, 257, 512},   {DType::kQ4T, 12, 16, 64},
    // 53 rows: three whole 16-row tiles and a tail of 5 (the AMX kernels' block counts);
    // 2, 7 and 8 rows of x: 2 and 8 tile columns.
    {DType::kBF16, 2, 53, 96},    {DType::kQ8, 7, 53, 128},     {DType::kQ4T, 8, 53, 160},
};

bool amx_cpu() {
  return std::string(gemv_impl(DType::kBF16, kGemvMaxRows)).rfind("amx", 0) == 0;
}

// The paths this CPU runs: the best, on AMX CPUs also the batch-invariant one and the best
// without AMX, the portable.
std::vector<GemvPath> paths() {
  std::vector<GemvPath> p{GemvPath::kBest};
  if (amx_cpu()) p.insert(p.end(), {GemvPath::kBatchInvariant, GemvPath::kNoAmx});
  p.push_back(GemvPath::kGeneric);
  return p;
}

// Whether a row's bits may depend on its batch: only bf16 on AMX under kBest (1–2 rows on
// AVX512-BF16, more on the tiles; gemv.h).
bool batch_variant(GemvPath p, DType t, int64_t M) {
  return p == GemvPath::kBest && t == DType::kBF16 &&
         std::string(gemv_impl(t, 1)) != gemv_impl(t, M);
}

}  // namespace

TEST(Quant, RowRoundTripWithinHalfAStep) {
  for (int64_t K : {32, 64, 96, 1000}) {
    for (DType t : {DType::kQ8, DType::kQ4}) {
      if (!check_quantizable(t, K).is_ok()) continue;
      auto w = randn(size_t(K), uint32_t(K), 0.3f);
      w[3] = 2.5f;  // an outlier sets its group's scale
      std::vector<uint8_t> row(dtype_row_bytes(t, K));
      std::vector<float> back(static_cast<size_t>(K));
      quantize_row(t, w.data(), K, row.data());
      dequantize_row(t, row.data(), K, back.data());
      const int64_t g = t == DType::kQ8 ? K : kQ4Group;
      for (int64_t b = 0; b < K; b += g) {
        float amax = 0;
        for (int64_t k = b; k < b + g; ++k) amax = std::max(amax, std::fabs(w[size_t(k)]));
        // Half a step of d = amax / levels; Q4's d is f16-rounded (relative 2⁻¹¹), so its
        // largest code may clip by that much more.
        const double step = t == DType::kQ8 ? amax / 127.0 : amax / 7.0;
        for (int64_t k = b; k < b + g; ++k)
          ASSERT_LE(std::fabs(back[size_t(k)] - w[size_t(k)]), 0.5 * step + amax * 1e-3)
              << dtype_name(t) << " K=" << K << " k=" << k;
      }
    }
  }
  // Storage sizes: int8 K + 4 bytes a row, q4 4.5 bits a weight.
  EXPECT_EQ(dtype_row_bytes(DType::kQ8, 4096), 4100u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ4, 4096), 2048u + 256u);
  EXPECT_EQ(Tensor::zeros(DType::kQ4, {3, 64}).nbytes(), 3u * 36u);
}

TEST(Quant, Q4RefusesAnInputDimensionOffTheGroup) {
  const Status s = check_quantizable(DType::kQ4, 48);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("multiple"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("48"), std::string::npos) << s.message();
  EXPECT_TRUE(check_quantizable(DType::kQ8, 48).is_ok());
}

TEST(Quant, RowsOfAPackedMatrixAreByteRanges) {
  const Tensor W = matrix(6, 64, 3).to(DType::kQ4);
  const Tensor r = W.rows(2, 5);
  EXPECT_EQ(r.nbytes(), 3 * dtype_row_bytes(DType::kQ4, 64));
  EXPECT_EQ(std::memcmp(r.raw(), static_cast<const char*>(W.raw()) + 2 * 36, r.nbytes()), 0);
  const Tensor back = r.to(DType::kF32), all = W.to(DType::kF32);
  for (int i = 0; i < 3 * 64; ++i) ASSERT_EQ(back.f32()[i], all.f32()[2 * 64 + i]);
}

// kQ4T holds kQ4's bytes regrouped as core/quant.h says: checked byte by byte against the
// rows, both ways, for whole and short groups; slices of whole groups are byte ranges.
TEST(Quant, Q4TRegroupsTheRowsAsDocumented) {
  for (int64_t N : {1, 15, 16, 17, 53})
    for (int64_t K : {32, 96}) {
      const Tensor R = matrix(N, K, uint32_t(N + K)).to(DType::kQ4);
      const Tensor T = R.to(DType::kQ4T);
      ASSERT_EQ(T.nbytes(), R.nbytes());
      const size_t rb = dtype_row_bytes(DType::kQ4, K);
      const auto* rp = static_cast<const uint8_t*>(R.raw());
      const auto* tp = static_cast<const uint8_t*>(T.raw());
      for (int64_t n = 0; n < N; ++n) {
        const int64_t g0 = n / 16 * 16, v = std::min<int64_t>(16, N - g0), r = n - g0;
        for (int64_t b = 0; b < K / 32; ++b) {
          const uint8_t* blk = tp + size_t(g0) * rb + size_t(b * 18 * v);
          for (int64_t i = 0; i < 16; ++i)  // code byte i = byte i % 4 of dword i / 4
            ASSERT_EQ(blk[4 * (i / 4 * v + r) + i % 4], rp[size_t(n) * rb + size_t(16 * b + i)])
                << "N=" << N << " K=" << K << " row " << n << " block " << b;
          ASSERT_EQ(std::memcmp(blk + 16 * v + 2 * r, rp + size_t(n) * rb + size_t(K / 2 + 2 * b), 2), 0);
        }
      }
      const Tensor back = T.to(DType::kQ4);
      ASSERT_EQ(std::memcmp(back.raw(), R.raw(), R.nbytes()), 0) << "N=" << N << " K=" << K;
      if (N > 16) {
        const Tensor tail = T.rows(16, N), want = R.rows(16, N).to(DType::kQ4T);
        ASSERT_EQ(std::memcmp(tail.raw(), want.raw(), want.nbytes()), 0);
      }
    }
  // Stacked matrices [E, N, K] group each matrix's rows on their own.
  const Tensor R3 = matrix(3 * 20, 64, 4).to(DType::kQ4).reshape({3, 20, 64});
  const Tensor T3 = R3.to(DType::kQ4T);
  const Tensor one = R3.rows(1, 2).reshape({20, 64}).to(DType::kQ4T);
  EXPECT_EQ(std::memcmp(T3.rows(1, 2).raw(), one.raw(), one.nbytes()), 0);
}

// The activations' block codes (the vector path where the CPU has one) against the rule
// gemv.h states, evaluated here per element: bit-identical codes, scales and code sums.
TEST(Gemv, ActivationBlocksQuantizeAsDocumented) {
  for (int64_t K : {31, 64, 100, 3072}) {
    const int64_t kp = (K + 31) / 32 * 32, nb = kp / 32;
    auto x = randn(size_t(K), uint32_t(K), 2.0f);
    for (int64_t k = 0; k < std::min<int64_t>(K, 32); ++k) x[size_t(k)] = k == 7 ? 3.5f : 0.0f;
    std::vector<int8_t> q(size_t(kp), 99);
    std::vector<float> d(static_cast<size_t>(nb));
    std::vector<int32_t> sums(static_cast<size_t>(nb));
    amx::quantize_blocks(x.data(), K, kp, q.data(), d.data(), sums.data());
    for (int64_t b = 0; b < nb; ++b) {
      float amax = 0;
      for (int64_t k = b * 32; k < std::min(K, b * 32 + 32); ++k) amax = std::max(amax, std::fabs(x[size_t(k)]));
      const float want_d = amax / 127.0f, inv = want_d > 0 ? 1.0f / want_d : 0.0f;
      ASSERT_EQ(d[size_t(b)], want_d) << "K=" << K << " block " << b;
      int32_t sum = 0;
      for (int64_t k = b * 32; k < b * 32 + 32; ++k) {
        const int want = k < K ? std::clamp(int(std::nearbyint(x[size_t(k)] * inv)), -127, 127) : 0;
        ASSERT_EQ(q[size_t(k)], want) << "K=" << K << " k=" << k;
        sum += want;
      }
      ASSERT_EQ(sums[size_t(b)], sum) << "K=" << K << " block " << b;
    }
  }
}

TEST(Gemv, MatchesReferenceOnEveryPath) {
  for (GemvPath p : paths())
    for (const Case& c : kCases) check_against_reference(c, p);
}

// Against the unquantized activations: the only further error is x's quantization, at most
// half a step of each block's scale per term.
TEST(Gemv, QuantizedActivationErrorWithinItsBound) {
  for (DType t : {DType::kQ8, DType::kQ4T}) {
    const int64_t M = 2, N = 33, K = 512;
    const Tensor W = matrix(N, K, 5).to(t);
    const Tensor Wf = W.to(DType::kF32);
    auto x = randn(size_t(M * K), 6);
    x[17] = 40.0f;  // an outlier channel costs only its own block
    std::vector<float> y(size_t(M * N));
    gemv(x.data(), K, M, W, y.data(), N, false);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double exact = 0, bound = 1e-5;
        for (int64_t b = 0; b < K; b += 32) {
          float amax = 0;
          for (int64_t k = b; k < b + 32; ++k) amax = std::max(amax, std::fabs(x[size_t(m * K + k)]));
          for (int64_t k = b; k < b + 32; ++k) {
            const double wk = Wf.f32()[n * K + k];
            exact += wk * x[size_t(m * K + k)];
            bound += std::fabs(wk) * amax / 127.0 * 0.5;
          }
        }
        ASSERT_NEAR(y[size_t(m * N + n)], exact, bound) << dtype_name(t) << " " << m << "," << n;
      }
  }
}

// Row m of a batch of M against the same row alone: bit-identical, or where batch_variant
// allows two kernels, the same bf16 products summed in two orders (≤ 2·K·2⁻²⁴·Σ|terms| apart).
void expect_same_row(GemvPath p, DType t, int64_t M, int64_t m, const float* x,
                     const Tensor& W, const float* one, const float* all) {
  const int64_t N = W.dim(0), K = W.dim(1);
  const bool variant = batch_variant(p, t, M);
  const Tensor Wf = variant ? W.to(DType::kF32) : Tensor();
  for (int64_t n = 0; n < N; ++n) {
    if (!variant) {
      ASSERT_EQ(one[n], all[n]) << dtype_name(t) << " " << gemv_impl(t, M) << " M=" << M
                                << " " << m << "," << n;
      continue;
    }
    double mag = 0;
    for (int64_t k = 0; k < K; ++k)
      mag += std::fabs(double(bf16_to_f32(f32_to_bf16(x[k]))) * Wf.f32()[n * K + k]);
    ASSERT_NEAR(one[n], all[n], 1e-6 + 2.0 * double(K) * 6e-8 * mag) << "M=" << M << " " << m;
  }
}

// A row's result does not depend on the other rows decoded with it, nor on the threads, for
// every row count 1–16 (AMX: 1, 2, 4, 8 or 16 tile columns), on each path (bf16 on AMX under
// kBest: within the bound of two summation orders).
TEST(Gemv, RowsAreIndependentOfTheBatch) {
  for (GemvPath p : paths()) {
    gemv_force_path(p);
    for (DType t : {DType::kBF16, DType::kQ8, DType::kQ4T}) {
      const int64_t N = 301, K = 320;
      const Tensor W = matrix(N, K, 9).to(t);
      auto x = randn(size_t(16 * K), 10);
      std::vector<float> one(static_cast<size_t>(N));
      for (int64_t M = 2; M <= 16; ++M) {
        std::vector<float> all(size_t(M * N));
        gemv(x.data(), K, M, W, all.data(), N, false);
        for (int64_t m = 0; m < M; m += M - 1) {  // the first and the last row
          gemv(x.data() + m * K, K, 1, W, one.data(), N, false);
          expect_same_row(p, t, M, m, x.data() + m * K, W, one.data(), all.data() + m * N);
        }
      }
    }
  }
  gemv_force_path(GemvPath::kBest);
}

// The same on a whole multiple of the tile groups with the rows split over the threads.
TEST(Gemv, RowsAreIndependentOfTheBatchOnAllThreads) {
  for (GemvPath p : paths()) {
    gemv_force_path(p);
    for (DType t : {DType::kBF16, DType::kQ8, DType::kQ4T}) {
      const int64_t M = 11, N = 4100, K = 512;  // > 1 MiB of weights: row tasks on all threads
      const Tensor W = matrix(N, K, 9).to(t);
      auto x = randn(size_t(M * K), 10);
      std::vector<float> all(size_t(M * N)), one(static_cast<size_t>(N));
      gemv(x.data(), K, M, W, all.data(), N, false);
      for (int64_t m = 0; m < M; ++m) {
        gemv(x.data() + m * K, K, 1, W, one.data(), N, false);
        expect_same_row(p, t, M, m, x.data() + m * K, W, one.data(), all.data() + m * N);
      }
    }
  }
  gemv_force_path(GemvPath::kBest);
}

// Many rows of a packed W: dequantized to bf16 panels on oneDNN's GEMM (kernels::linear),
// against bf16(x) · bf16(W_deq) in double.
TEST(Gemv, PackedPrefillPathMatchesDequantizedReference) {
  for (DType t : {DType::kQ8, DType::kQ4T}) {
    const int64_t M = 40, N = 200, K = 256;
    const Tensor W = matrix(N, K, 12).to(t);
    const Tensor Wf = W.to(DType::kF32);
    auto x = randn(size_t(M * K), 13);
    std::vector<float> y(size_t(M * N), 2.0f);
    linear(x.data(), M, W, y.data(), true);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double a = bf16_to_f32(f32_to_bf16(x[size_t(m * K + k)]));
          const double b = bf16_to_f32(f32_to_bf16(Wf.f32()[n * K + k]));
          s += a * b;
          mag += std::fabs(a * b);
        }
        ASSERT_NEAR(y[size_t(m * N + n)], 2.0 + s, 1e-5 + K * 1.2e-7 * mag) << dtype_name(t);
      }
  }
}

// The prefill panels' dequantizer: the vector path (where this CPU has one) is bit-identical
// to the portable one, which is dequantize_row rounded to bf16 (checked here too).
TEST(Gemv, DequantizedRowsAreBitIdenticalOnEveryPath) {
  for (const auto& [t, K] : {std::pair{DType::kQ8, int64_t(2050)}, std::pair{DType::kQ8, int64_t(31)},
                             std::pair{DType::kQ4T, int64_t(2080)}, std::pair{DType::kQ4T, int64_t(32)}}) {
    // Q4T: from a whole group on (its rows 16 .. 36: a group of 16 and a short one).
    const int64_t N = 37, n0 = t == DType::kQ4T ? 16 : 2;
    const Tensor W = matrix(N, K, uint32_t(16 + K), 0.3f).to(t);
    const Tensor rows = t == DType::kQ4T ? W.to(DType::kQ4) : W;  // one row per row
    std::vector<uint16_t> fast(size_t((N - n0) * K)), slow(fast.size());
    dequantize_rows_bf16(W, n0, N, fast.data());
    gemv_force_path(GemvPath::kGeneric);
    dequantize_rows_bf16(W, n0, N, slow.data());
    gemv_force_path(GemvPath::kBest);
    std::vector<float> row(static_cast<size_t>(K));
    for (int64_t n = n0; n < N; ++n) {
      dequantize_row(rows.dtype(), rows.rows(n, n + 1).raw(), K, row.data());
      for (int64_t k = 0; k < K; ++k) {
        const size_t i = size_t((n - n0) * K + k);
        ASSERT_EQ(fast[i], slow[i]) << dtype_name(t) << " K=" << K << " row " << n << " col " << k;
        ASSERT_EQ(slow[i], f32_to_bf16(row[size_t(k)])) << dtype_name(t) << " row " << n;
      }
    }
  }
}

// The bf16 GEMV and oneDNN's bf16 GEMM (17 rows and more) agree to fp32 summation order.
TEST(Gemv, Bf16AgreesWithTheGemmPath) {
  const int64_t N = 96, K = 1024;
  const Tensor W = matrix(N, K, 14).to(DType::kBF16);
  auto x = randn(size_t(17 * K), 15);
  std::vector<float> big(size_t(17 * N)), small(static_cast<size_t>(N));
  linear(x.data(), 17, W, big.data());
  for (int64_t m = 0; m < 17; ++m) {
    linear(x.data() + m * K, 1, W, small.data());
    for (int64_t n = 0; n < N; ++n)
      ASSERT_NEAR(small[size_t(n)], big[size_t(m * N + n)], 1e-4 * (1 + std::fabs(big[size_t(m * N + n)])));
  }
}

TEST(Gemv, ReportsItsKernels) {
  const std::string f = gemv_impl(DType::kF32, 1), b = gemv_impl(DType::kBF16, 16),
                    q = gemv_impl(DType::kQ4T, 1);
  EXPECT_TRUE(f == "avx512f" || f == "generic") << f;
  EXPECT_TRUE(b == "amx_bf16" || b == "avx512_bf16" || b == "generic") << b;
  EXPECT_TRUE(q == "amx_int8" || q == "avx512_vnni" || q == "generic") << q;
  if (amx_cpu()) {  // bf16 of 1–2 rows on AVX512-BF16 unless batch-invariant
    EXPECT_EQ(std::string(gemv_impl(DType::kBF16, 2)), "avx512_bf16");
    EXPECT_EQ(std::string(gemv_impl(DType::kBF16, 3)), "amx_bf16");
    gemv_force_path(GemvPath::kBatchInvariant);
    EXPECT_EQ(std::string(gemv_impl(DType::kBF16, 1)), "amx_bf16");
  }
  gemv_force_path(GemvPath::kNoAmx);
  EXPECT_EQ(std::string(gemv_impl(DType::kBF16, 16)).rfind("amx", 0), std::string::npos);
  gemv_force_path(GemvPath::kBest);
  EXPECT_EQ(std::string(gemv_impl(DType::kF16, 1)), "none");
  EXPECT_EQ(std::string(gemv_impl(DType::kQ4, 1)), "none");  // stored rows: regroup first
}

}  // namespace hypic::kernels
