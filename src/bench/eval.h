// hypic eval: accuracy and TTFT of every PIC mode on multi-document reading tasks (the
// held-out set of tools/tiny/gen_data.py, engine/eval_task.h), through the engine's request
// runner (engine/runner.h).
//
// Per (mode, seam) a fresh segment store and prefix cache; per record two runs:
//   cold   the record as generated: scored (greedy answer vs gold), TTFT with empty caches
//          for its documents (hypic / naive build the entries, prefix misses)
//   warm   the same documents rotated by one place (the PIC situation: known documents in
//          a new order), timed only: prefix mode can reuse just the system prefix, hypic
//          every document.
// Besides accuracy, two measures that do not need a capable model: the reference reply's
// negative log-likelihood under each mode (teacher-forced "Answer: {reply}<|im_end|>" from the
// composed state, nats per token), and the share of records whose answer equals full's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/status.h"
#include "engine/compose.h"

namespace hypic::bench {

struct EvalConfig {
  PicMode mode;
  int seam;  // -1: not applicable (full, prefix)
};

// In the order of `modes`: full and prefix once (they do not depend on the seam width),
// hypic and naive once per seam.
std::vector<EvalConfig> eval_configs(const std::vector<PicMode>& modes, const std::vector<int>& seams);
// "hypic seam 8", "full": for progress lines.
std::string eval_config_name(const EvalConfig& c);

struct EvalOptions {
  std::string model;                 // model directory
  std::string data;                  // JSONL task records
  std::vector<std::string> tasks;    // of single, two_hop, aggregate
  int64_t n = 100;                   // records per task (the first n of each), >= 1
  std::vector<EvalConfig> configs;
  int max_tokens = 48;               // answer length limit, >= 1
  int64_t cache_mem_mib = 2048;      // segment store / prefix cache budget per configuration
  DType dtype = DType::kBF16;        // compute type
  std::string dtype_label = "bf16";  // reported as "dtype"
};

// {model, data, dtype, records_per_task, max_tokens, results}: per configuration, per task
// n, exact_match, f1, reply_nll, agreement_with_full, ttft_cold_ms, ttft_warm_ms,
// warm_reused_fraction, and the means over tasks (with full among the configurations also
// points_vs_full and relative_loss_vs_full). Progress lines on stderr.
Result<nlohmann::json> run_eval(const EvalOptions& o);

}  // namespace hypic::bench
