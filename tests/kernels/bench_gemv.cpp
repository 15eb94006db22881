// Bandwidth of the decode GEMV kernels (kernels/gemv.h) against the machine's own, measured
// in the same run. A measurement, not a test (no timing assertions); run it explicitly:
//   test_kernels --gtest_also_run_disabled_tests --gtest_filter='*GemvBench*'
// HYPIC_BENCH_N / HYPIC_BENCH_K: the matrix (default 248077 × 1024: Qwen3.5's lm_head at
// hidden 1024). Prints one JSON line: read and copy bandwidth of a 1 GiB buffer, then per
// type (hypic's, and ggml's blocks as a GGUF file stores them) and row count the best of 5 calls (ms, GB/s of weight bytes, the kernel). With
// HYPIC_GEMV=0 the bf16 rows go through oneDNN instead (kernels::linear), for comparison.
// HYPIC_BENCH_COPIES=C: a call runs the C copies of the matrix in turn, as decode runs a
// model's many small matrices one after another (a small matrix alone stays in cache).
// HYPIC_BENCH_ROWS: the largest row count (default 16). HYPIC_BENCH_DTYPES=Q4_0,Q6_K: only
// those types (dtype_name spellings).
#include <gtest/gtest.h>


#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/ggml_blocks.h"
#include "core/timer.h"
#include "kernels/gemm.h"
#include "kernels/gemv.h"

namespace hypic::kernels {
namespace {

template <typename F>
double best_of(int reps, F&& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    Timer t;
    f();
    best = std::min(best, t.seconds());
  }
  return best;
}

TEST(GemvBench, DISABLED_Bandwidth) {
  auto env = [](const char* n, int64_t d) {
    const char* v = std::getenv(n);
    return v ? std::atoll(v) : d;
  };
  const int64_t N = env("HYPIC_BENCH_N", 248077), K = env("HYPIC_BENCH_K", 1024);
  const int64_t copies = std::max<int64_t>(1, env("HYPIC_BENCH_COPIES", 1));
  const int64_t max_rows = env("HYPIC_BENCH_ROWS", kGemvMaxRows);
  nlohmann::json out;
  {
    const size_t bytes = size_t(1) << 30;
    std::vector<uint64_t> a(bytes / 8, 1), b(bytes / 8);  // 4 KiB pages (hypic bench decode: huge)
    volatile uint64_t sink = 0;
    const double rd = best_of(3, [&] {
      uint64_t s = 0;
#pragma omp parallel for reduction(+ : s)
      for (size_t i = 0; i < a.size(); ++i) s += a[i];
      sink = s;
    });
    const double cp = best_of(3, [&] { std::memcpy(b.data(), a.data(), bytes); });
    out["read_GBps"] = double(bytes) / rd * 1e-9;
    out["memcpy_GBps_read_plus_write"] = 2.0 * double(bytes) / cp * 1e-9;
    (void)sink;
  }
  out["N"] = N;
  out["K"] = K;
  out["copies"] = copies;
  out["gemv"] = std::getenv("HYPIC_GEMV") ? std::getenv("HYPIC_GEMV") : "1";
  Tensor Wf = Tensor::zeros_f32({N, K});
  for (int64_t i = 0; i < N * K; ++i) Wf.f32()[i] = float((i * 7919) % 1000) * 1e-3f - 0.5f;
  std::vector<float> x(size_t(K * kGemvMaxRows), 0.25f), y(size_t(N * kGemvMaxRows));
  // hypic's types, then a GGUF file's blocks as stored (random codes: the bytes read are what counts).
  for (DType t : {DType::kBF16, DType::kQ8, DType::kQ4T, DType::kGQ8_0, DType::kGQ4_0, DType::kGQ4K,
                  DType::kGQ5K, DType::kGQ6K}) {
    if (dtype_ggml(t) && K % ggml_block_elems(t) != 0) continue;
    if (const char* only = std::getenv("HYPIC_BENCH_DTYPES")) {
      std::string list = ",", name = ",";
      list.append(only).append(","), name.append(dtype_name(t)).append(",");
      if (list.find(name) == std::string::npos) continue;
    }
    std::vector<Tensor> W;
    {
      const HugePageScope huge;  // as a model's weights
      for (int64_t c = 0; c < copies; ++c)
        W.push_back(dtype_ggml(t) ? test::random_ggml_blocks(t, N, K, uint32_t(c)) : Wf.to(t));
    }
    const auto all = [&](int64_t M) {
      for (const Tensor& w : W) linear(x.data(), M, w, y.data());
    };
    for (int64_t M : {1, 2, 4, 8, 16}) {
      if (M > max_rows) break;
      all(M);  // warm-up
      const double s = best_of(5, [&] { all(M); });
      out["runs"].push_back({{"dtype", dtype_name(t)},
                             {"rows", M},
                             {"kernel", matmul_impl_name(M, K, N, t)},
                             {"ms", s * 1e3},
                             {"weight_GBps", double(W[0].nbytes() * copies) / s * 1e-9}});
    }
  }
  std::printf("%s\n", out.dump().c_str());
}

}  // namespace
}  // namespace hypic::kernels
