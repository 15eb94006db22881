// Ling-3.0 (model_type bailing_hybrid, BailingHybridForCausalLM; transformers 5.23.0
// modular_bailing_hybrid.py):
//   layers    KDA, with MLA as the last layer of every layer_group_size (or layer_types)
//   KDA       as Kimi-Linear's with full-rank gates: f_proj for the forget gate (the safe
//             gate kda_lower_bound·σ(exp(A_log)·(f + dt_bias)) when kda_safe_gate, else
//             −exp(A_log)·softplus(f + dt_bias)), g_proj for the output gate
//   MLA       interleaved RoPE (rope_theta) on the rope parts of q and of the shared key,
//             q_proj, and a sigmoid gate per head on the output (g_proj)
//   MLP       dense in the first first_k_dense_replace layers, then DeepSeek-V3's MoE
//   norms     RMSNorm with the weight as is; pre-norm residuals; MTP layers after the
//             decoder layers are skipped
// Tensor names: the released (model.word_embeddings, layers.N.attention.*, dense, q_conv1d /
// k_conv1d / v_conv1d, mlp.gate.expert_bias) and transformers' (model.embed_tokens,
// layers.N.self_attn.*, o_proj, conv1d, forget_gate.*, e_score_correction_bias) alike.
#include "model/arch.h"
#include "model/arch/kda_mla.h"
#include "model/arch/loaders.h"
#include "model/config_fields.h"
#include "model/mixers/kda.h"
#include "model/mixers/mla.h"
#include "model/weight_reader.h"

namespace hypic {
namespace {

using json = nlohmann::json;

class BailingHybrid final : public Architecture {
 public:
  const char* name() const override { return "Ling-3.0"; }
  std::vector<std::string> model_types() const override { return {"bailing_hybrid"}; }
  bool has_class(const std::string& cls) const override {
    return cls == "BailingHybridForCausalLM" || cls == "BailingHybridModel" ||
           cls == "BailingMoeV3ForCausalLM";
  }
  const char* chat_template(const ModelConfig&) const override { return "ling3"; }
  std::vector<std::string> embedding_names() const override {
    return {"embed_tokens.weight", "word_embeddings.weight"};
  }

  Status parse_config(const json& root, const std::string& source, ModelConfig* out) const override {
    ModelConfig& c = *out;
    c.text_model_type = c.model_type;
    Fields f(root, "", source, &c.defaulted_fields);
    auto key = [&](const char* a, const char* b) { return f.has(a) ? a : b; };
    read_common(f, {157184, 2560, 42, 32, 0, 1e-6, 262144, "model_max_length"}, &c);
    c.intermediate_size = f.i64("intermediate_size", 6144);
    c.moe.intermediate_size = f.i64("moe_intermediate_size", 768);
    c.zero_centred_norms = false;
    HYPIC_RETURN_IF_ERROR(parse_rope(f, source, &c));
    ModelConfig::Mla& m = c.mla;
    m.q_lora_rank = f.i64("q_lora_rank", 0);  // null: q_proj; else q_a_proj → q_a_layernorm → q_b_proj
    if (f.boolean("attention_bias", false))
      return unsupported(source + ": 'attention_bias' is true; hypic implements Ling-3.0's "
                         "projections without biases");
    m.kv_lora_rank = f.i64("kv_lora_rank", 512);
    m.qk_nope_head_dim = f.i64("qk_nope_head_dim", 128);
    m.qk_rope_head_dim = f.i64("qk_rope_head_dim", 64);
    m.v_head_dim = f.i64("v_head_dim", 128);
    m.rope = true;
    m.head_gate = true;

    // KDA sizes: head_dim / num_attention_heads / short_conv_kernel_size (released), or the
    // linear_* keys transformers adds when saving (its DeepseekV3Config base then rewrites
    // head_dim to qk_rope_head_dim, so linear_head_dim wins where present).
    c.linear.key_heads = c.linear.value_heads =
        f.i64(key("linear_num_heads", "num_attention_heads"), c.num_attention_heads);
    c.linear.key_head_dim = c.linear.value_head_dim = f.i64(key("linear_head_dim", "head_dim"), 128);
    c.linear.conv_kernel = f.i64(key("linear_conv_kernel_dim", "short_conv_kernel_size"), 4);
    HYPIC_RETURN_IF_ERROR(refuse_rotated_kda(f, nullptr, source));
    c.kda.low_rank_gates = false;
    c.kda.safe_gate = f.boolean("kda_safe_gate", true);
    c.kda.lower_bound = f.f64("kda_lower_bound", -5.0);

    parse_deepseek_moe(f, {512, 8, 1, 8, 4, 2.5}, &c);
    c.moe.swiglu_limits = f.f64_list("expert_swiglu_limit_list");
    c.moe.swiglu_limits_shared = f.f64_list("share_expert_swiglu_limit_list");
    for (const auto& [name, v] : {std::pair{"expert_swiglu_limit_list", &c.moe.swiglu_limits},
                                  {"share_expert_swiglu_limit_list", &c.moe.swiglu_limits_shared}})
      if (!v->empty() && int64_t(v->size()) != c.num_hidden_layers)
        return invalid_argument(source + ": '" + name + "' has " + std::to_string(v->size()) +
                                " limits for " + std::to_string(c.num_hidden_layers) +
                                " decoder layers; it needs one per layer (0: no limit)");
    c.trailing_mtp_layers = f.i64(key("num_nextn_predict_layers", "num_mtp_layers"), 1);

    c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
    c.head_ignores_tie = true;
    c.eos_token_ids = f.i64_list("eos_token_id", /*allow_scalar=*/true);
    if (c.eos_token_ids.empty()) c.eos_token_ids = {156895};
    c.bos_token_id = f.opt_i64("bos_token_id");
    c.pad_token_id = f.opt_i64("pad_token_id");
    c.dtype = f.has("dtype") ? f.str("dtype", "") : f.str("torch_dtype", "");

    const int64_t n = std::max<int64_t>(c.num_hidden_layers, 0);
    std::vector<const TokenMixerType*> kinds(size_t(n), &kda_type());
    if (f.has("layer_types")) {
      HYPIC_RETURN_IF_ERROR(kda_mla_layer_types(f, source, n, &kinds));
    } else {
      const int64_t group = f.i64("layer_group_size", 6);
      if (group <= 0)
        return invalid_argument(source + ": field 'layer_group_size' must be positive, got " +
                                std::to_string(group));
      for (int64_t i = 0; i < n; ++i)
        if ((i + 1) % group == 0) kinds[size_t(i)] = &mla_type();
    }
    std::vector<ChannelMixerKind> mlp;
    HYPIC_RETURN_IF_ERROR(deepseek_mlp_kinds(f, source, n, /*default_dense=*/2, &mlp));
    HYPIC_RETURN_IF_ERROR(f.status());
    c.weight_prefix = "model.";
    c.layers.clear();
    for (size_t i = 0; i < kinds.size(); ++i) c.layers.push_back({kinds[i], mlp[i]});
    return Status::ok();
  }

  Status validate(const ModelConfig& c) const override {
    return c.uses(ChannelMixerKind::kMoe) ? config_router(c).status() : Status::ok();
  }

  Status load_layer(const WeightReader& rd, const ModelConfig& c, int layer,
                    const std::string& p, DecoderLayer* out) const override {
    HYPIC_RETURN_IF_ERROR(load_layer_norms(rd, c, p, out));
    const bool released = rd.has(p + "attention.o_norm.weight") || rd.has(p + "attention.dense.weight");
    const std::string a = p + (released ? "attention." : "self_attn.");
    const char* o = released ? "dense" : "o_proj";
    HYPIC_RETURN_IF_ERROR(c.layer(layer).token == &kda_type() ? load_kda_layer(rd, c, a, o, out)
                                                              : load_mla_layer(rd, c, a, o, out));
    const char* bias = rd.has(p + "mlp.gate.expert_bias") ? "expert_bias" : "e_score_correction_bias";
    return load_deepseek_channel(rd, c, layer, p + "mlp.", bias, out);
  }

 private:
  // rope_parameters (transformers 5) or rope_theta; plain RoPE only.
  static Status parse_rope(Fields& f, const std::string& source, ModelConfig* c) {
    Fields r = f.object("rope_parameters");
    c->rope_theta = r.has("rope_theta") ? r.f64("rope_theta", 0) : f.f64("rope_theta", 6e6);
    const std::string type = r.str("rope_type", "default");
    if (type != "default" || f.has("rope_scaling"))
      return unsupported(source + ": RoPE scaling ('" + type + "') is not supported; hypic "
                         "implements plain RoPE (remove the scaling entry)");
    return r.status();
  }
};

}  // namespace

const Architecture& bailing_hybrid_architecture() {
  static const BailingHybrid a;
  return a;
}

}  // namespace hypic
