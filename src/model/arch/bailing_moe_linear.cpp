// Ring-linear-2.0 (model_type bailing_moe_linear, BailingMoeLinearV2ForCausalLM: Ring-mini- /
// Ring-flash-linear-2.0). transformers has no class for it; the semantics follow the public
// ports (SGLang and vLLM bailing_moe_linear.py, mlx-lm's), and tools/ring_reference.py is the
// plain PyTorch statement the goldens come from.
//   layers    Lightning attention, except every layer_group_size-th layer (and the layers
//             after the last whole group) is GQA softmax attention
//   Lightning MHA q|k|v (query_key_value), optional SiLU (linear_silu), per-head RMSNorm of q
//             and k (use_qk_norm), partial NeoX RoPE inside the layer, q·head_dim^−½, ALiBi
//             decay slopes × (1 − l/(N−1) + 1e−5) with l the 0-based layer (SGLang / vLLM; mlx-lm
//             counts from l − 1), group RMSNorm (group_norm_size) × σ(g_proj x), dense
//   attention q|k|v, per-head RMSNorm of q and k, partial NeoX RoPE, no output gate
//   MLP       dense in the first first_k_dense_replace layers, then MoE: sigmoid (or softmax)
//             scores, expert_bias steering the choice, n_group / topk_group group-limited
//             top-k, routed_scaling_factor, shared experts added ungated
//   norms     RMSNorm with the weight as is; pre-norm residuals
// Tensors: model.word_embeddings, model.layers.N.attention.{query_key_value, query_layernorm,
// key_layernorm, g_proj, g_norm, dense}, model.layers.N.mlp.{gate_proj, up_proj, down_proj |
// gate, gate.expert_bias, experts.E.*, shared_experts.*}, model.norm, lm_head.
#include "model/arch.h"
#include "model/arch/loaders.h"
#include "model/config_fields.h"
#include "model/mixers/gated_attention.h"
#include "model/mixers/lightning.h"
#include "model/weight_reader.h"

namespace hypic {
namespace {

using json = nlohmann::json;

bool is_attention_layer(int64_t i, int64_t n, int64_t group) {
  return (i + 1) % group == 0 || i >= (n / group) * group;
}

class BailingMoeLinear final : public Architecture {
 public:
  const char* name() const override { return "Ring-linear"; }
  std::vector<std::string> model_types() const override { return {"bailing_moe_linear"}; }
  bool has_class(const std::string& cls) const override {
    return cls == "BailingMoeLinearV2ForCausalLM" || cls == "BailingMoeLinearForCausalLM" ||
           cls == "BailingMoELinearForCausalLM";
  }
  const char* chat_template(const ModelConfig&) const override { return "bailing"; }
  std::vector<std::string> embedding_names() const override { return {"word_embeddings.weight"}; }

  Status parse_config(const json& root, const std::string& source, ModelConfig* out) const override {
    ModelConfig& c = *out;
    c.text_model_type = c.model_type;
    Fields f(root, "", source, &c.defaulted_fields);
    // Defaults: Ring-mini-linear-2.0's values (the config class ships with the checkpoint).
    read_common(f, {157184, 2048, 20, 16, 4, 1e-6, 32768}, &c);
    c.intermediate_size = f.i64("intermediate_size", 5120);
    const int64_t heads = std::max<int64_t>(c.num_attention_heads, 1);
    c.head_dim = f.i64("head_dim", c.hidden_size / heads);
    c.rope_theta = f.f64("rope_theta", 600000.0);
    if (f.has("rope_scaling"))
      return unsupported(source + ": field 'rope_scaling' is set; hypic implements plain RoPE "
                         "(set it to null to run without context extension)");
    const int64_t rot = f.has("rotary_dim")
                            ? f.i64("rotary_dim", 0)
                            : int64_t(double(c.head_dim) * f.f64("partial_rotary_factor", 0.5));
    c.partial_rotary_factor = c.head_dim > 0 ? double(rot) / double(c.head_dim) : 0;
    for (const char* key : {"use_bias", "use_qkv_bias"})
      if (f.boolean(key, false))
        return unsupported(source + ": field '" + std::string(key) + "' is true; hypic supports "
                           "only bias-free projections");
    c.attn_qk_norm = f.boolean("use_qk_norm", true);
    c.zero_centred_norms = false;

    ModelConfig::Lightning& l = c.lightning;
    l.heads = c.num_attention_heads;
    l.head_dim = c.head_dim;
    l.silu_qkv = f.has("use_linear_silu") ? f.boolean("use_linear_silu", false)
                                          : f.boolean("linear_silu", false);
    l.qk_norm = c.attn_qk_norm;
    l.scale_q = true;
    l.rotary_dim = f.boolean("linear_rope", true) ? rot : 0;
    l.norm_groups = f.i64("group_norm_size", 4);
    l.norm_eps = c.rms_norm_eps;
    l.slopes = ModelConfig::Lightning::Slopes::kAlibi;
    l.layer_offset = 0;

    const int64_t first_dense = f.i64("first_k_dense_replace", 1);
    c.moe.experts = f.i64("num_experts", 256);
    c.moe.experts_per_tok = f.i64("num_experts_per_tok", 8);
    c.moe.intermediate_size = f.i64("moe_intermediate_size", 512);
    const int64_t shared = f.i64("num_shared_experts", 1);
    c.moe.shared_intermediate_size =
        shared * f.i64("moe_shared_expert_intermediate_size", c.moe.intermediate_size);
    c.moe.shared_gated = false;
    c.moe.norm_topk_prob = f.boolean("norm_topk_prob", true);
    const std::string score = f.str("score_function", "sigmoid");
    if (score != "sigmoid" && score != "softmax")
      return unsupported(source + ": score_function '" + score + "' (expected sigmoid or softmax)");
    c.moe.router_sigmoid = score == "sigmoid";
    c.moe.router_bias = f.boolean("moe_router_enable_expert_bias", true);
    c.moe.router_groups = std::max<int64_t>(f.i64("n_group", 1), 1);
    c.moe.router_topk_groups = std::max<int64_t>(f.i64("topk_group", 1), 1);
    c.moe.routed_scaling_factor = f.f64("routed_scaling_factor", 1.0);

    c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
    c.eos_token_ids = f.i64_list("eos_token_id", /*allow_scalar=*/true);
    c.bos_token_id = f.opt_i64("bos_token_id");
    c.pad_token_id = f.opt_i64("pad_token_id");
    c.dtype = f.has("dtype") ? f.str("dtype", "") : f.str("torch_dtype", "");
    c.mtp_num_hidden_layers = f.has("num_nextn_predict_layers") ? f.i64("num_nextn_predict_layers", 0) : 0;
    const int64_t group = f.i64("layer_group_size", 5);
    HYPIC_RETURN_IF_ERROR(f.status());
    if (group <= 0)
      return invalid_argument(source + ": field 'layer_group_size' must be positive, got " +
                              std::to_string(group));

    c.weight_prefix = "model.";
    c.layers.clear();
    for (int64_t i = 0; i < std::max<int64_t>(c.num_hidden_layers, 0); ++i) {
      LayerSpec s;
      s.token = is_attention_layer(i, c.num_hidden_layers, group) ? &attention_type()
                                                                  : &lightning_type();
      s.channel = c.moe.experts > 1 && i >= first_dense ? ChannelMixerKind::kMoe
                                                        : ChannelMixerKind::kSwiGlu;
      c.layers.push_back(s);
    }
    return Status::ok();
  }

  Status validate(const ModelConfig& c) const override {
    if (!c.uses(ChannelMixerKind::kMoe)) return Status::ok();
    if (c.moe.router_bias && !c.moe.router_sigmoid)
      return invalid_argument("moe_router_enable_expert_bias needs score_function 'sigmoid' "
                              "(the Bailing router pairs the expert bias with sigmoid scores)");
    return config_router(c).status();
  }

  Status load_layer(const WeightReader& rd, const ModelConfig& c, int layer,
                    const std::string& p, DecoderLayer* out) const override {
    HYPIC_RETURN_IF_ERROR(load_layer_norms(rd, c, p, out));
    HYPIC_RETURN_IF_ERROR(load_token_mixer(rd, c, layer, p + "attention.", out));
    return load_channel_mixer(rd, c, layer, p + "mlp.", out);
  }

 private:
  static Status load_token_mixer(const WeightReader& rd, const ModelConfig& c, int layer,
                                 const std::string& p, DecoderLayer* out) {
    const int64_t H = c.hidden_size, hd = c.head_dim, nh = c.num_attention_heads;
    const int64_t D = nh * hd;
    Tensor q_norm, k_norm;
    if (c.attn_qk_norm) {
      HYPIC_ASSIGN_OR_RETURN(q_norm, rd.vec(p + "query_layernorm.weight", {hd}));
      HYPIC_ASSIGN_OR_RETURN(k_norm, rd.vec(p + "key_layernorm.weight", {hd}));
    }
    if (c.layer(layer).token == &lightning_type()) {
      LightningWeights w;
      HYPIC_ASSIGN_OR_RETURN(w.qkv, rd.mat(p + "query_key_value.weight", {3 * D, H}));
      w.q_norm = q_norm;
      w.k_norm = k_norm;
      HYPIC_ASSIGN_OR_RETURN(w.gate, rd.mat(p + "g_proj.weight", {D, H}));
      HYPIC_ASSIGN_OR_RETURN(w.norm, rd.vec(p + "g_norm.weight", {D}));
      HYPIC_ASSIGN_OR_RETURN(w.out, rd.mat(p + "dense.weight", {H, D}));
      out->token = make_lightning(c, layer, std::move(w));
      return Status::ok();
    }
    AttnWeights w;
    const int64_t kvd = c.num_key_value_heads * hd;
    HYPIC_ASSIGN_OR_RETURN(w.qkv, rd.mat(p + "query_key_value.weight", {D + 2 * kvd, H}));
    w.q_norm = q_norm;
    w.k_norm = k_norm;
    HYPIC_ASSIGN_OR_RETURN(w.o_proj, rd.mat(p + "dense.weight", {H, D}));
    out->token = make_attention(c, attention_type(), std::move(w));
    return Status::ok();
  }

  static Status load_channel_mixer(const WeightReader& rd, const ModelConfig& c, int layer,
                                   const std::string& p, DecoderLayer* out) {
    const int64_t H = c.hidden_size;
    switch (c.layer(layer).channel) {
      case ChannelMixerKind::kSwiGlu: {
        MlpWeights w;
        HYPIC_RETURN_IF_ERROR(load_swiglu(rd, H, c.intermediate_size, p, w));
        out->channel = make_swiglu(std::move(w));
        return Status::ok();
      }
      case ChannelMixerKind::kMoe: {
        const int64_t E = c.moe.experts;
        MoeWeights w;
        HYPIC_ASSIGN_OR_RETURN(w.router, rd.vec(p + "gate.weight", {E, H}));
        HYPIC_ASSIGN_OR_RETURN(w.routing, config_router(c));
        if (c.moe.router_bias) {
          HYPIC_ASSIGN_OR_RETURN(w.routing.selection_bias, rd.vec(p + "gate.expert_bias", {E}));
        }
        HYPIC_RETURN_IF_ERROR(load_experts(rd, E, H, c.moe.intermediate_size, p + "experts.", {},
                                           &w.experts));
        w.has_shared = c.moe.shared_intermediate_size > 0;
        if (w.has_shared)
          HYPIC_RETURN_IF_ERROR(
              load_swiglu(rd, H, c.moe.shared_intermediate_size, p + "shared_experts.", w.shared));
        out->channel = make_moe(std::move(w));
        return Status::ok();
      }
    }
    return internal_error("unknown channel mixer");
  }
};

}  // namespace

const Architecture& bailing_moe_linear_architecture() {
  static const BailingMoeLinear a;
  return a;
}

}  // namespace hypic
