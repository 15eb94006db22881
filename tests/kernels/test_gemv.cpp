// The quantized row formats (core/quant.h) and the decode GEMV kernels (kernels/gemv.h)
// against plain references written here, in double: every dispatch path this CPU runs
// (each ISA tier it reaches, core/cpu.h: AMX, AVX-512, AVX-VNNI, AVX2, the portable path).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "common/testutil.h"
#include "core/cpu.h"
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

// A dispatch path: an ISA cap (core/cpu.h) and the gemv path under it.
struct Path {
  cpu::Tier cap;
  GemvPath gemv;
};

// Puts a path in force for a scope.
class UsePath {
 public:
  explicit UsePath(const Path& p) : cap_(p.cap) { gemv_force_path(p.gemv); }
  ~UsePath() { gemv_force_path(GemvPath::kBest); }

 private:
  cpu::ScopedCap cap_;
};

std::string path_name(const Path& p) {
  return std::string(cpu::tier_name(p.cap)) + (p.gemv == GemvPath::kBatchInvariant ? "/invariant" : "");
}

void check_against_reference(const Case& c, const Path& path) {
  UsePath use(path);
  if (c.M > gemv_max_rows(c.t)) return;  // more rows than gemv takes on this path
  const Tensor W = matrix(c.N, c.K, uint32_t(7 + c.K)).to(c.t);
  auto x = randn(size_t(c.M * c.K), uint32_t(11 + c.M));
  std::vector<double> ref, mag;
  reference(x, c.M, W, &ref, &mag);
  std::vector<float> y(size_t(c.M * c.N), 0.5f);
  gemv(x.data(), c.K, c.M, W, y.data(), c.N, false);
  const std::string what = std::string(dtype_name(c.t)) + " " + path_name(path) + " " +
                           gemv_impl(c.t, c.M) + " M=" + std::to_string(c.M) + " N=" +
                           std::to_string(c.N) + " K=" + std::to_string(c.K);
  // fp32 accumulation of K products, each exact or rounded once: ≤ K·2⁻²³·Σ|terms| (the
  // integer block sums of Q8 / Q4 are exact; their block scales add two roundings per term).
  for (size_t i = 0; i < ref.size(); ++i)
    ASSERT_NEAR(y[i], ref[i], 1e-6 + double(c.K + 4) * 1.2e-7 * mag[i]) << what << " at " << i;
  // accumulate adds onto y
  std::vector<float> y2(y.size(), 1.0f);
  gemv(x.data(), c.K, c.M, W, y2.data(), c.N, true);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y2[i], y[i] + 1.0f, 1e-5) << what;
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
    // bf16 on the AVX2 tiers takes up to 24 rows (gemv_max_rows); K ends inside a piece.
    {DType::kBF16, 24, 67, 1000},
};

bool amx_cpu() {
  return std::string(gemv_impl(DType::kBF16, kGemvMaxRows)).rfind("amx", 0) == 0;
}

// The paths this CPU runs: every tier it reaches, once each (a cap whose tier this CPU lacks
// lands on a lower one already listed), and on AMX CPUs also the batch-invariant tiles.
std::vector<Path> paths() {
  std::vector<Path> p;
  std::set<int> seen;
  for (int i = int(cpu::startup_cap()); i >= 0; --i) {
    cpu::ScopedCap cap{cpu::Tier(i)};
    if (!seen.insert(int(cpu::tier())).second) continue;
    p.push_back({cpu::Tier(i), GemvPath::kBest});
    if (amx_cpu()) p.push_back({cpu::Tier(i), GemvPath::kBatchInvariant});
  }
  return p;
}

// Whether a row's bits may depend on its batch: only bf16 on AMX under kBest (1–2 rows on
// AVX512-BF16, more on the tiles; gemv.h). Called with `p` in force (the caller's UsePath: a
// UsePath of its own would put kBest back when it ends, under the caller's feet).
bool batch_variant(const Path& p, DType t, int64_t M) {
  return p.gemv == GemvPath::kBest && t == DType::kBF16 &&
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
  for (const Path& p : paths()) {
    cpu::ScopedCap cap(p.cap);
    for (int64_t K : {31, 64, 100, 3072}) {
      const int64_t kp = (K + 31) / 32 * 32, nb = kp / 32;
      auto x = randn(size_t(K), uint32_t(K), 2.0f);
      for (int64_t k = 0; k < std::min<int64_t>(K, 32); ++k) x[size_t(k)] = k == 7 ? 3.5f : 0.0f;
      std::vector<int8_t> q(size_t(kp), 99);
      std::vector<float> d(static_cast<size_t>(nb));
      std::vector<int32_t> sums(static_cast<size_t>(nb));
      amx::quantize_blocks(x.data(), K, kp, q.data(), d.data(), sums.data());
      const std::string at = path_name(p) + " K=" + std::to_string(K);
      for (int64_t b = 0; b < nb; ++b) {
        float amax = 0;
        for (int64_t k = b * 32; k < std::min(K, b * 32 + 32); ++k) amax = std::max(amax, std::fabs(x[size_t(k)]));
        const float want_d = amax / 127.0f, inv = want_d > 0 ? 1.0f / want_d : 0.0f;
        ASSERT_EQ(d[size_t(b)], want_d) << at << " block " << b;
        int32_t sum = 0;
        for (int64_t k = b * 32; k < b * 32 + 32; ++k) {
          const int want = k < K ? std::clamp(int(std::nearbyint(x[size_t(k)] * inv)), -127, 127) : 0;
          ASSERT_EQ(q[size_t(k)], want) << at << " k=" << k;
          sum += want;
        }
        ASSERT_EQ(sums[size_t(b)], sum) << at << " block " << b;
      }
    }
  }
}

TEST(Gemv, MatchesReferenceOnEveryPath) {
  for (const Path& p : paths())
    for (const Case& c : kCases) check_against_reference(c, p);
}

#if defined(__x86_64__)
// The AVX2 kernels reproduce their twins bit for bit (gemv_avx2.h): F32 and BF16 the
// AVX-512F / AVX512-BF16 kernels, Q4T the lanes kernel, every row count, with and without
// AVX-VNNI; Q8 the per-block arithmetic of amx::rows_lanes (the AMX tiles'), 1–4 rows (more
// rows: RowsAreIndependentOfTheBatch). Where this CPU has AVX512-BF16.
TEST(Gemv, Avx2KernelsMatchTheAvx512KernelsBitForBit) {
  if (int(cpu::startup_cap()) < int(cpu::Tier::kAvx512Bf16)) GTEST_SKIP() << "no AVX512-BF16 here";
  std::vector<cpu::Tier> low{cpu::Tier::kAvx2};
  if (cpu::detected() & cpu::kAvxVnni) low.push_back(cpu::Tier::kAvxVnni);
  for (DType t : {DType::kF32, DType::kBF16, DType::kQ8, DType::kQ4T})
    for (const auto& [N, K] :
         {std::pair<int64_t, int64_t>{67, 2080}, {301, 320}, {9, 96}, {19, 1000}}) {
      if (t == DType::kQ4T && K % 32 != 0) continue;  // q4 groups are 32 along K
      const Tensor W = matrix(N, K, uint32_t(20 + K)).to(t);
      auto x = randn(size_t(24 * K), uint32_t(21 + N));
      for (int64_t M : {1, 2, 3, 4, 5, 7, 13, 16, 24}) {
        if (t == DType::kQ8 && M > amx::kLanesMaxRows) continue;
        if (M > kGemvMaxRows && t != DType::kBF16) continue;  // only bf16 takes more rows on AVX2
        std::vector<float> want(size_t(M * N)), got(want.size());
        if (t == DType::kQ8) {
          amx::X X;
          amx::prepare(x.data(), K, M, K, t, X);
          amx::rows_lanes(static_cast<const uint8_t*>(W.raw()), dtype_row_bytes(t, K), 0, N, X, want.data(), N, false);
        } else {
          cpu::ScopedCap cap(cpu::Tier::kAvx512Bf16);  // the vector kernels, no tiles
          for (int64_t m0 = 0; m0 < M; m0 += kGemvMaxRows)  // its rows do not depend on the batch
            gemv(x.data() + m0 * K, K, std::min(kGemvMaxRows, M - m0), W, want.data() + m0 * N, N,
                 false);
        }
        for (cpu::Tier tier : low) {
          cpu::ScopedCap cap(tier);
          gemv(x.data(), K, M, W, got.data(), N, false);
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_EQ(got[i], want[i]) << dtype_name(t) << " " << gemv_impl(t, M) << " M=" << M
                                       << " N=" << N << " K=" << K << " at " << i;
        }
      }
    }
}
#endif

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
void expect_same_row(const Path& p, DType t, int64_t M, int64_t m, const float* x,
                     const Tensor& W, const float* one, const float* all) {
  const int64_t N = W.dim(0), K = W.dim(1);
  const bool variant = batch_variant(p, t, M);
  const Tensor Wf = variant ? W.to(DType::kF32) : Tensor();
  for (int64_t n = 0; n < N; ++n) {
    if (!variant) {
      ASSERT_EQ(one[n], all[n]) << path_name(p) << " " << dtype_name(t) << " " << gemv_impl(t, 1) << " / "
                                << gemv_impl(t, M) << " M=" << M << " " << m << "," << n;
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
  for (const Path& p : paths()) {
    UsePath use(p);
    for (DType t : {DType::kBF16, DType::kQ8, DType::kQ4T}) {
      const int64_t N = 301, K = 320;
      const Tensor W = matrix(N, K, 9).to(t);
      auto x = randn(size_t(gemv_max_rows(t) * K), 10);
      std::vector<float> one(static_cast<size_t>(N));
      for (int64_t M = 2; M <= gemv_max_rows(t); ++M) {
        std::vector<float> all(size_t(M * N));
        gemv(x.data(), K, M, W, all.data(), N, false);
        for (int64_t m = 0; m < M; m += M - 1) {  // the first and the last row
          gemv(x.data() + m * K, K, 1, W, one.data(), N, false);
          expect_same_row(p, t, M, m, x.data() + m * K, W, one.data(), all.data() + m * N);
        }
      }
    }
  }
}

// The same on a whole multiple of the tile groups with the rows split over the threads.
TEST(Gemv, RowsAreIndependentOfTheBatchOnAllThreads) {
  for (const Path& p : paths()) {
    UsePath use(p);
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
}

#if defined(__aarch64__)
// The NEON and dot-product Q8 and Q4T kernels give the portable kernels' bits (exact block
// sums added in the same order): Q8 with K's tail of less than a block, Q4T with a tail group
// of 5 rows.
TEST(Gemv, ArmIntegerKernelsAreBitIdenticalToThePortableOnes) {
  for (DType t : {DType::kQ8, DType::kQ4T})
    for (int64_t K : {32, 96, 1000, 2080}) {
      if (t == DType::kQ4T && K % 32 != 0) continue;
      const int64_t N = 37;
      const Tensor W = matrix(N, K, uint32_t(30 + K)).to(t);
      auto x = randn(size_t(4 * K), uint32_t(31 + K));
      for (int64_t M : {1, 3, 4}) {
        std::vector<float> want(size_t(M * N)), got(want.size());
        {
          cpu::ScopedCap cap(cpu::Tier::kGeneric);
          gemv(x.data(), K, M, W, want.data(), N, false);
        }
        for (cpu::Tier tier : {cpu::Tier::kNeon, cpu::Tier::kDotprod}) {
          if (int(tier) > int(cpu::startup_cap())) continue;
          cpu::ScopedCap cap(tier);
          gemv(x.data(), K, M, W, got.data(), N, false);
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_EQ(got[i], want[i]) << dtype_name(t) << " " << gemv_impl(t, M) << " K=" << K
                                       << " M=" << M << " at " << i;
        }
      }
    }
}
#endif

// The prefill paths: oneDNN's bf16 GEMM where this CPU has one, and the fp32 panels (of every
// CPU below AVX512-BF16, and of Intel's without AMX).
std::vector<PrefillGemm> prefill_paths() {
  std::vector<PrefillGemm> p{PrefillGemm::kF32, PrefillGemm::kInt8};
#if defined(__x86_64__)
  if (cpu::has(cpu::kAvx512F | cpu::kAvx512Bw | cpu::kAvx512Bf16)) p.push_back(PrefillGemm::kBf16);
#endif
  return p;
}
const char* prefill_name(PrefillGemm p) {
  return p == PrefillGemm::kBf16 ? "bf16 GEMM" : p == PrefillGemm::kInt8 ? "int8" : "fp32 panels";
}

// Puts a prefill path in force for a scope.
class UsePrefill {
 public:
  explicit UsePrefill(PrefillGemm p) { prefill_gemm_force(p); }
  ~UsePrefill() { prefill_gemm_force(PrefillGemm::kAuto); }
};

// Many rows of a BF16 or packed W (kernels::linear), against x' · W_deq in double: on the bf16
// GEMM x' = bf16(x) and W_deq rounded to bf16; on the fp32 panels x itself; on the integer path
// (packed W; bf16 W stays on fp32 panels) x quantized per block as the GEMVs do it.
TEST(Gemv, PanelPrefillPathMatchesDequantizedReference) {
  for (PrefillGemm path : prefill_paths())
    for (DType t : {DType::kBF16, DType::kQ8, DType::kQ4T}) {
      UsePrefill use(path);
      // The method that runs (a forced one this CPU or its cap lacks falls back).
      const std::string impl = prefill_impl(t);
      const bool bf = impl == "onednn_bf16" || impl == "bf16_panels", quant = impl.rfind("int8", 0) == 0;
      const int64_t M = 40, N = 200, K = 256;
      const Tensor W = matrix(N, K, 12).to(t);
      const Tensor Wf = W.to(DType::kF32);
      auto x = randn(size_t(M * K), 13);
      std::vector<float> y(size_t(M * N), 2.0f);
      linear(x.data(), M, W, y.data(), true);
      std::vector<double> xq;
      for (int64_t m = 0; m < M; ++m) {
        if (quant) quantize_x(x.data() + m * K, K, &xq);
        for (int64_t n = 0; n < N; ++n) {
          double s = 0, mag = 0;
          for (int64_t k = 0; k < K; ++k) {
            const float xk = x[size_t(m * K + k)], wk = Wf.f32()[n * K + k];
            const double a = bf ? bf16_to_f32(f32_to_bf16(xk)) : quant ? xq[size_t(k)] : xk;
            const double b = bf ? bf16_to_f32(f32_to_bf16(wk)) : wk;
            s += a * b;
            mag += std::fabs(a * b);
          }
          ASSERT_NEAR(y[size_t(m * N + n)], 2.0 + s, 1e-5 + K * 1.2e-7 * mag)
              << dtype_name(t) << " " << prefill_name(path) << " " << prefill_impl(t);
        }
      }
    }
}

#if defined(__x86_64__)
// On the integer prefill path every row is computed as its decode GEMV computes it, bit for
// bit (gemm_avx2.h): Q4T as the lanes kernels, Q8 with the AVX2 GEMV's per-block arithmetic
// (those tiers only). A row's logits do not depend on whether it was prefilled or decoded.
// With and without AVX-VNNI, and on AVX512-VNNI (Q4T's 512-bit kernel, gemm_avx512.h), on a
// tail group of 5 rows and x row counts that take each of its tiles (8, 4, 2, 1).
TEST(Gemv, IntegerPrefillRowsEqualTheirDecodeRows) {
  UsePrefill use(PrefillGemm::kInt8);
  std::vector<cpu::Tier> tiers{cpu::Tier::kAvx2};
  if (cpu::detected() & cpu::kAvxVnni) tiers.push_back(cpu::Tier::kAvxVnni);
  if ((cpu::detected() & (cpu::kAvx512F | cpu::kAvx512Bw | cpu::kAvx512Vnni)) ==
      (cpu::kAvx512F | cpu::kAvx512Bw | cpu::kAvx512Vnni))
    tiers.push_back(cpu::Tier::kAvx512Vnni);
  for (cpu::Tier tier : tiers)
    for (DType t : {DType::kQ8, DType::kQ4T}) {
      if (tier == cpu::Tier::kAvx512Vnni && t == DType::kQ8) continue;  // decodes on the lanes kernels
      cpu::ScopedCap cap(tier);
      const int64_t M = 47, N = 69, K = 320;  // 47 = 5 · 8 + 4 + 2 + 1
      const Tensor W = matrix(N, K, 17).to(t);
      auto x = randn(size_t(M * K), 18);
      std::vector<float> all(size_t(M * N)), one(static_cast<size_t>(N));
      linear(x.data(), M, W, all.data());
      for (int64_t m = 0; m < M; ++m) {
        gemv(x.data() + m * K, K, 1, W, one.data(), N, false);
        for (int64_t n = 0; n < N; ++n)
          ASSERT_EQ(all[size_t(m * N + n)], one[size_t(n)])
              << dtype_name(t) << " " << prefill_impl(t) << " row " << m << " col " << n;
      }
    }
}
#endif

// The prefill panels' converters: the vector paths (where this CPU has them) are
// bit-identical to the portable one, which is dequantize_row / to_f32 (rounded to bf16 for
// the bf16 panels; checked here too).
TEST(Gemv, DequantizedRowsAreBitIdenticalOnEveryPath) {
  for (const auto& [t, K] : {std::pair{DType::kQ8, int64_t(2050)}, std::pair{DType::kQ8, int64_t(31)},
                             std::pair{DType::kQ4T, int64_t(2080)}, std::pair{DType::kQ4T, int64_t(32)},
                             std::pair{DType::kBF16, int64_t(1037)}}) {
    // Q4T: from a whole group on (its rows 16 .. 36: a group of 16 and a short one).
    const int64_t N = 37, n0 = t == DType::kQ4T ? 16 : 2;
    const Tensor W = matrix(N, K, uint32_t(16 + K), 0.3f).to(t);
    const Tensor rows = t == DType::kQ4T ? W.to(DType::kQ4) : W;  // one row per row
    std::vector<float> f32(size_t((N - n0) * K)), f32_slow(f32.size());
    std::vector<uint16_t> fast(f32.size()), slow(f32.size());
    if (t != DType::kBF16) dequantize_rows_bf16(W, n0, N, fast.data());
    rows_f32(W, n0, N, f32.data());
    {
      cpu::ScopedCap cap(cpu::Tier::kGeneric);
      if (t != DType::kBF16) dequantize_rows_bf16(W, n0, N, slow.data());
      rows_f32(W, n0, N, f32_slow.data());
    }
    std::vector<float> row(static_cast<size_t>(K));
    for (int64_t n = n0; n < N; ++n) {
      const Tensor one = rows.rows(n, n + 1);
      if (t == DType::kBF16) to_f32(t, one.raw(), row.data(), size_t(K));
      else dequantize_row(rows.dtype(), one.raw(), K, row.data());
      for (int64_t k = 0; k < K; ++k) {
        const size_t i = size_t((n - n0) * K + k);
        ASSERT_EQ(f32[i], f32_slow[i]) << dtype_name(t) << " K=" << K << " row " << n << " col " << k;
        ASSERT_EQ(f32_slow[i], row[size_t(k)]) << dtype_name(t) << " row " << n;
        if (t == DType::kBF16) continue;
        ASSERT_EQ(fast[i], slow[i]) << dtype_name(t) << " K=" << K << " row " << n << " col " << k;
        ASSERT_EQ(slow[i], f32_to_bf16(row[size_t(k)])) << dtype_name(t) << " row " << n;
      }
    }
  }
}

// The bf16 GEMV and the GEMM path (17 rows and more: oneDNN's bf16 GEMM, or fp32 panels)
// agree to fp32 summation order (and, on the fp32 panels, x's bf16 rounding in the GEMV).
TEST(Gemv, Bf16AgreesWithTheGemmPath) {
  for (PrefillGemm path : prefill_paths()) {
    UsePrefill use(path);
    const int64_t N = 96, K = 1024;
    const Tensor W = matrix(N, K, 14).to(DType::kBF16);
    auto x = randn(size_t(17 * K), 15);
    std::vector<float> big(size_t(17 * N)), small(static_cast<size_t>(N));
    linear(x.data(), 17, W, big.data());
    const double tol = path == PrefillGemm::kBf16 ? 1e-4 : 1e-2;  // fp32 panels: x not rounded
    for (int64_t m = 0; m < 17; ++m) {
      linear(x.data() + m * K, 1, W, small.data());
      for (int64_t n = 0; n < N; ++n)
        ASSERT_NEAR(small[size_t(n)], big[size_t(m * N + n)], tol * (1 + std::fabs(big[size_t(m * N + n)])))
            << prefill_name(path);
    }
  }
}

TEST(Gemv, ReportsItsKernels) {
  const std::set<std::string> names{"amx_bf16", "amx_int8", "avx512f", "avx512_bf16", "avx512_vnni",
                                    "avx_vnni", "avx2", "neon", "dotprod", "generic"};
  for (DType t : {DType::kF32, DType::kBF16, DType::kQ8, DType::kQ4T})
    EXPECT_EQ(names.count(gemv_impl(t, 1)), 1u) << gemv_impl(t, 1);
  if (amx_cpu()) {  // bf16 of 1–2 rows on AVX512-BF16 unless batch-invariant
    EXPECT_EQ(std::string(gemv_impl(DType::kBF16, 2)), "avx512_bf16");
    EXPECT_EQ(std::string(gemv_impl(DType::kBF16, 3)), "amx_bf16");
    gemv_force_path(GemvPath::kBatchInvariant);
    EXPECT_EQ(std::string(gemv_impl(DType::kBF16, 1)), "amx_bf16");
    gemv_force_path(GemvPath::kBest);
  }
#if defined(__x86_64__)
  {
    cpu::ScopedCap cap(cpu::Tier::kAvx2);
    for (DType t : {DType::kF32, DType::kBF16, DType::kQ8, DType::kQ4T})
      EXPECT_EQ(std::string(gemv_impl(t, 16)), "avx2") << dtype_name(t);
  }
#elif defined(__aarch64__)
  {
    cpu::ScopedCap cap(cpu::Tier::kNeon);
    EXPECT_EQ(std::string(gemv_impl(DType::kQ8, 1)), "neon");
  }
  if (cpu::detected() & cpu::kDotprod) {
    EXPECT_EQ(std::string(gemv_impl(DType::kQ8, 1)), "dotprod");
  }
#endif
  {
    cpu::ScopedCap cap(cpu::Tier::kGeneric);
    EXPECT_EQ(std::string(gemv_impl(DType::kQ8, 1)), "generic");
  }
  EXPECT_EQ(std::string(gemv_impl(DType::kF16, 1)), "none");
  EXPECT_EQ(std::string(gemv_impl(DType::kQ4, 1)), "none");  // stored rows: regroup first
}

}  // namespace hypic::kernels
