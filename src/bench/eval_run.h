// What `hypic eval` runs per prompt (bench/eval.cpp's reading tasks, bench/eval_tools.cpp's
// tool tasks): a scored cold run and a timed warm one through the engine's request runner.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/eval.h"
#include "core/status.h"
#include "engine/prompt.h"
#include "engine/runner.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace hypic::bench {

// The first o.n records of each task named in `tasks`, in file order (a record's `task`
// field); *per_task counts them. An error when none is left.
template <class Record>
Result<std::vector<Record>> first_per_task(std::vector<Record> all, const std::vector<std::string>& tasks,
                                           const EvalOptions& o, std::map<std::string, int>* per_task) {
  std::vector<Record> out;
  for (auto& r : all)
    if (std::find(tasks.begin(), tasks.end(), r.task) != tasks.end() && (*per_task)[r.task] < o.n) {
      ++(*per_task)[r.task];
      out.push_back(std::move(r));
    }
  if (out.empty()) return invalid_argument("no records of the chosen tasks in " + o.data);
  return out;
}

// The model of o.model in o.dtype and its tokenizer (tokenizer.json, or tiktoken.model +
// config), loaded quietly.
struct EvalModel {
  std::unique_ptr<Model> model;
  Tokenizer tok;
};
Result<EvalModel> load_eval_model(const EvalOptions& o);

// A runner on `m` with its own empty segment store and prefix cache (o.cache_mem_mib each).
Result<std::unique_ptr<Runner>> fresh_runner(const Model& m, const EvalOptions& o);

// The JSON document `hypic eval` prints: {model, data, dtype, records_per_task, max_tokens, results}.
nlohmann::json eval_document(const EvalOptions& o, const std::map<std::string, int>& per_task, nlohmann::json results);

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
