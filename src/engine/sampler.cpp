#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace hypic {

int32_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return int32_t(best);
}

int32_t Sampler::sample(const float* logits, int64_t V) {
  if (p_.temperature <= 0.0f) return argmax(logits, V);
  const double T = p_.temperature;
  const float mx = logits[argmax(logits, V)];
  const int64_t k = (p_.top_k > 0 && p_.top_k < V) ? p_.top_k : V;
  std::uniform_real_distribution<double> u(0.0, 1.0);
  if (k == V && p_.top_p >= 1.0f) {
    // Plain temperature: the whole vocabulary in id order, one pass, nothing sorted.
    pr_.resize(size_t(V));
    double total = 0;
    for (int64_t i = 0; i < V; ++i) total += (pr_[size_t(i)] = std::exp((double(logits[i]) - mx) / T));
    double r = u(rng_) * total;
    int64_t last = 0;
    for (int64_t i = 0; i < V; ++i) {
      if (pr_[size_t(i)] <= 0) continue;
      last = i;
      if ((r -= pr_[size_t(i)]) <= 0) return int32_t(i);
    }
    return int32_t(last);
  }
  // Candidates by logit (ties: lower id first). Only the head of the order is ever sorted
  // (partial_sort: a heap of the head, one comparison for most of the vocabulary): the top k,
  // then for top-p a head of 64, 256, ... until its mass reaches p of the candidates' total.
  const auto better = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  idx_.resize(size_t(V));
  std::iota(idx_.begin(), idx_.end(), 0);
  if (k < V) std::partial_sort(idx_.begin(), idx_.begin() + k, idx_.end(), better);
  idx_.resize(size_t(k));
  pr_.resize(size_t(k));
  double total = 0;
  for (int64_t i = 0; i < k; ++i) total += (pr_[size_t(i)] = std::exp((double(logits[idx_[size_t(i)]]) - mx) / T));
  int64_t sorted = k < V ? k : 0, keep = k;
  for (int64_t m = std::min<int64_t>(k, 64);; m = std::min(k, 4 * m)) {
    if (m > sorted) {
      std::partial_sort(idx_.begin() + sorted, idx_.begin() + m, idx_.end(), better);
      sorted = m;
    }
    if (p_.top_p >= 1.0f) break;  // top-k alone: the k are sorted
    double cum = 0;
    keep = 0;
    for (int64_t i = 0; i < m; ++i) {
      cum += std::exp((double(logits[idx_[size_t(i)]]) - mx) / T) / total;
      if (cum >= p_.top_p) {
        keep = i + 1;
        break;
      }
    }
    if (keep > 0) break;
    if (m == k) {
      keep = k;
      break;
    }
  }
  double kept = 0;
  for (int64_t i = 0; i < keep; ++i)
    kept += (pr_[size_t(i)] = std::exp((double(logits[idx_[size_t(i)]]) - mx) / T));
  double r = u(rng_) * kept;
  for (int64_t i = 0; i < keep; ++i)
    if ((r -= pr_[size_t(i)]) <= 0) return idx_[size_t(i)];
  return idx_[size_t(keep - 1)];
}

}  // namespace hypic
