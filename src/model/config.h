// Model hyper-parameters from a Hugging Face config.json (SPEC §6).
//
// config.json's model_type picks the architecture (model/arch.h, the families in model/arch/),
// which reads its keys and transformers' defaults for absent ones. The fields every family
// has (sizes, attention heads, RoPE, norms, the head) are top-level; what one kind of mixer
// reads is in its section (linear, kda, mla, lightning, moe, residual), which a family whose
// layers do not use that mixer leaves at its defaults.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace hypic {

class Architecture;
struct ModelConfig;

// The kind of memory a token mixer keeps (for summaries and cost models): a fixed-size
// recurrent state (linear attention) or a cache that grows with the sequence (attention).
enum class LayerKind { kLinear, kFull };

// What a kind of token mixer (model/mixers/) says about itself before any weights exist:
// its name, its state family, the config fields it needs and their checks, its parameter
// count and its line in the `inspect` summary. One static object per kind; a new kind is a
// new object (a test can define one: nothing here lists them).
class TokenMixerType {
 public:
  virtual ~TokenMixerType() = default;
  virtual const char* name() const = 0;  // "Gated DeltaNet"
  // Stable [a-z0-9_] identifier, stored in segment entries: "gated_deltanet".
  virtual const char* id() const = 0;
  virtual LayerKind state() const = 0;
  // Checks of the fields this mixer reads (field names with c.text_prefix).
  virtual Status validate(const ModelConfig& c) const = 0;
  virtual int64_t params(const ModelConfig& c) const = 0;  // one layer's
  virtual std::string describe(const ModelConfig& c) const = 0;
};

// The channel mixer of a decoder layer. Switches over it have no default, so a new kind does
// not compile until every one handles it.
enum class ChannelMixerKind {
  kSwiGlu,  // dense SwiGLU MLP
  kMoe,     // sparse mixture of SwiGLU experts (router: model/mixers/moe_router.h)
};
const char* channel_mixer_name(ChannelMixerKind k);

struct LayerSpec {
  const TokenMixerType* token = nullptr;
  ChannelMixerKind channel = ChannelMixerKind::kSwiGlu;
};

struct ModelConfig {
  const Architecture* arch = nullptr;  // from the registry (model/arch.h), never null after parsing
  std::string model_type;       // top-level model_type
  std::string text_model_type;  // text_config.model_type (= model_type for flat configs)
  std::string text_prefix;      // "text_config." where the text fields are nested, else ""

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  std::vector<LayerSpec> layers;  // size num_hidden_layers

  // Full (gated softmax) attention.
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_dim = 0;
  bool attention_bias = false;
  bool attn_qk_norm = true;  // per-head RMSNorm of q and k before RoPE (Qwen, Ring; not MiniMax)
  // RoPE: partial NeoX rotation of the first rotary_dim() dims of each head.
  double rope_theta = 0;
  double partial_rotary_factor = 0;
  std::string rope_type = "default";
  std::vector<int64_t> mrope_section;  // Qwen3.5; reduces to plain RoPE for text
  bool mrope_interleaved = false;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 0;
  // RMSNorm weights: y = x̂·(1 + w) (zero-centred: Qwen) or y = x̂·w (Ring, MiniMax). Applies
  // to the layer norms, the final norm and attention's q/k norms.
  bool zero_centred_norms = true;

  // Linear attention with a short convolution: Gated DeltaNet (model/mixers/gated_deltanet.h;
  // config keys linear_num_key_heads, linear_num_value_heads, linear_key_head_dim,
  // linear_value_head_dim, linear_conv_kernel_dim) and KDA (key heads = value heads).
  struct Linear {
    int64_t key_heads = 0, value_heads = 0;
    int64_t key_head_dim = 0, value_head_dim = 0;
    int64_t conv_kernel = 0;
    // Gated DeltaNet value heads in llama.cpp's tiled order in the projections (a Qwen3.5 GGUF
    // file with key heads != value heads: head t = j·nk + g, checkpoint/gguf_qwen.cpp); the
    // mixer reorders activations, the weights stay as stored.
    bool tiled_value_heads = false;
  } linear;

  // KDA (model/mixers/kda.h; Kimi-Linear, Ling-3.0), on the `linear` sizes: its forget gate
  // g = −exp(A_log)·softplus(f + dt_bias), or with the safe gate
  // g = lower_bound·σ(exp(A_log)·(f + dt_bias)) (Ling-3.0's kda_safe_gate, kda_lower_bound).
  struct Kda {
    bool safe_gate = false;
    double lower_bound = -5.0;
    bool low_rank_gates = false;  // forget / output gate inputs in rank head_dim (Kimi)
  } kda;

  // Multi-head latent attention (model/mixers/mla.h; Kimi-Linear, Ling-3.0): num_attention_heads
  // query heads of qk_nope + qk_rope dims and values of v_head_dim; keys and values come per
  // head from one shared latent of kv_lora_rank dims, plus one shared rope part of the keys.
  struct Mla {
    int64_t q_lora_rank = 0;  // 0: q_proj; else q_a_proj → RMSNorm → q_b_proj
    int64_t kv_lora_rank = 0, qk_nope_head_dim = 0, qk_rope_head_dim = 0, v_head_dim = 0;
    bool rope = false;       // interleaved RoPE on the rope part (Ling-3.0); Kimi-Linear: NoPE
    bool head_gate = false;  // output × σ(g_proj x), one gate per head (Ling-3.0)
  } mla;

  // Lightning attention (model/mixers/lightning.h; Ring-linear, MiniMax): multi-head, heads ×
  // head_dim for q, k and v alike; the per-layer, per-head decay from `slopes`.
  struct Lightning {
    int64_t heads = 0, head_dim = 0;
    bool silu_qkv = false;    // SiLU on the q|k|v projection (MiniMax; Ring's linear_silu)
    bool qk_norm = false;     // per-head RMSNorm of q and k (Ring's use_qk_norm)
    bool scale_q = false;     // q ×= head_dim^−½ (Ring; MiniMax does not scale)
    int64_t rotary_dim = 0;   // NeoX RoPE on the first rotary_dim dims of q, k (0: none)
    int64_t norm_groups = 1;  // output RMSNorm over heads·head_dim in this many groups
    double norm_eps = 0;
    enum class Slopes {
      kAlibi,    // ALiBi slope rule, s = slope_h·(1 − (l − offset)/(N − 1) + 1e−5)  (Ring)
      kMiniMax,  // (2^(−8/H))^(h+1)·(1 − l/(N − 1 + 1e−5) + 1e−5)  (transformers' MiniMax)
    } slopes = Slopes::kAlibi;
    int layer_offset = 0;  // kAlibi: l counted from this layer (ports differ; SPEC §2)
  } lightning;

  // Dense MLP width (0 for qwen3_5_moe, which has none).
  int64_t intermediate_size = 0;

  // Mixture of SwiGLU experts (model/mixers/moe.h, moe_router.h): config keys num_experts,
  // num_experts_per_tok, moe_intermediate_size, shared_expert_intermediate_size, ... as each
  // family names them.
  struct Moe {
    int64_t experts = 0;  // 0: every layer is dense
    int64_t experts_per_tok = 0;
    int64_t intermediate_size = 0;
    int64_t shared_intermediate_size = 0;
    bool norm_topk_prob = false;  // renormalise top-k router weights (3.5-MoE: always)
    bool shared_gated = true;     // the shared expert is × sigmoid(shared_expert_gate·x)
    // Router variant: Qwen's softmax, or Bailing's sigmoid scores with a selection bias,
    // group-limited choice and a scaling factor.
    bool router_sigmoid = false;
    bool router_bias = false;  // a per-expert selection bias tensor (e_score_correction_bias)
    int64_t router_groups = 1, router_topk_groups = 1;
    double routed_scaling_factor = 1.0;
    // Per decoder layer (Ling-3.0's expert_swiglu_limit_list / share_expert_swiglu_limit_list),
    // empty when absent: a non-zero limit clamps that layer's routed (shared) experts' SwiGLU,
    // min(silu(gate), l) · clamp(up, −l, l), as transformers' BailingHybrid does.
    std::vector<double> swiglu_limits, swiglu_limits_shared;
    int64_t decoder_sparse_step = 1;       // Qwen3-Next only
    std::vector<int64_t> mlp_only_layers;  // Qwen3-Next only
  } moe;

  // Residual joins (weights.h: Residual): MiniMax's "postnorm" (the residual is the normed
  // input) and its α (residual) / β (mixer output) factors per kind of join; 1 elsewhere.
  struct Residual {
    bool from_norm = false;
    double full_attn_alpha = 1, full_attn_beta = 1, linear_attn_alpha = 1, linear_attn_beta = 1;
    double mlp_alpha = 1, mlp_beta = 1;
  } residual;

  bool tie_word_embeddings = false;
  // The family's transformers class never ties (Kimi-Linear, Ling-3.0: `_tied_weights_keys`
  // empty): lm_head.weight, when the checkpoint has it, is the head whatever
  // tie_word_embeddings says; without it the embedding is.
  bool head_ignores_tie = false;
  // Once the checkpoint is open: with head_ignores_tie and an lm_head.weight, the model is
  // untied whatever config.json says (the head, the parameter count and `inspect` follow).
  void resolve_head(bool has_lm_head) {
    if (head_ignores_tie && has_lm_head) tie_word_embeddings = false;
  }
  std::vector<int64_t> eos_token_ids;
  std::optional<int64_t> bos_token_id, pad_token_id;
  std::string hidden_act;
  std::string dtype;  // "bfloat16", ... ("" if absent)
  int64_t mtp_num_hidden_layers = 0;  // multi-token-prediction layers (mtp.*), unused
  // MTP layers stored as decoder layers num_hidden_layers… (Ling-3.0), skipped by the loader.
  int64_t trailing_mtp_layers = 0;

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

  // Positive sizes, head divisibility, even rotary dims, supported activation etc., for the
  // mixers the layers use; then the architecture's own checks.
  Status validate() const;

  const LayerSpec& layer(int i) const { return layers.at(size_t(i)); }
  LayerKind layer_kind(int i) const { return layer(i).token->state(); }
  bool is_full(int i) const { return layer_kind(i) == LayerKind::kFull; }
  bool is_moe(int i) const { return layer(i).channel == ChannelMixerKind::kMoe; }
  bool uses(const TokenMixerType& t) const;
  std::vector<const TokenMixerType*> token_mixers() const;  // distinct, in order of first use
  bool uses(ChannelMixerKind k) const;
  // Display name of the architecture ("Qwen3-Next").
  const char* arch_name() const;
  int num_full_layers() const;
  int num_linear_layers() const;
  int64_t rotary_dim() const { return int64_t(double(head_dim) * partial_rotary_factor); }
  // "LLLF×12": the shortest repeating unit of the layer pattern and its count.
  std::string layer_pattern() const;
  // Text-model parameters (embeddings, layers, head; no vision tower, no MTP layers).
  int64_t param_count() const;
  int64_t active_param_count() const;  // per token: top-k experts instead of all
  // Multi-line description for `hypic inspect` (model/config_summary.cpp).
  std::string summary() const;
};

// Chooses the text model's tensor-name prefix from a checkpoint's names: the first of
// "model.language_model.", "model.", "language_model.model." under which
// "embed_tokens.weight" or "layers.0." exists. Error if none does.
Result<std::string> detect_weight_prefix(const std::vector<std::string>& tensor_names);

}  // namespace hypic
