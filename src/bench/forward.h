// What the benchmarks share: random prompts and the best-of-R time of a prefill.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "core/status.h"
#include "model/model.h"

namespace hypic::bench {

// n token ids drawn from g, uniform over the first min(vocab, 2^30) ids.
std::vector<int32_t> random_tokens(std::mt19937& g, int64_t n, int64_t vocab);

// The best time in seconds of `reps` (>= 1) prefills of `tokens` from a fresh state, after
// one untimed warm-up.
Result<double> best_forward_seconds(const Model& m, const std::vector<int32_t>& tokens, int reps);

}  // namespace hypic::bench
