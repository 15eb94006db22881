// The GEMVs on ggml's blocks (kernels/gemv_ggml.h) and the prefill panels of them, on every
// tier this CPU reaches, against a plain reference: the blocks decoded by ggml's reference
// dequantization (core/ggml_quant.h) times x quantized as gemv_ggml.h documents, summed in
// double.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>

#include "common/ggml_blocks.h"
#include "common/testutil.h"
#include "core/cpu.h"
#include "core/ggml_quant.h"
#include "core/quant.h"
#include "kernels/gemm.h"
#include "kernels/gemv.h"
#include "kernels/gemv_ggml.h"

namespace hypic::kernels {
namespace {

// x as gemv_ggml.h documents it, written independently: per group (32 for Q8_0 / Q4_0, 256
// for the K-quants) d = max|x| / 127, code = round(x / d).
void quantize_x(const float* x, int64_t K, int64_t group, std::vector<double>* deq) {
  deq->assign(size_t(K), 0.0);
  for (int64_t b = 0; b < K; b += group) {
    float amax = 0;
    for (int64_t k = b; k < b + group; ++k) amax = std::max(amax, std::fabs(x[k]));
    const float d = amax / 127.0f;
    for (int64_t k = b; k < b + group; ++k)
      (*deq)[size_t(k)] = d > 0 ? double(d) * std::nearbyint(x[k] * (1.0f / d)) : 0.0;
  }
}

// y = x' · W_deqᵀ in double (x' quantized when `quantized`: per the GEMVs' group for W's type,
// or per `group` when given), and Σ|terms|.
void reference(const std::vector<float>& x, int64_t M, const Tensor& W, bool quantized,
               std::vector<double>* y, std::vector<double>* mag, int64_t group = 0) {
  const int64_t N = W.dim(0), K = W.dim(1);
  std::vector<float> w(static_cast<size_t>(N * K));
  const size_t ws = dtype_row_bytes(W.dtype(), K);
  for (int64_t n = 0; n < N; ++n)
    ggml_dequantize_blocks(W.dtype(), static_cast<const uint8_t*>(W.raw()) + n * ws, w.data() + n * K,
                           K / ggml_block_elems(W.dtype()));
  y->assign(size_t(M * N), 0.0);
  mag->assign(size_t(M * N), 0.0);
  std::vector<double> xd(static_cast<size_t>(K));
  for (int64_t m = 0; m < M; ++m) {
    if (group == 0) group = ggml_block_elems(W.dtype()) == 32 ? 32 : 256;
    if (quantized) quantize_x(x.data() + m * K, K, group, &xd);
    else for (int64_t k = 0; k < K; ++k) xd[size_t(k)] = x[size_t(m * K + k)];
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) {
        const double t = xd[size_t(k)] * w[size_t(n * K + k)];
        (*y)[size_t(m * N + n)] += t;
        (*mag)[size_t(m * N + n)] += std::fabs(t);
      }
  }
}

constexpr DType kTypes[] = {DType::kGQ8_0, DType::kGQ4_0, DType::kGQ5_0, DType::kGQ5_1,
                            DType::kGQ4K,  DType::kGQ5K,  DType::kGQ6K};

// Every tier this CPU reaches, once each.
std::vector<cpu::Tier> tiers() {
  std::vector<cpu::Tier> out;
  std::set<int> seen;
  for (int i = int(cpu::startup_cap()); i >= 0; --i) {
    cpu::ScopedCap cap{cpu::Tier(i)};
    if (seen.insert(int(cpu::tier())).second) out.push_back(cpu::Tier(i));
  }
  return out;
}

TEST(GemvGgml, MatchesTheDequantizedReferenceOnEveryTier) {
  for (cpu::Tier tier : tiers()) {
    cpu::ScopedCap cap{tier};
    for (DType t : kTypes)
      for (int64_t M : {1, 4, 16})
        for (int64_t K : ggml_block_elems(t) == 32 ? std::vector<int64_t>{96, 288, 768} : std::vector<int64_t>{256, 768}) {
          // (32-blocks: eight at a time and the rest one by one)
          const int64_t N = 37;
          const Tensor W = test::random_ggml_blocks(t, N, K, uint32_t(K + int64_t(t)));
          const auto x = test::randn(size_t(M * K), uint32_t(3 + M));
          std::vector<double> ref, mag;
          reference(x, M, W, true, &ref, &mag);
          std::vector<float> y(size_t(M * N), 0.5f);
          gemv(x.data(), K, M, W, y.data(), N, false);
          const std::string what = std::string(dtype_name(t)) + " " + cpu::tier_name(tier) + " " +
                                   gemv_impl(t, M) + " M=" + std::to_string(M) + " K=" + std::to_string(K);
          // Integer block sums are exact; each block adds a few fp32 roundings of its scale
          // products (K-quants: the scale and the min term apart, which may nearly cancel).
          for (size_t i = 0; i < ref.size(); ++i)
            ASSERT_NEAR(y[i], ref[i], 1e-6 + 4e-6 * mag[i]) << what << " at " << i;
          std::vector<float> y2(y.size(), 1.0f);
          gemv(x.data(), K, M, W, y2.data(), N, true);
          for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y2[i], y[i] + 1.0f, 1e-5) << what;
        }
  }
}

// Many rows go through dequantized panels (gemm.h: fp32, or bf16 where the CPU has a bf16
// matmul) — the reference with x as it is — or, Q4_0 / Q4_K where there is an integer GEMM,
// through Q4T's kernel on the re-laid blocks: the reference with x quantized per 32 (one code
// off at a rounding tie moves a sum by ~1e-5 of its magnitude). Q4_K's scales d·sc become f16
// there (≤ 2⁻¹¹ relative): up to 2⁻¹¹ of Σ|x·d·sc·q| more, which random blocks make large
// against the result (their mins nearly cancel it) — measured with the mins zeroed. 70 rows: a
// chunk of 64 and a tail of 6.
TEST(GemvGgml, PrefillMatchesTheReferenceOnEveryTier) {
  for (cpu::Tier tier : tiers()) {
    cpu::ScopedCap cap{tier};
    for (DType t : kTypes) {
      const int64_t M = 40, N = 70, K = 512;
      const Tensor W = test::random_ggml_blocks(t, N, K, uint32_t(91 + int64_t(t)));
      const auto x = test::randn(size_t(M * K), 5);
      const std::string impl = prefill_impl(t);
      const bool int8 = impl.rfind("int8", 0) == 0, bf16 = impl == "bf16_panels";
      std::vector<double> ref, mag, scaled(size_t(M * N), 0.0);
      reference(x, M, W, int8, &ref, &mag, 32);  // the integer GEMM's x: per 32
      if (int8 && t == DType::kGQ4K) {
        Tensor no_mins = W.clone();
        auto* b = static_cast<uint8_t*>(no_mins.raw());
        for (int64_t i = 0; i < N * K / 256; ++i) b[144 * i + 2] = b[144 * i + 3] = 0;  // dmin = 0
        std::vector<double> unused;
        reference(x, M, no_mins, true, &unused, &scaled, 32);
      }
      std::vector<float> y(size_t(M * N));
      linear(x.data(), M, W, y.data());
      // fp32 panels: a few roundings per product; bf16 panels: x and W each rounded to bf16
      // first (≤ 2⁻⁹ relative each).
      const double rel = int8 ? 1e-4 : bf16 ? 8e-3 : 1e-5;
      for (size_t i = 0; i < ref.size(); ++i)
        ASSERT_NEAR(y[i], ref[i], 1e-5 + rel * mag[i] + 0x1p-11 * scaled[i])
            << dtype_name(t) << " " << cpu::tier_name(tier) << " " << impl << " at " << i;
    }
  }
}

// The prefill panels' decode (gemv_ggml.h dequantize_row) gives the reference decode's values
// bit for bit on every tier.
TEST(GemvGgml, PanelDecodeIsTheReferenceDecode) {
  for (cpu::Tier tier : tiers()) {
    cpu::ScopedCap cap{tier};
#if defined(__x86_64__)
    const bool avx2 = cpu::has(cpu::kAvx2 | cpu::kFma | cpu::kF16c);
#else
    const bool avx2 = false;
#endif
    for (DType t : kTypes) {
      const int64_t K = 768;
      const Tensor W = test::random_ggml_blocks(t, 5, K, 23);
      std::vector<float> want(static_cast<size_t>(K)), got(static_cast<size_t>(K));
      for (int64_t r = 0; r < 5; ++r) {
        const auto* row = static_cast<const uint8_t*>(W.raw()) + r * dtype_row_bytes(t, K);
        ggml_dequantize_blocks(t, row, want.data(), K / ggml_block_elems(t));
        ggml::dequantize_row(t, row, K, got.data(), avx2);
        for (int64_t k = 0; k < K; ++k)
          ASSERT_EQ(got[size_t(k)], want[size_t(k)]) << dtype_name(t) << " " << cpu::tier_name(tier) << " row " << r << " at " << k;
      }
    }
  }
}

// A row slice and the dequantization the engine uses elsewhere (Tensor::to) agree with the
// reference decode.
TEST(GemvGgml, RowsAndConversion) {
  for (DType t : kTypes) {
    const Tensor W = test::random_ggml_blocks(t, 6, 512, 17);
    const Tensor f = W.to(DType::kF32), part = W.rows(2, 5).to(DType::kF32);
    std::vector<float> want(512);
    for (int64_t r = 0; r < 6; ++r) {
      dequantize_row(t, static_cast<const uint8_t*>(W.raw()) + r * dtype_row_bytes(t, 512), 512, want.data());
      for (int64_t k = 0; k < 512; ++k) ASSERT_EQ(f.f32()[r * 512 + k], want[size_t(k)]) << dtype_name(t);
      if (r >= 2 && r < 5) {
        for (int64_t k = 0; k < 512; ++k) ASSERT_EQ(part.f32()[(r - 2) * 512 + k], want[size_t(k)]) << dtype_name(t);
      }
    }
  }
}

}  // namespace
}  // namespace hypic::kernels
