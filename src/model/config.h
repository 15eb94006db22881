// Model hyper-parameters from a Hugging Face config.json (SPEC §6).
//
// Accepted model_type values:
//   qwen3_next                   flat config (Qwen3NextConfig)
//   qwen3_5, qwen3_5_moe         vision-language configs; the text fields live under
//                                `text_config` (model_type qwen3_5_text / qwen3_5_moe_text)
//   qwen3_5_text, qwen3_5_moe_text   text-only configs saved by *ForCausalLM, flat
// Absent fields take the defaults of the transformers 5.x config classes
// (models/{qwen3_next,qwen3_5,qwen3_5_moe}/configuration_*.py).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace hypic {

enum class Arch { kQwen3Next, kQwen3_5, kQwen3_5Moe };
const char* arch_name(Arch a);

enum class LayerKind { kLinear, kFull };

struct ModelConfig {
  Arch arch = Arch::kQwen3Next;
  std::string model_type;       // top-level model_type
  std::string text_model_type;  // text_config.model_type (= model_type for flat configs)

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  std::vector<LayerKind> layer_kinds;  // size num_hidden_layers

  // Full (gated softmax) attention.
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  bool attention_bias = false;
  // RoPE: partial NeoX rotation of the first rotary_dim() dims of each head.
  double rope_theta = 0;
  double partial_rotary_factor = 0;
  std::string rope_type = "default";
  std::vector<int64_t> mrope_section;  // Qwen3.5; reduces to plain RoPE for text
  bool mrope_interleaved = false;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 0;

  // Gated DeltaNet.
  int64_t linear_num_key_heads = 0;
  int64_t linear_num_value_heads = 0;
  int64_t linear_key_head_dim = 0;
  int64_t linear_value_head_dim = 0;
  int64_t linear_conv_kernel_dim = 0;

  // MLP. intermediate_size is the dense MLP width (0 for qwen3_5_moe, which has none).
  int64_t intermediate_size = 0;
  int64_t num_experts = 0;  // 0: every layer is dense
  int64_t num_experts_per_tok = 0;
  int64_t moe_intermediate_size = 0;
  int64_t shared_expert_intermediate_size = 0;
  bool norm_topk_prob = false;        // renormalise top-k router weights (3.5-MoE: always)
  int64_t decoder_sparse_step = 1;    // Qwen3-Next only
  std::vector<int64_t> mlp_only_layers;  // Qwen3-Next only

  bool tie_word_embeddings = false;
  std::vector<int64_t> eos_token_ids;
  std::optional<int64_t> bos_token_id, pad_token_id;
  std::string hidden_act;
  std::string dtype;  // "bfloat16", ... ("" if absent)
  int64_t mtp_num_hidden_layers = 0;  // multi-token-prediction layers (mtp.*), unused

  // Prefix of the text model's tensors (embed_tokens, layers.N., norm): "model." for
  // Qwen3-Next and text-only checkpoints, "model.language_model." for Qwen3.5 VL
  // checkpoints. The head is "lm_head.weight" in both. Set from model_type; refine it with
  // detect_weight_prefix() once the checkpoint is open.
  std::string weight_prefix;

  // Fields that config.json did not set and that took the transformers default.
  std::vector<std::string> defaulted_fields;

  // Parses config.json text / file / <dir>/config.json, then validate()s.
  static Result<ModelConfig> from_json(const std::string& text,
                                       const std::string& source = "config.json");
  static Result<ModelConfig> from_file(const std::string& path);
  static Result<ModelConfig> from_dir(const std::string& dir);

  // Positive sizes, head divisibility, even rotary dims, supported activation etc.
  Status validate() const;

  LayerKind layer_kind(int layer) const { return layer_kinds.at(size_t(layer)); }
  bool is_full(int layer) const { return layer_kind(layer) == LayerKind::kFull; }
  bool is_moe(int layer) const;
  int num_full_layers() const;
  int num_linear_layers() const;
  int64_t rotary_dim() const { return int64_t(double(head_dim) * partial_rotary_factor); }
  // "LLLF×12": the shortest repeating unit of the layer pattern and its count.
  std::string layer_pattern() const;
  // Text-model parameters (embeddings, layers, head; no vision tower, no MTP layers).
  int64_t param_count() const;
  int64_t active_param_count() const;  // per token: top-k experts instead of all
  // Multi-line description for `hypic inspect`.
  std::string summary() const;
};

// Chooses the text model's tensor-name prefix from a checkpoint's names: the first of
// "model.language_model.", "model.", "language_model.model." under which
// "embed_tokens.weight" or "layers.0." exists. Error if none does.
Result<std::string> detect_weight_prefix(const std::vector<std::string>& tensor_names);

}  // namespace hypic
