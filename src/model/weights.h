// The weights of a loaded model: embeddings, head, and per decoder layer its two norms and
// its mixers (model/mixer.h), each mixer holding its own tensors in the engine's layout
// (matrices [out, in] in the compute type; vectors F32).
#pragma once

#include <memory>
#include <vector>

#include "core/tensor.h"

namespace hypic {

class TokenMixer;
class ChannelMixer;

// How a mixer's output meets the residual stream h, with x = norm(h):
//   h ← α·(from_norm ? x : h) + β·mixer(x)
// Pre-norm models (Qwen, Ring): from_norm false, α = β = 1. MiniMax: from_norm (its
// "postnorm": the residual is the normed input) with per-kind α, β.
struct Residual {
  bool from_norm = false;
  float alpha = 1.0f, beta = 1.0f;
  bool plain() const { return !from_norm && alpha == 1.0f && beta == 1.0f; }
};

struct DecoderLayer {
  Tensor input_norm;  // [H] F32 (zero-centred or not: ModelConfig::zero_centred_norms)
  Tensor post_norm;   // [H] F32
  std::shared_ptr<const TokenMixer> token;
  std::shared_ptr<const ChannelMixer> channel;
  Residual token_residual, channel_residual;
};

struct ModelWeights {
  Tensor embed;       // [V, H] (checkpoint dtype; rows converted on lookup)
  Tensor final_norm;  // [H] F32
  Tensor lm_head;     // [V, H] compute type (the embedding when tied)
  std::vector<DecoderLayer> layers;
};

}  // namespace hypic
