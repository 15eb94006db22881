// What the Qwen hybrid families (Qwen3-Next, Qwen3.5 dense / MoE) share: most of their
// config keys, and their checkpoints' tensor names (model-internal).
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "model/config.h"
#include "model/config_fields.h"
#include "model/weights.h"

namespace hypic {

class WeightReader;

// transformers 5.x defaults that differ between the Qwen config classes.
struct QwenDefaults {
  int64_t vocab, hidden, intermediate, layers, heads, kv_heads;
  int64_t experts, experts_per_tok;
};

struct QwenFamily {
  QwenDefaults defaults;
  // Non-empty for families with a vision-language config: model_type vl_model_type keeps
  // the text fields under text_config, whose model_type must be text_model_type (or
  // vl_model_type); model_type text_model_type is the flat text-only config.
  std::string vl_model_type, text_model_type;
  // The family's MLP keys (read from the text level; d: the defaults above).
  std::function<void(Fields& f, const QwenDefaults& d, ModelConfig* c)> read_mlp;
  // Whether layer i's channel mixer is MoE (after read_mlp).
  std::function<bool(const ModelConfig& c, int layer)> is_moe;
};

// The routed-expert keys Qwen3-Next and Qwen3.5-MoE share: num_experts, num_experts_per_tok
// (defaults from d), moe_intermediate_size, shared_expert_intermediate_size.
void read_qwen_experts(Fields& f, const QwenDefaults& d, ModelConfig* c);

// Everything but model_type / arch, which the caller has set.
Status parse_qwen_config(const nlohmann::json& root, const std::string& source,
                         const QwenFamily& fam, ModelConfig* c);

// Decoder layer `layer` under `p` ("model.layers.3."): norms, Gated DeltaNet (Qwen3-Next's
// per-key-head-group interleaved in_proj_qkvz / in_proj_ba when `interleaved_gdn`, else
// Qwen3.5's contiguous in_proj_qkv / z / b / a) or gated attention, dense MLP or MoE
// (packed or per-expert experts). The mixers are also callable alone, for a family that
// shares some of them (the norms: load_layer_norms, arch/loaders.h).
Status load_qwen_token_mixer(const WeightReader& rd, const ModelConfig& c, int layer,
                             const std::string& p,  bool interleaved_gdn,
                             DecoderLayer* out);
Status load_qwen_channel_mixer(const WeightReader& rd, const ModelConfig& c, int layer,
                               const std::string& p, DecoderLayer* out);
Status load_qwen_layer(const WeightReader& rd, const ModelConfig& c, int layer,
                       const std::string& p,  bool interleaved_gdn,
                       DecoderLayer* out);

}  // namespace hypic
