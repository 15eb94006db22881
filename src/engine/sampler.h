// Next-token sampling: greedy, temperature, top-k, top-p, seeded. Linear in the vocabulary:
// nothing but the head of the candidate order (top-k, or as much as top-p needs) is sorted.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace hypic {

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy (argmax)
  int top_k = 0;             // 0: off
  float top_p = 1.0f;        // 1: off
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p) : p_(p), rng_(p.seed) {}
  // logits: [V]. Deterministic for a given seed and sequence of calls.
  int32_t sample(const float* logits, int64_t V);
  // A uniform draw in [0, 1) from the same seeded stream (for samplers built on this one).
  double uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }
  const SamplingParams& params() const { return p_; }

 private:
  SamplingParams p_;
  std::mt19937_64 rng_;
  std::vector<int32_t> idx_;  // scratch, reused across calls: no allocation per token
  std::vector<double> pr_;
};

int32_t argmax(const float* x, int64_t n);

}  // namespace hypic
