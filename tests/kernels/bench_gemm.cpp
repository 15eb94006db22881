// Throughput of the prefill GEMMs (kernels::linear on many rows) per weight type, on a model's
// shapes. A measurement, not a test (no timing assertions); run it explicitly:
//   test_kernels --gtest_also_run_disabled_tests --gtest_filter='*GemmBench*'
// HYPIC_BENCH_M: the rows of x (default 512). Shapes K → N: 1024 → 6144 (gate and up of a
// hidden-1024 MLP), 3072 → 1024 (its down projection), 1024 → 8192 (in-projections), or
// HYPIC_BENCH_SHAPES="KxN,KxN" (hypic-tiny's MLP: "256x1536,768x256"). Prints one
// JSON line: per type and shape the best of HYPIC_BENCH_REPS (5) calls (ms, GFLOP/s, the
// prefill kernel).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/timer.h"
#include "kernels/gemm.h"

namespace hypic::kernels {
namespace {

TEST(GemmBench, DISABLED_Prefill) {
  const int64_t M = std::getenv("HYPIC_BENCH_M") ? std::atoll(std::getenv("HYPIC_BENCH_M")) : 512;
  const int reps = std::getenv("HYPIC_BENCH_REPS") ? std::atoi(std::getenv("HYPIC_BENCH_REPS")) : 5;
  nlohmann::json out{{"M", M}};
  std::vector<std::pair<int64_t, int64_t>> shapes{{1024, 6144}, {3072, 1024}, {1024, 8192}};
  if (const char* e = std::getenv("HYPIC_BENCH_SHAPES")) {
    shapes.clear();
    for (const char* p = e; *p;) {
      char* end = nullptr;
      const int64_t k = std::strtoll(p, &end, 10), n = std::strtoll(end + 1, &end, 10);
      shapes.push_back({k, n});
      p = *end ? end + 1 : end;
    }
  }
  for (const auto& [K, N] : shapes) {
    Tensor Wf = Tensor::zeros_f32({N, K});
    for (int64_t i = 0; i < N * K; ++i) Wf.f32()[i] = float((i * 7919) % 1000) * 1e-3f - 0.5f;
    std::vector<float> x(size_t(M * K)), y(size_t(M * N));
    for (size_t i = 0; i < x.size(); ++i) x[i] = float((i * 104729) % 2000) * 1e-3f - 1.0f;
    for (DType t : {DType::kBF16, DType::kQ8, DType::kQ4T}) {
      const Tensor W = Wf.to(t);
      double best = 1e30;
      for (int r = 0; r < reps; ++r) {
        Timer tm;
        linear(x.data(), M, W, y.data());
        best = std::min(best, tm.seconds());
      }
      out[std::to_string(K) + "x" + std::to_string(N)][dtype_name(t)] = {
          {"ms", best * 1e3}, {"gflops", 2.0 * double(M * K * N) / best * 1e-9}, {"kernel", prefill_impl(t)}};
    }
  }
  std::printf("%s\n", out.dump().c_str());
}

}  // namespace
}  // namespace hypic::kernels
