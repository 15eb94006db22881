// hypic bench ttft: a synthetic RAG trace through every mode in one process.
// A pool of documents (random token ids) with Zipf popularity; each request draws
// per_request distinct documents in random order, after a shared 32-token system prefix and
// before a 16-token query. Per mode: fresh caches, `warmup` requests, then `requests`
// measured ones. A request's TTFT: its keys (make_request), Runner::prefill, the first token.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/status.h"
#include "engine/compose.h"

namespace hypic::bench {

struct TtftBenchOptions {
  std::string model;                 // model directory
  int docs = 20;                     // documents in the pool, >= 1
  int doc_tokens = 1000;             // tokens per document, >= 1
  int per_request = 10;              // documents per request, in [1, docs]
  int requests = 8;                  // measured requests per mode, >= 1
  int warmup = 4;                    // warm-up requests per mode, >= 0
  double zipf = 1.0;                 // Zipf exponent of document popularity
  int seam = 8;                      // hypic / naive seam width, >= 0
  std::vector<PicMode> modes;        // in order
  int64_t cache_mem_mib = 8192;      // segment store and prefix cache budget per mode
  DType dtype = DType::kBF16;        // matrix weight type
  std::string dtype_label = "bf16";  // reported as "dtype"
  uint32_t seed = 1;                 // the trace
};

// The parameters, and per mode p50_ttft_ms, p99_ttft_ms (measured requests), cold_ttft_ms
// (the first request, warm-up or not: empty caches), segment_hit_rate,
// mean_recomputed_tokens, mean_prompt_tokens (and what the caches hold); with prefix / full
// and hypic both run, ratio_p50_prefix_over_hypic / ratio_p50_full_over_hypic. Progress goes to the log.
Result<nlohmann::json> bench_ttft(const TtftBenchOptions& o);

}  // namespace hypic::bench
