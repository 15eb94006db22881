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

struct DecoderLayer {
  Tensor input_norm;  // [H] F32, zero-centred
  Tensor post_norm;   // [H] F32, zero-centred
  std::shared_ptr<const TokenMixer> token;
  std::shared_ptr<const ChannelMixer> channel;
};

struct ModelWeights {
  Tensor embed;       // [V, H] (checkpoint dtype; rows converted on lookup)
  Tensor final_norm;  // [H] F32, zero-centred
  Tensor lm_head;     // [V, H] compute type (the embedding when tied)
  std::vector<DecoderLayer> layers;
};

}  // namespace hypic
