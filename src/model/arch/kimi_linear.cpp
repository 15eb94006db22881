// Kimi-Linear (model_type kimi_linear, KimiLinearForCausalLM; transformers 5.23.0
// modular_kimi_linear.py, Kimi-Linear-48B-A3B's config.json):
//   layers    KDA, and MLA where `linear_attn_config.full_attn_layers` (1-indexed) say —
//             else layer_types, else transformers' default (MLA at 4, 8, 12, …)
//   KDA       separate q, k, v projections and short convs, low-rank forget gate
//             −exp(A_log)·softplus(f_b·f_a·x + dt_bias), β = σ(b_proj x), gated RMSNorm with
//             the low-rank output gate σ(g_b·g_a·x)
//   MLA       no positional encoding (the "rope" part of the keys is shared, unrotated),
//             q_proj or the q_lora path, no head gate
//   MLP       dense in the first first_k_dense_replace layers (or mlp_layer_types), then
//             DeepSeek-V3's MoE: sigmoid scores, e_score_correction_bias steering the choice,
//             num_expert_group / topk_group, renormalised, × routed_scaling_factor, shared
//             experts added
//   norms     RMSNorm with the weight as is; pre-norm residuals
// Config keys: the released config's (num_experts_per_token, num_shared_experts,
// moe_renormalize, num_expert_group, model_max_length, linear_attn_config) and
// transformers' names for them (num_experts_per_tok, n_shared_experts, norm_topk_prob,
// n_group, max_position_embeddings, linear_num_heads / linear_head_dim /
// linear_conv_kernel_dim) alike.
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

class KimiLinear final : public Architecture {
 public:
  const char* name() const override { return "Kimi-Linear"; }
  std::vector<std::string> model_types() const override { return {"kimi_linear"}; }
  bool has_class(const std::string& cls) const override {
    return cls == "KimiLinearForCausalLM" || cls == "KimiLinearModel";
  }
  const char* chat_template(const ModelConfig&) const override { return "kimi"; }

  Status parse_config(const json& root, const std::string& source, ModelConfig* out) const override {
    ModelConfig& c = *out;
    c.text_model_type = c.model_type;
    Fields f(root, "", source, &c.defaulted_fields);
    read_common(f, {163840, 2304, 27, 32, 0, 1e-5, 1048576, "model_max_length"}, &c);
    c.intermediate_size = f.i64("intermediate_size", 9216);
    c.moe.intermediate_size = f.i64("moe_intermediate_size", 1024);
    c.zero_centred_norms = false;
    if (f.has("mla_use_nope") && !f.boolean("mla_use_nope", true))
      return unsupported(source + ": 'mla_use_nope' is false; hypic implements Kimi-Linear's MLA "
                         "without positional encoding (as transformers' KimiLinearAttention)");
    ModelConfig::Mla& m = c.mla;
    m.q_lora_rank = f.i64("q_lora_rank", 0);
    m.kv_lora_rank = f.i64("kv_lora_rank", 512);
    m.qk_nope_head_dim = f.i64("qk_nope_head_dim", 128);
    m.qk_rope_head_dim = f.i64("qk_rope_head_dim", 64);
    m.v_head_dim = f.i64("v_head_dim", 128);
    m.rope = false;
    m.head_gate = false;

    // KDA sizes: linear_attn_config (released) or the flat keys (transformers).
    Fields la = f.object("linear_attn_config");
    HYPIC_RETURN_IF_ERROR(f.status());
    HYPIC_RETURN_IF_ERROR(refuse_rotated_kda(f, &la, source));
    c.linear.key_heads = c.linear.value_heads =
        la.has("num_heads") ? la.i64("num_heads", 32) : f.i64("linear_num_heads", 32);
    c.linear.key_head_dim = c.linear.value_head_dim =
        la.has("head_dim") ? la.i64("head_dim", 128) : f.i64("linear_head_dim", 128);
    c.linear.conv_kernel = la.has("short_conv_kernel_size")
                                   ? la.i64("short_conv_kernel_size", 4)
                                   : f.i64("linear_conv_kernel_dim", 4);
    c.kda.low_rank_gates = true;
    c.kda.safe_gate = false;

    parse_deepseek_moe(f, {256, 8, 1, 1, 1, 2.446}, &c);
    if (f.has("moe_router_activation_func") && f.str("moe_router_activation_func", "") != "sigmoid")
      return unsupported(source + ": moe_router_activation_func '" +
                         f.str("moe_router_activation_func", "") + "'; Kimi-Linear routes by "
                         "sigmoid scores");
    if (f.has("moe_layer_freq") && f.i64("moe_layer_freq", 1) != 1)
      return unsupported(source + ": moe_layer_freq other than 1 is not supported");

    c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
    c.head_ignores_tie = true;
    c.eos_token_ids = f.i64_list("eos_token_id", /*allow_scalar=*/true);
    if (c.eos_token_ids.empty()) c.eos_token_ids = {163586};
    c.bos_token_id = f.opt_i64("bos_token_id");
    c.pad_token_id = f.opt_i64("pad_token_id");
    c.dtype = f.has("dtype") ? f.str("dtype", "") : f.str("torch_dtype", "");

    std::vector<const TokenMixerType*> kinds;
    HYPIC_RETURN_IF_ERROR(layer_kinds(f, la, source, c.num_hidden_layers, &kinds));
    std::vector<ChannelMixerKind> mlp;
    HYPIC_RETURN_IF_ERROR(deepseek_mlp_kinds(f, source, c.num_hidden_layers, 1, &mlp));
    for (const Fields* x : {&f, &la})
      if (!x->status().is_ok()) return x->status();
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
    const std::string a = p + "self_attn.";
    HYPIC_RETURN_IF_ERROR(c.layer(layer).token == &kda_type()
                              ? load_kda_layer(rd, c, a, "o_proj", out)
                              : load_mla_layer(rd, c, a, "o_proj", out));
    // The MLP under mlp. (released) or block_sparse_moe. (MoE layers as released; dense ones
    // too when transformers 5.23 saved them).
    const bool moe_prefix = rd.has(p + "block_sparse_moe.gate.weight") ||
                            rd.has(p + "block_sparse_moe.gate_proj.weight");
    const std::string m = p + (moe_prefix ? "block_sparse_moe." : "mlp.");
    return load_deepseek_channel(rd, c, layer, m, "e_score_correction_bias", out);
  }

 private:
  // 1-indexed kda_layers / full_attn_layers (released), layer_types, or the default.
  static Status layer_kinds(Fields& f, Fields& la, const std::string& source, int64_t n,
                            std::vector<const TokenMixerType*>* kinds) {
    kinds->assign(size_t(std::max<int64_t>(n, 0)), nullptr);
    if (la.has("full_attn_layers") && la.has("kda_layers")) {
      for (auto [list, type] : {std::pair{"full_attn_layers", &mla_type()}, {"kda_layers", &kda_type()}})
        for (int64_t i : la.i64_list(list)) {
          if (i < 1 || i > n)
            return invalid_argument(source + ": linear_attn_config." + list + " names layer " +
                                    std::to_string(i) + "; layers are numbered 1…" +
                                    std::to_string(n));
          (*kinds)[size_t(i - 1)] = type;
        }
      for (size_t i = 0; i < kinds->size(); ++i)
        if (!(*kinds)[i])
          return invalid_argument(source + ": linear_attn_config lists layer " +
                                  std::to_string(i + 1) + " in neither kda_layers nor "
                                  "full_attn_layers");
      return Status::ok();
    }
    if (f.has("layer_types")) return kda_mla_layer_types(f, source, n, kinds);
    for (size_t i = 0; i < kinds->size(); ++i)  // transformers' default
      (*kinds)[i] = i > 0 && i % 4 == 0 ? &mla_type() : &kda_type();
    return Status::ok();
  }

};

}  // namespace

const Architecture& kimi_linear_architecture() {
  static const KimiLinear a;
  return a;
}

}  // namespace hypic
