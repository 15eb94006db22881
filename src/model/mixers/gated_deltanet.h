// Gated DeltaNet token mixer (Qwen3-Next, Qwen3.5): h += out_proj(gated_norm(rule(conv(qkv)), z)).
#pragma once

#include <memory>

#include "core/tensor.h"
#include "model/config.h"
#include "model/mixer.h"

namespace hypic {

// In the engine's one layout (matrices [out, in] in the compute type, vectors F32).
struct GdnWeights {
  Tensor in_qkv;   // [2·nk·dk + nv·dv, H]: rows [q heads | k heads | v heads]
  Tensor in_z;     // [nv·dv, H]
  Tensor in_ba;    // [2·nv, H]: rows [b heads | a heads]
  Tensor conv_w;   // [K, conv_dim] F32 (transposed torch weight), conv_dim = 2·nk·dk + nv·dv
  Tensor neg_A;    // [nv] F32: −exp(A_log)
  Tensor dt_bias;  // [nv] F32
  Tensor norm_w;   // [dv] F32, used as is (not 1 + w)
  Tensor out_proj; // [H, nv·dv]
  // > 0: in_qkv's v rows, in_z, in_ba's b and a rows and out_proj's columns hold the value
  // heads in llama.cpp's tiled order for this many key heads (head t = j·nk + g against the
  // grouped h = g·r + j; a Qwen3.5 GGUF file): the forward reorders its activations, so the
  // matrices are used as the file stores them. conv_w, neg_A and dt_bias are grouped.
  int64_t tiled_key_heads = 0;
};

std::unique_ptr<TokenMixer> make_gated_deltanet(const ModelConfig& c, GdnWeights w);
// Its type: state kLinear; reads linear_num_key_heads / linear_num_value_heads /
// linear_key_head_dim / linear_value_head_dim / linear_conv_kernel_dim.
const TokenMixerType& gated_deltanet_type();

}  // namespace hypic
