// Per-layer weights of a Qwen3-Next / Qwen3.5 hybrid model, rearranged at load time into
// one layout for both checkpoint flavours (Next's per-group interleaved in_proj_qkvz/ba and
// 3.5's contiguous in_proj_qkv/z/b/a). Matrices are in torch Linear layout [out, in] and in
// the compute type (F32 exact path, BF16 fast path); vectors are always F32.
#pragma once

#include <vector>

#include "core/tensor.h"
#include "model/config.h"

namespace hypic {

struct GdnWeights {
  Tensor in_qkv;   // [2·nk·dk + nv·dv, H]: rows [q heads | k heads | v heads]
  Tensor in_z;     // [nv·dv, H]
  Tensor in_ba;    // [2·nv, H]: rows [b heads | a heads]
  Tensor conv_w;   // [K, conv_dim] F32 (transposed torch weight), conv_dim = 2·nk·dk + nv·dv
  Tensor neg_A;    // [nv] F32: −exp(A_log)
  Tensor dt_bias;  // [nv] F32
  Tensor norm_w;   // [dv] F32, used as is (not 1 + w)
  Tensor out_proj; // [H, nv·dv]
};

struct AttnWeights {
  Tensor qkv;     // [nh·2·hd + 2·nkv·hd, H]: rows [per head (query hd | gate hd) | k | v]
  Tensor q_norm;  // [hd] F32, zero-centred
  Tensor k_norm;  // [hd] F32, zero-centred
  Tensor o_proj;  // [H, nh·hd]
};

struct MlpWeights {
  Tensor gate_up;  // [2·I, H]: rows [gate | up]
  Tensor down;     // [H, I]
};

struct MoeWeights {
  Tensor router;                    // [E, H] F32 (routing decisions stay exact)
  std::vector<MlpWeights> experts;  // E
  bool has_shared = false;
  MlpWeights shared;
  Tensor shared_gate;               // [1, H] F32
};

struct LayerWeights {
  LayerKind kind = LayerKind::kLinear;
  bool is_moe = false;
  Tensor input_norm;  // [H] F32, zero-centred
  Tensor post_norm;   // [H] F32, zero-centred
  GdnWeights gdn;
  AttnWeights attn;
  MlpWeights mlp;
  MoeWeights moe;
};

struct ModelWeights {
  Tensor embed;       // [V, H] (checkpoint dtype; rows converted on lookup)
  Tensor final_norm;  // [H] F32, zero-centred
  Tensor lm_head;     // [V, H] compute type (the embedding when tied)
  std::vector<LayerWeights> layers;
};

}  // namespace hypic
