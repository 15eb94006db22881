// GGUF mapping of Kimi-Linear (llama.cpp's conversion/kimi_linear.py, KimiLinearModel; the
// `kimi-linear` architecture): seen as the Hugging Face checkpoint (model_type kimi_linear,
// model/arch/kimi_linear.cpp), with the released config's keys (linear_attn_config, …).
//
// What the converter's file does not say, and what is assumed as llama.cpp's graph does:
//   * no expert groups: KimiLinearModel writes topk_group (expert_group_used_count) but not
//     num_expert_group; without it llama.cpp routes over all experts — so does this mapping
//     (num_expert_group = topk_group = 1) unless expert_group_count is present;
//   * the top-k weights renormalised (the graph always does; moe_renormalize is not written).
#include <cmath>

#include "checkpoint/gguf_hf_map.h"

namespace hypic {

using nlohmann::json;

namespace {

struct KdaSizes {
  int64_t H, heads, dim, K;
};

Status map_kda(GgufHfMap& m, const KdaSizes& z, const std::string& b, const std::string& p) {
  const int64_t d = z.heads * z.dim;
  for (const char* x : {"q", "k", "v"}) {
    HYPIC_RETURN_IF_ERROR(m.alias(p + x + "_proj.weight", b + "attn_" + x + ".weight", {d, z.H}));
    // modify_tensors reshapes conv1d [d, 1, K] to (1, d, 1, K): the same elements.
    HYPIC_RETURN_IF_ERROR(m.alias(p + x + "_conv1d.weight", b + "ssm_conv1d_" + x + ".weight", {d, 1, z.K}));
  }
  HYPIC_RETURN_IF_ERROR(m.alias(p + "f_a_proj.weight", b + "ssm_f_a.weight", {z.dim, z.H}));
  HYPIC_RETURN_IF_ERROR(m.alias(p + "f_b_proj.weight", b + "ssm_f_b.weight", {d, z.dim}));
  HYPIC_RETURN_IF_ERROR(m.alias(p + "g_a_proj.weight", b + "ssm_g_a.weight", {z.dim, z.H}));
  HYPIC_RETURN_IF_ERROR(m.alias(p + "g_b_proj.weight", b + "ssm_g_b.weight", {d, z.dim}));
  HYPIC_RETURN_IF_ERROR(m.alias(p + "b_proj.weight", b + "ssm_beta.weight", {z.heads, z.H}));
  // modify_tensors stores A_log as ssm_a = −exp(A_log), and renames dt_bias to dt_proj.bias.
  HYPIC_RETURN_IF_ERROR(m.derive(p + "A_log", {b + "ssm_a"}, {1, 1, z.heads, 1}, [](const std::vector<Tensor>& in, Tensor& out) {
    for (int64_t i = 0; i < out.numel(); ++i) out.f32()[i] = std::log(-in[0].f32()[i]);
  }));
  HYPIC_RETURN_IF_ERROR(m.alias(p + "dt_bias", b + "ssm_dt.bias", {d}));
  HYPIC_RETURN_IF_ERROR(m.alias(p + "o_norm.weight", b + "ssm_norm.weight", {z.dim}));
  return m.alias(p + "o_proj.weight", b + "attn_output.weight", {z.H, d});
}

struct MlaSizes {
  int64_t heads, kv_lora, nope, v;
};

// modify_tensors splits kv_b_proj [heads·(nope + v), kv_lora] per head into k_b, stored
// transposed ([heads, kv_lora, nope]), and v_b ([heads, v, kv_lora]); joined back here. Files
// from before the split hold attn_kv_b as it was.
Status map_mla(GgufHfMap& m, const MlaSizes& z, const std::string& b, const std::string& p) {
  if (m.has(b + "attn_q_a.weight")) {
    HYPIC_RETURN_IF_ERROR(m.alias(p + "q_a_proj.weight", b + "attn_q_a.weight"));
    HYPIC_RETURN_IF_ERROR(m.alias(p + "q_a_layernorm.weight", b + "attn_q_a_norm.weight"));
    HYPIC_RETURN_IF_ERROR(m.alias(p + "q_b_proj.weight", b + "attn_q_b.weight"));
  } else {
    HYPIC_RETURN_IF_ERROR(m.alias(p + "q_proj.weight", b + "attn_q.weight"));
  }
  HYPIC_RETURN_IF_ERROR(m.alias(p + "kv_a_proj_with_mqa.weight", b + "attn_kv_a_mqa.weight"));
  HYPIC_RETURN_IF_ERROR(m.alias(p + "kv_a_layernorm.weight", b + "attn_kv_a_norm.weight"));
  const int64_t rows = z.nope + z.v, L = z.kv_lora;
  if (m.has(b + "attn_kv_b.weight")) {
    HYPIC_RETURN_IF_ERROR(m.alias(p + "kv_b_proj.weight", b + "attn_kv_b.weight", {z.heads * rows, L}));
  } else {
    HYPIC_RETURN_IF_ERROR(m.derive(p + "kv_b_proj.weight", {b + "attn_k_b.weight", b + "attn_v_b.weight"},
                                   {z.heads * rows, L}, [=](const std::vector<Tensor>& in, Tensor& out) {
      const float *kb = in[0].f32(), *vb = in[1].f32();
      float* o = out.f32();
      for (int64_t h = 0; h < z.heads; ++h) {
        for (int64_t i = 0; i < z.nope; ++i)
          for (int64_t c = 0; c < L; ++c) o[(h * rows + i) * L + c] = kb[(h * L + c) * z.nope + i];
        std::copy_n(vb + h * z.v * L, z.v * L, o + (h * rows + z.nope) * L);
      }
    }));
  }
  return m.alias(p + "o_proj.weight", b + "attn_output.weight");
}

// Experts stacked by modify_tensors (w1 gate, w2 down, w3 up).
Status map_moe(GgufHfMap& m, int64_t E, int64_t H, int64_t I, bool shared, const std::string& b,
               const std::string& p) {
  HYPIC_RETURN_IF_ERROR(m.alias(p + "gate.weight", b + "ffn_gate_inp.weight", {E, H}));
  HYPIC_RETURN_IF_ERROR(m.alias(p + "gate.e_score_correction_bias", b + "exp_probs_b.bias", {E}));
  HYPIC_RETURN_IF_ERROR(alias_stacked_experts(m, E, H, I, b, p, "w1.weight", "w3.weight", "w2.weight"));
  if (!shared) return Status::ok();
  for (const char* w : {"gate", "up", "down"})
    HYPIC_RETURN_IF_ERROR(m.alias(p + "shared_experts." + w + "_proj.weight", b + "ffn_" + w + "_shexp.weight"));
  return Status::ok();
}

}  // namespace

Status map_gguf_kimi(GgufHfMap& m, json& c) {
  HYPIC_ASSIGN_OR_RETURN(int64_t n_layer, m.need_int("block_count"));
  HYPIC_ASSIGN_OR_RETURN(int64_t H, m.need_int("embedding_length"));
  HYPIC_ASSIGN_OR_RETURN(Shape embd, m.shape("token_embd.weight"));
  HYPIC_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> kv_list, m.opt_int_list("attention.head_count_kv"));
  const std::vector<int64_t> kv = kv_list.value_or(std::vector<int64_t>{});
  HYPIC_ASSIGN_OR_RETURN(int64_t heads, m.need_int("attention.head_count"));
  KdaSizes k{H, heads, 0, 0};
  HYPIC_ASSIGN_OR_RETURN(k.dim, m.need_int("kda.head_dim"));
  HYPIC_ASSIGN_OR_RETURN(k.K, m.need_int("ssm.conv_kernel"));
  MlaSizes a{heads, 0, 0, 0};
  HYPIC_ASSIGN_OR_RETURN(a.kv_lora, m.need_int("attention.kv_lora_rank"));
  HYPIC_ASSIGN_OR_RETURN(int64_t rope, m.need_int("rope.dimension_count"));
  HYPIC_ASSIGN_OR_RETURN(int64_t qk, m.need_int("attention.key_length_mla"));
  HYPIC_ASSIGN_OR_RETURN(a.v, m.need_int("attention.value_length_mla"));
  a.nope = qk - rope;
  // head_count_kv per layer: 1 for MLA, 0 for KDA (the converter's layer map).
  if (n_layer <= 0 || embd.size() != 2 || embd[1] != H || int64_t(kv.size()) != n_layer || heads <= 0 ||
      k.dim <= 0 || a.nope <= 0 || a.v <= 0)
    return invalid_argument("'" + m.head().path() + "': inconsistent kimi-linear sizes (block_count " +
                            std::to_string(n_layer) + ", token_embd " + shape_str(embd) +
                            ", attention.head_count_kv " + std::to_string(kv.size()) + " per-layer entries" +
                            ", key_length_mla " + std::to_string(qk) + ", rope.dimension_count " + std::to_string(rope) + ")");

  c["model_type"] = "kimi_linear";
  c["architectures"] = {"KimiLinearForCausalLM"};
  c["hidden_size"] = H;
  c["num_hidden_layers"] = n_layer;
  c["vocab_size"] = embd[0];
  c["num_attention_heads"] = heads;
  c["num_key_value_heads"] = heads;
  HYPIC_ASSIGN_OR_RETURN(c["rms_norm_eps"], m.need_float("attention.layer_norm_rms_epsilon"));
  HYPIC_ASSIGN_OR_RETURN(std::optional<int64_t> ctx, m.opt_int("context_length"));
  if (ctx) c["model_max_length"] = *ctx;
  HYPIC_ASSIGN_OR_RETURN(std::optional<int64_t> q_lora, m.opt_int("attention.q_lora_rank"));
  c["q_lora_rank"] = q_lora ? json(*q_lora) : json(nullptr);
  c["kv_lora_rank"] = a.kv_lora;
  c["qk_nope_head_dim"] = a.nope;
  c["qk_rope_head_dim"] = rope;
  c["v_head_dim"] = a.v;
  std::vector<int64_t> full, kda;
  for (int64_t i = 0; i < n_layer; ++i) (kv[size_t(i)] ? full : kda).push_back(i + 1);
  c["linear_attn_config"] = {{"num_heads", heads}, {"head_dim", k.dim}, {"short_conv_kernel_size", k.K},
                             {"full_attn_layers", full}, {"kda_layers", kda}};

  HYPIC_ASSIGN_OR_RETURN(std::optional<int64_t> ff, m.opt_int("feed_forward_length"));
  if (ff) c["intermediate_size"] = *ff;
  HYPIC_ASSIGN_OR_RETURN(int64_t E, m.need_int("expert_count"));
  HYPIC_ASSIGN_OR_RETURN(int64_t I, m.need_int("expert_feed_forward_length"));
  HYPIC_ASSIGN_OR_RETURN(std::optional<int64_t> shared, m.opt_int("expert_shared_count"));
  HYPIC_ASSIGN_OR_RETURN(std::optional<int64_t> dense, m.opt_int("leading_dense_block_count"));
  HYPIC_ASSIGN_OR_RETURN(std::optional<double> scale, m.opt_float("expert_weights_scale"));
  HYPIC_ASSIGN_OR_RETURN(std::optional<int64_t> groups, m.opt_int("expert_group_count"));
  HYPIC_ASSIGN_OR_RETURN(std::optional<int64_t> groups_used, m.opt_int("expert_group_used_count"));
  c["num_experts"] = E;
  HYPIC_ASSIGN_OR_RETURN(c["num_experts_per_token"], m.need_int("expert_used_count"));
  c["moe_intermediate_size"] = I;
  c["num_shared_experts"] = shared.value_or(0);
  c["first_k_dense_replace"] = dense.value_or(0);
  c["routed_scaling_factor"] = scale.value_or(1.0);
  c["num_expert_group"] = groups.value_or(1);
  c["topk_group"] = groups ? groups_used.value_or(*groups) : 1;
  c["moe_renormalize"] = true;
  c["moe_router_activation_func"] = "sigmoid";
  c["tie_word_embeddings"] = !m.has("output.weight");
  HYPIC_RETURN_IF_ERROR(map_special_token_ids(m, c));

  HYPIC_RETURN_IF_ERROR(m.alias("model.embed_tokens.weight", "token_embd.weight"));
  HYPIC_RETURN_IF_ERROR(m.alias("model.norm.weight", "output_norm.weight"));
  if (m.has("output.weight")) HYPIC_RETURN_IF_ERROR(m.alias("lm_head.weight", "output.weight"));
  for (int64_t i = 0; i < n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".", p = "model.layers." + std::to_string(i) + ".";
    HYPIC_RETURN_IF_ERROR(m.alias(p + "input_layernorm.weight", b + "attn_norm.weight"));
    HYPIC_RETURN_IF_ERROR(m.alias(p + "post_attention_layernorm.weight", b + "ffn_norm.weight"));
    HYPIC_RETURN_IF_ERROR(kv[size_t(i)] ? map_mla(m, a, b, p + "self_attn.") : map_kda(m, k, b, p + "self_attn."));
    if (i < dense.value_or(0)) {
      for (const char* w : {"gate", "up", "down"})
        HYPIC_RETURN_IF_ERROR(m.alias(p + "mlp." + w + "_proj.weight", b + "ffn_" + w + ".weight"));
    } else {
      HYPIC_RETURN_IF_ERROR(map_moe(m, E, H, I, shared.value_or(0) > 0, b, p + "block_sparse_moe."));
    }
  }
  return Status::ok();
}

}  // namespace hypic
