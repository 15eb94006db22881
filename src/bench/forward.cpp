#include "bench/forward.h"

#include <algorithm>

#include "core/timer.h"

namespace hypic::bench {

std::vector<int32_t> random_tokens(std::mt19937& g, int64_t n, int64_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = int32_t(g() % uint32_t(std::min<int64_t>(vocab, 1 << 30)));
  return t;
}

Result<double> best_forward_seconds(const Model& m, const std::vector<int32_t>& tokens, int reps) {
  std::vector<float> logits;
  double best = 1e30;
  for (int r = 0; r <= reps; ++r) {  // r == 0 is the warm-up
    SeqState st = m.new_state(int64_t(tokens.size()));
    Timer t;
    HYPIC_RETURN_IF_ERROR(m.forward(st, tokens, LogitsFor::kLast, &logits));
    if (r > 0) best = std::min(best, t.seconds());
  }
  return best;
}

}  // namespace hypic::bench
