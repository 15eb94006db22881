// hypic bench prefill: prefill throughput of random tokens against the oneDNN GEMM peak of
// the model's dominant GEMM shape, measured in the same run.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/status.h"

namespace hypic::bench {

struct PrefillBenchOptions {
  std::string model;                 // model directory
  int64_t tokens = 4096;             // prompt length, >= 1
  DType dtype = DType::kBF16;        // matrix weight type
  std::string dtype_label = "bf16";  // reported as "dtype"
  int reps = 1;                      // timed repetitions after one warm-up, >= 1 (best kept)
};

// Keys: tokens, dtype, threads, seconds, tokens_per_s, gflop, achieved_gflops,
// gemm_peak_gflops, gemm_peak_shape [M, K, N], ratio (= achieved / peak).
Result<nlohmann::json> bench_prefill(const PrefillBenchOptions& o);

}  // namespace hypic::bench
