#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>

namespace hypic {

PositionLogprobs logprobs_at(const float* logits, int64_t V, int32_t chosen, int top, const Tokenizer& tok) {
  // log-sum-exp in double, shifted by the maximum.
  float mx = -INFINITY;
  for (int64_t i = 0; i < V; ++i) mx = std::max(mx, logits[i]);
  double sum = 0;
  for (int64_t i = 0; i < V; ++i) sum += std::exp(double(logits[i]) - mx);
  const double lse = double(mx) + std::log(sum);
  auto entry = [&](int32_t id) {
    TokenLogprob t;
    t.id = id;
    t.bytes = std::string(tok.token_bytes(id));
    t.logprob = float(double(logits[id]) - lse);
    return t;
  };
  PositionLogprobs out;
  out.chosen = entry(chosen);
  // The `top` largest in one pass: a small sorted list (k <= 20), most cases rejected by one compare.
  const auto before = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::vector<int32_t> best;
  best.reserve(size_t(top) + 1);
  for (int64_t i = 0; i < V && top > 0; ++i) {
    const int32_t id = int32_t(i);
    if (int(best.size()) == top && !before(id, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), id, before), id);
    if (int(best.size()) > top) best.pop_back();
  }
  for (int32_t id : best) out.top.push_back(entry(id));
  return out;
}

}  // namespace hypic
