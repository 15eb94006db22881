// GGUF mappings of the KDA + MLA hybrids:
//   * Kimi-Linear (llama.cpp's conversion/kimi_linear.py, KimiLinearModel; `kimi-linear`), seen as
//     the Hugging Face checkpoint (model_type kimi_linear, model/arch/kimi_linear.cpp) with the
//     released config's keys (linear_attn_config, …);
//   * Ling-3.0 (conversion/bailingmoe3.py, BailingMoeV3Model; `bailingmoe3`), seen as the released
//     checkpoint (BailingMoeV3ForCausalLM: model.word_embeddings, layers.N.attention.*, dense,
//     mlp.gate.expert_bias; model/arch/bailing_hybrid.cpp).
//
// What the converters' files do not say, and what is assumed as llama.cpp's graphs do:
//   * Kimi: no expert groups: KimiLinearModel writes topk_group (expert_group_used_count) but
//     not num_expert_group; without it llama.cpp routes over all experts — so does this mapping
//     (num_expert_group = topk_group = 1) unless expert_group_count is present (Ling-3.0's
//     converter writes it from n_group); the top-k weights renormalised (the graph always does;
//     moe_renormalize is not written);
//   * Ling-3.0: MTP blocks (nextn_predict_layers, at the highest indices) are not mapped, as hypic
//     skips a checkpoint's MTP layers.
#include <cmath>

#include "checkpoint/gguf_hf_map.h"

namespace hypic {

using nlohmann::json;

namespace {

// What differs between the two converters' files and the checkpoints they came from.
struct Family {
  const char* arch;
  bool ling;                // Ling-3.0: full-rank KDA gates, ssm_a = +exp(A_log), MLA head gate
  const char* mixer;        // the token mixer's prefix in a layer
  const char* out;          // its output projection
  const char* moe;          // the MoE's prefix in a layer
  const char* bias;         // the router's score-correction bias
  const char* experts[3];   // an expert's gate, up, down
  const char* embed;
};
constexpr Family kKimi{"kimi-linear", false, "self_attn.", "o_proj", "block_sparse_moe.",
                       "gate.e_score_correction_bias", {"w1.weight", "w3.weight", "w2.weight"},
                       "model.embed_tokens.weight"};
constexpr Family kLing{"bailingmoe3", true, "attention.", "dense", "mlp.", "gate.expert_bias",
                       {"gate_proj.weight", "up_proj.weight", "down_proj.weight"}, "model.word_embeddings.weight"};

struct Meta {
  int64_t n_layer, H, vocab, heads;
  std::vector<int64_t> kv;  // head_count_kv per layer: 1 for MLA, 0 for KDA (the converter's layer map)
  int64_t kda_dim, conv, kv_lora, rope, nope, v;
  std::optional<int64_t> q_lora;
  int64_t E, I, used;
  std::optional<int64_t> shared, dense, groups, groups_used;
  std::optional<double> scale;
};

// The keys both converters write; n_main: the decoder layers (block_count less MTP blocks).
Result<Meta> read_meta(const GgufHfMap& m, int64_t n_main) {
  Meta z{};
  z.n_layer = n_main;
  HYPIC_ASSIGN_OR_RETURN(z.H, m.need_int("embedding_length"));
  HYPIC_ASSIGN_OR_RETURN(Shape embd, m.shape("token_embd.weight"));
  HYPIC_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> kv, m.opt_int_list("attention.head_count_kv"));
  if (kv) z.kv = std::move(*kv);
  HYPIC_ASSIGN_OR_RETURN(z.heads, m.need_int("attention.head_count"));
  HYPIC_ASSIGN_OR_RETURN(z.kda_dim, m.need_int("kda.head_dim"));
  HYPIC_ASSIGN_OR_RETURN(z.conv, m.need_int("ssm.conv_kernel"));
  HYPIC_ASSIGN_OR_RETURN(z.kv_lora, m.need_int("attention.kv_lora_rank"));
  HYPIC_ASSIGN_OR_RETURN(z.q_lora, m.opt_int("attention.q_lora_rank"));
  HYPIC_ASSIGN_OR_RETURN(z.rope, m.need_int("rope.dimension_count"));
  HYPIC_ASSIGN_OR_RETURN(int64_t qk, m.need_int("attention.key_length_mla"));
  HYPIC_ASSIGN_OR_RETURN(z.v, m.need_int("attention.value_length_mla"));
  z.nope = qk - z.rope;
  HYPIC_ASSIGN_OR_RETURN(z.E, m.need_int("expert_count"));
  HYPIC_ASSIGN_OR_RETURN(z.used, m.need_int("expert_used_count"));
  HYPIC_ASSIGN_OR_RETURN(z.I, m.need_int("expert_feed_forward_length"));
  HYPIC_ASSIGN_OR_RETURN(z.shared, m.opt_int("expert_shared_count"));
  HYPIC_ASSIGN_OR_RETURN(z.dense, m.opt_int("leading_dense_block_count"));
  HYPIC_ASSIGN_OR_RETURN(z.scale, m.opt_float("expert_weights_scale"));
  HYPIC_ASSIGN_OR_RETURN(z.groups, m.opt_int("expert_group_count"));
  HYPIC_ASSIGN_OR_RETURN(z.groups_used, m.opt_int("expert_group_used_count"));
  if (z.n_layer <= 0 || embd.size() != 2 || embd[1] != z.H || int64_t(z.kv.size()) < z.n_layer || z.heads <= 0 ||
      z.kda_dim <= 0 || z.nope <= 0 || z.v <= 0)
    return invalid_argument("'" + m.head().path() + "': inconsistent " + m.arch() + " sizes (" +
                            std::to_string(z.n_layer) + " decoder layers, token_embd " + shape_str(embd) +
                            ", attention.head_count_kv " + std::to_string(z.kv.size()) + " per-layer entries" +
                            ", key_length_mla " + std::to_string(qk) + ", rope.dimension_count " + std::to_string(z.rope) + ")");
  z.vocab = embd[0];
  z.kv.resize(size_t(z.n_layer));
  return z;
}

// The config keys both families read alike (model/arch/kda_mla.h's DeepSeek-V3 MoE, MLA sizes).
Status common_config(const GgufHfMap& m, const Meta& z, json& c) {
  c["hidden_size"] = z.H;
  c["num_hidden_layers"] = z.n_layer;
  c["vocab_size"] = z.vocab;
  c["num_attention_heads"] = z.heads;
  c["num_key_value_heads"] = z.heads;
  HYPIC_ASSIGN_OR_RETURN(c["rms_norm_eps"], m.need_float("attention.layer_norm_rms_epsilon"));
  HYPIC_ASSIGN_OR_RETURN(std::optional<int64_t> ctx, m.opt_int("context_length"));
  if (ctx) c["model_max_length"] = *ctx;
  c["q_lora_rank"] = z.q_lora ? json(*z.q_lora) : json(nullptr);
  c["kv_lora_rank"] = z.kv_lora;
  c["qk_nope_head_dim"] = z.nope;
  c["qk_rope_head_dim"] = z.rope;
  c["v_head_dim"] = z.v;
  HYPIC_ASSIGN_OR_RETURN(std::optional<int64_t> ff, m.opt_int("feed_forward_length"));
  if (ff) c["intermediate_size"] = *ff;
  c["num_experts"] = z.E;
  c["num_experts_per_token"] = z.used;
  c["moe_intermediate_size"] = z.I;
  c["num_shared_experts"] = z.shared.value_or(0);
  c["first_k_dense_replace"] = z.dense.value_or(0);
  c["routed_scaling_factor"] = z.scale.value_or(1.0);
  c["num_expert_group"] = z.groups.value_or(1);
  c["topk_group"] = z.groups ? z.groups_used.value_or(*z.groups) : 1;
  c["tie_word_embeddings"] = !m.has("output.weight");
  return map_special_token_ids(m, c);
}

Status map_kda(GgufHfMap& m, const Family& f, const Meta& z, const std::string& b, const std::string& p) {
  const int64_t d = z.heads * z.kda_dim, H = z.H;
  for (const char* x : {"q", "k", "v"}) {
    HYPIC_RETURN_IF_ERROR(m.alias(p + x + "_proj.weight", b + "attn_" + x + ".weight", {d, H}));
    // modify_tensors reshapes conv1d [d, 1, K] to (1, d, 1, K): the same elements.
    HYPIC_RETURN_IF_ERROR(m.alias(p + x + "_conv1d.weight", b + "ssm_conv1d_" + x + ".weight", {d, 1, z.conv}));
  }
  if (f.ling) {
    // BailingMoeV3Model renames the full-rank f_proj / g_proj to ssm_f_a / ssm_g_a.
    HYPIC_RETURN_IF_ERROR(m.alias(p + "f_proj.weight", b + "ssm_f_a.weight", {d, H}));
    HYPIC_RETURN_IF_ERROR(m.alias(p + "g_proj.weight", b + "ssm_g_a.weight", {d, H}));
  } else {
    HYPIC_RETURN_IF_ERROR(m.alias(p + "f_a_proj.weight", b + "ssm_f_a.weight", {z.kda_dim, H}));
    HYPIC_RETURN_IF_ERROR(m.alias(p + "f_b_proj.weight", b + "ssm_f_b.weight", {d, z.kda_dim}));
    HYPIC_RETURN_IF_ERROR(m.alias(p + "g_a_proj.weight", b + "ssm_g_a.weight", {z.kda_dim, H}));
    HYPIC_RETURN_IF_ERROR(m.alias(p + "g_b_proj.weight", b + "ssm_g_b.weight", {d, z.kda_dim}));
  }
  HYPIC_RETURN_IF_ERROR(m.alias(p + "b_proj.weight", b + "ssm_beta.weight", {z.heads, H}));
  // KimiLinearModel stores A_log [1, 1, heads, 1] as ssm_a = −exp(A_log); BailingMoeV3Model
  // stores A_log [heads] as exp(A_log), reshaped (heads, 1). Both rename dt_bias to
  // dt_proj.bias.
  const float sign = f.ling ? 1.0f : -1.0f;
  const Shape a_shape = f.ling ? Shape{z.heads} : Shape{1, 1, z.heads, 1};
  HYPIC_RETURN_IF_ERROR(m.derive(p + "A_log", {b + "ssm_a"}, a_shape, [sign](const std::vector<Tensor>& in, Tensor& out) {
    for (int64_t i = 0; i < out.numel(); ++i) out.f32()[i] = std::log(sign * in[0].f32()[i]);
  }));
  HYPIC_RETURN_IF_ERROR(m.alias(p + "dt_bias", b + "ssm_dt.bias", {d}));
  HYPIC_RETURN_IF_ERROR(m.alias(p + "o_norm.weight", b + "ssm_norm.weight", {z.kda_dim}));
  return m.alias(p + f.out + ".weight", b + "attn_output.weight", {H, d});
}

// modify_tensors splits kv_b_proj [heads·(nope + v), kv_lora] per head into k_b, stored
// transposed ([heads, kv_lora, nope]), and v_b ([heads, v, kv_lora]); joined back here. Files
// from before the split hold attn_kv_b as it was.
Status map_mla(GgufHfMap& m, const Family& f, const Meta& z, const std::string& b, const std::string& p) {
  if (m.has(b + "attn_q_a.weight")) {
    HYPIC_RETURN_IF_ERROR(m.alias(p + "q_a_proj.weight", b + "attn_q_a.weight"));
    HYPIC_RETURN_IF_ERROR(m.alias(p + "q_a_layernorm.weight", b + "attn_q_a_norm.weight"));
    HYPIC_RETURN_IF_ERROR(m.alias(p + "q_b_proj.weight", b + "attn_q_b.weight"));
  } else {
    HYPIC_RETURN_IF_ERROR(m.alias(p + "q_proj.weight", b + "attn_q.weight"));
  }
  HYPIC_RETURN_IF_ERROR(m.alias(p + "kv_a_proj_with_mqa.weight", b + "attn_kv_a_mqa.weight"));
  HYPIC_RETURN_IF_ERROR(m.alias(p + "kv_a_layernorm.weight", b + "attn_kv_a_norm.weight"));
  const int64_t rows = z.nope + z.v, L = z.kv_lora, heads = z.heads, nope = z.nope, v = z.v;
  if (m.has(b + "attn_kv_b.weight")) {
    HYPIC_RETURN_IF_ERROR(m.alias(p + "kv_b_proj.weight", b + "attn_kv_b.weight", {heads * rows, L}));
  } else {
    HYPIC_RETURN_IF_ERROR(m.derive(p + "kv_b_proj.weight", {b + "attn_k_b.weight", b + "attn_v_b.weight"},
                                   {heads * rows, L}, [=](const std::vector<Tensor>& in, Tensor& out) {
      const float *kb = in[0].f32(), *vb = in[1].f32();
      float* o = out.f32();
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t i = 0; i < nope; ++i)
          for (int64_t c = 0; c < L; ++c) o[(h * rows + i) * L + c] = kb[(h * L + c) * nope + i];
        std::copy_n(vb + h * v * L, v * L, o + (h * rows + nope) * L);
      }
    }));
  }
  // Ling-3.0's sigmoid gate per head (BailingMoeV3Model: g_proj → attn_gate on MLA layers).
  if (f.ling) HYPIC_RETURN_IF_ERROR(m.alias(p + "g_proj.weight", b + "attn_gate.weight", {heads, z.H}));
  return m.alias(p + f.out + ".weight", b + "attn_output.weight");
}

// Experts stacked by modify_tensors; the shared experts as one MLP.
Status map_moe(GgufHfMap& m, const Family& f, const Meta& z, const std::string& b, const std::string& p) {
  HYPIC_RETURN_IF_ERROR(m.alias(p + "gate.weight", b + "ffn_gate_inp.weight", {z.E, z.H}));
  HYPIC_RETURN_IF_ERROR(m.alias(p + f.bias, b + "exp_probs_b.bias", {z.E}));
  HYPIC_RETURN_IF_ERROR(alias_stacked_experts(m, z.E, z.H, z.I, b, p, f.experts[0], f.experts[1], f.experts[2]));
  if (z.shared.value_or(0) == 0) return Status::ok();
  for (const char* w : {"gate", "up", "down"})
    HYPIC_RETURN_IF_ERROR(m.alias(p + "shared_experts." + w + "_proj.weight", b + "ffn_" + w + "_shexp.weight"));
  return Status::ok();
}

Status map_tensors(GgufHfMap& m, const Family& f, const Meta& z) {
  HYPIC_RETURN_IF_ERROR(m.alias(f.embed, "token_embd.weight"));
  HYPIC_RETURN_IF_ERROR(m.alias("model.norm.weight", "output_norm.weight"));
  if (m.has("output.weight")) HYPIC_RETURN_IF_ERROR(m.alias("lm_head.weight", "output.weight"));
  for (int64_t i = 0; i < z.n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".", p = "model.layers." + std::to_string(i) + ".";
    HYPIC_RETURN_IF_ERROR(m.alias(p + "input_layernorm.weight", b + "attn_norm.weight"));
    HYPIC_RETURN_IF_ERROR(m.alias(p + "post_attention_layernorm.weight", b + "ffn_norm.weight"));
    const std::string a = p + f.mixer;
    HYPIC_RETURN_IF_ERROR(z.kv[size_t(i)] ? map_mla(m, f, z, b, a) : map_kda(m, f, z, b, a));
    if (i < z.dense.value_or(0)) {
      for (const char* w : {"gate", "up", "down"})
        HYPIC_RETURN_IF_ERROR(m.alias(p + "mlp." + w + "_proj.weight", b + "ffn_" + w + ".weight"));
    } else {
      HYPIC_RETURN_IF_ERROR(map_moe(m, f, z, b, p + f.moe));
    }
  }
  return Status::ok();
}

}  // namespace

Status map_gguf_kimi(GgufHfMap& m, json& c) {
  HYPIC_ASSIGN_OR_RETURN(int64_t n_layer, m.need_int("block_count"));
  HYPIC_ASSIGN_OR_RETURN(Meta z, read_meta(m, n_layer));
  c["model_type"] = "kimi_linear";
  c["architectures"] = {"KimiLinearForCausalLM"};
  HYPIC_RETURN_IF_ERROR(common_config(m, z, c));
  std::vector<int64_t> full, kda;
  for (int64_t i = 0; i < z.n_layer; ++i) (z.kv[size_t(i)] ? full : kda).push_back(i + 1);
  c["linear_attn_config"] = {{"num_heads", z.heads}, {"head_dim", z.kda_dim}, {"short_conv_kernel_size", z.conv},
                             {"full_attn_layers", full}, {"kda_layers", kda}};
  c["moe_renormalize"] = true;
  c["moe_router_activation_func"] = "sigmoid";
  return map_tensors(m, kKimi, z);
}

Status map_gguf_bailing3(GgufHfMap& m, json& c) {
  HYPIC_ASSIGN_OR_RETURN(int64_t blocks, m.need_int("block_count"));
  HYPIC_ASSIGN_OR_RETURN(std::optional<int64_t> mtp, m.opt_int("nextn_predict_layers"));
  HYPIC_ASSIGN_OR_RETURN(Meta z, read_meta(m, blocks - mtp.value_or(0)));
  c["model_type"] = "bailing_hybrid";
  c["architectures"] = {"BailingMoeV3ForCausalLM"};
  HYPIC_RETURN_IF_ERROR(common_config(m, z, c));
  std::vector<std::string> types;
  for (int64_t i = 0; i < z.n_layer; ++i) types.push_back(z.kv[size_t(i)] ? "full_attention" : "linear_attention");
  c["layer_types"] = types;
  c["num_nextn_predict_layers"] = 0;
  c["linear_num_heads"] = z.heads;
  c["linear_head_dim"] = z.kda_dim;
  c["linear_conv_kernel_dim"] = z.conv;
  HYPIC_ASSIGN_OR_RETURN(std::optional<double> theta, m.opt_float("rope.freq_base"));
  c["rope_theta"] = theta.value_or(6e6);
  HYPIC_ASSIGN_OR_RETURN(std::optional<bool> safe, m.opt_bool("kda.safe_gate"));  // llama.cpp: true if absent
  c["kda_safe_gate"] = safe.value_or(true);
  HYPIC_ASSIGN_OR_RETURN(c["kda_lower_bound"], m.need_float("kda.gate_lower_bound"));
  HYPIC_ASSIGN_OR_RETURN(std::optional<bool> norm, m.opt_bool("expert_weights_norm"));  // llama.cpp: false if absent
  c["moe_renormalize"] = norm.value_or(false);
  // llama.cpp's gating function ids (llama-hparams.h): 2 is sigmoid, Ling-3.0's router.
  HYPIC_ASSIGN_OR_RETURN(int64_t gating, m.need_int("expert_gating_func"));
  if (gating != 2)
    return unsupported("'" + m.head().path() + "': bailingmoe3.expert_gating_func is " + std::to_string(gating) +
                       "; hypic's Ling-3.0 router scores experts by sigmoid (2)");
  // The shared experts' width: expert_shared_feed_forward_length, else moe width × count (as
  // llama.cpp's loader); hypic's config says it as a number of experts of the moe width.
  HYPIC_ASSIGN_OR_RETURN(std::optional<int64_t> shexp, m.opt_int("expert_shared_feed_forward_length"));
  const int64_t width = shexp.value_or(0) > 0 ? *shexp : z.I * std::max<int64_t>(1, z.shared.value_or(0));
  if (z.shared.value_or(0) > 0) {
    if (width % z.I != 0)
      return unsupported("'" + m.head().path() + "': the shared experts' width " + std::to_string(width) +
                         " is no multiple of the experts' " + std::to_string(z.I) + "; hypic's Ling-3.0 shared "
                         "MLP is num_shared_experts experts wide");
    c["num_shared_experts"] = width / z.I;
  }
  // swiglu_clamp_*: one limit per block (0: none), MTP blocks included; the decoder layers'.
  for (const auto& [key, field] : {std::pair{"swiglu_clamp_exp", "expert_swiglu_limit_list"},
                                   {"swiglu_clamp_shexp", "share_expert_swiglu_limit_list"}}) {
    HYPIC_ASSIGN_OR_RETURN(std::optional<std::vector<double>> v, m.opt_float_list(key));
    if (v) v->resize(size_t(z.n_layer), 0.0), c[field] = *v;
  }
  return map_tensors(m, kLing, z);
}

}  // namespace hypic
