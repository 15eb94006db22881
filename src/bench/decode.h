// hypic bench decode: decode throughput of Model::decode_batch at batch sizes B against B
// separate single-sequence forward() calls per step, from random prompts.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/status.h"

namespace hypic::bench {

struct DecodeBenchOptions {
  std::string model;                 // model directory
  DType dtype = DType::kBF16;        // matrix weight type
  std::string dtype_label = "bf16";  // reported as "dtype"
  std::vector<int> batches = {1, 8, 16};  // sequences decoded together, each ≥ 1
  int prompt = 32;                   // random prompt tokens per sequence before the timed steps
  int steps = 8;                     // timed decode steps per batch size (after 2 warm-up steps)
  // Called after each batch size with its row (progress on long runs); may be empty.
  std::function<void(const nlohmann::json&)> on_row;
};

// Keys: model, dtype, prompt, steps, threads, rows [{B, batched_tps, separate_tps} (tokens
// per second over all B sequences), weight_bytes_per_step (what the batched step's decode
// products read: kernels::gemv_weight_bytes), batched_weight_GBps, separate_weight_GBps (those
// bytes over time), gemv_kernel, separate_gemv_kernel (the decode products' kernels at B rows
// and at 1)], read_GBps, copy_GBps [the machine's read and copy (read + write) bandwidth on
// huge pages, before and after the rows].
Result<nlohmann::json> bench_decode(const DecodeBenchOptions& o);

}  // namespace hypic::bench
