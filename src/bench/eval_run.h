// What `hypic eval` runs per prompt (bench/eval.cpp's reading tasks, bench/eval_tools.cpp's
// tool tasks): a scored cold run and a timed warm one through the engine's request runner.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/prompt.h"
#include "engine/runner.h"

namespace hypic {
class Tokenizer;
}

namespace hypic::bench {

struct EvalRun {
  std::string text;
  double ttft_ms = 0;
  double reused_fraction = 0;
  double reply_nll = 0;  // mean NLL per token of `reply` (when given)
};

// The prompt prefilled through the runner, the reference reply (when not empty) scored
// teacher-forced from a copy of the prefilled state, then the greedy answer of at most
// max_tokens. TTFT = keying, the prefill and the first decode step; the scoring pass is not
// part of it.
Result<EvalRun> eval_run_cold(const Runner& runner, const Tokenizer& tok, const PromptParts& parts,
                              const RunOptions& ro, int max_tokens, const std::vector<int32_t>& reply);

// Timed only: the runner's generate() of one token. TTFT = keying + the runner's TTFT.
Result<EvalRun> eval_run_warm(const Runner& runner, const Tokenizer& tok, const PromptParts& parts,
                              const RunOptions& ro);

}  // namespace hypic::bench
