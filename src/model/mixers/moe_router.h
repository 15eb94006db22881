// The router of a sparse MoE layer as data: how one token's router logits [E] choose k
// experts and their weights. Each architecture fills a MoeRouter; the Moe mixer only runs it.
//
//   scores  = softmax(logits) | sigmoid(logits)                           [E]
//   choice  = scores + bias (the bias, if any, steers the CHOICE only)    [E]
//   groups  : E experts in n_group contiguous groups; a group's score is the sum of its two
//             largest `choice` values; only the topk_group best groups' experts stay eligible
//   experts = top-k of `choice` over the eligible experts, highest first, ties to the lower
//             index (torch.topk's CPU order; groups likewise)
//   weights = scores at those experts (unbiased); with norm_topk_prob divided by their sum
//             (sigmoid: sum + 1e-20, as DeepSeek-V3); then × routed_scaling_factor
//
// Qwen3-Next / Qwen3.5-MoE: softmax, no groups, no bias, factor 1 (transformers'
// Qwen3NextSparseMoeBlock). DeepSeek-V3 / Bailing-V2 (Ring-linear, Ling): sigmoid, groups,
// e_score_correction_bias, routed_scaling_factor (transformers' DeepseekV3 MoEGate).
#pragma once

#include <cstdint>

#include "core/status.h"
#include "core/tensor.h"

namespace hypic {

enum class RouterScoring { kSoftmax, kSigmoid };

struct MoeRouter {
  RouterScoring scoring = RouterScoring::kSoftmax;
  int top_k = 1;
  bool norm_topk_prob = false;
  float routed_scaling_factor = 1.0f;  // exactly 1: the weights are not multiplied
  int n_group = 1;                     // 1 / 1: no group-limited selection
  int topk_group = 1;
  Tensor selection_bias;  // [E] F32 (e_score_correction_bias), or empty: none

  // k <= E, n_group divides E, topk_group <= n_group, enough eligible experts for k, a bias
  // of shape [E] F32. The message names the field at fault.
  Status validate(int64_t num_experts) const;
};

// Routes one token. scores: [E] router logits, overwritten with the scores; experts and
// weights: [top_k] each, highest choice first. `r` must have passed validate(E).
// Thread-safe (distinct buffers per call).
void route_token(const MoeRouter& r, float* scores, int64_t E, int* experts, float* weights);

}  // namespace hypic
