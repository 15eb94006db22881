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
  // Candidates sorted by logit, cut by top-k, softmax at temperature, cut by top-p.
  std::vector<int32_t> idx(static_cast<size_t>(V));
  std::iota(idx.begin(), idx.end(), 0);
  const int64_t k = (p_.top_k > 0 && p_.top_k < V) ? p_.top_k : V;
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  idx.resize(size_t(k));
  std::vector<double> pr(idx.size());
  const double mx = logits[idx[0]];
  double sum = 0;
  for (size_t i = 0; i < idx.size(); ++i)
    sum += (pr[i] = std::exp((double(logits[idx[i]]) - mx) / p_.temperature));
  size_t keep = idx.size();
  if (p_.top_p < 1.0f) {
    double cum = 0;
    for (size_t i = 0; i < idx.size(); ++i) {
      cum += pr[i] / sum;
      if (cum >= p_.top_p) { keep = i + 1; break; }
    }
  }
  const double total = std::accumulate(pr.begin(), pr.begin() + long(keep), 0.0);
  std::uniform_real_distribution<double> u(0.0, total);
  double r = u(rng_);
  for (size_t i = 0; i < keep; ++i) {
    r -= pr[i];
    if (r <= 0) return idx[i];
  }
  return idx[keep - 1];
}

}  // namespace hypic
