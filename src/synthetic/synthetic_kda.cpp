// Synthetic Kimi-Linear-48B-A3B and Ling-3.0-Flash checkpoints (synthetic.h) in their released
// config keys and tensor names, at their real widths.
#include <algorithm>

#include "synthetic/synthetic_layout.h"

namespace hypic::synthetic {
namespace {

struct KdaMlaShape {
  bool kimi;  // Kimi-Linear (low-rank gates, NoPE MLA) or Ling-3.0 (full-rank, RoPE, head gate)
  int64_t hidden, vocab, heads, head_dim, group, dense_layers, dense_inter;
  int64_t experts, topk, moe_inter, n_group, topk_group;
  double scaling;
};

constexpr int64_t kKvLora = 512, kNope = 128, kRope = 64, kV = 128;

void add_kda(const KdaMlaShape& S, const std::string& a, std::vector<TensorSpec>* t) {
  const int64_t H = S.hidden, nh = S.heads, hd = S.head_dim, D = nh * hd;
  for (const char* n : {"q_proj", "k_proj", "v_proj"}) t->push_back({a + n + ".weight", {D, H}});
  for (const char* n : {"q_conv1d", "k_conv1d", "v_conv1d"})
    t->push_back({a + n + ".weight", {D, 1, 4}, 0.0f, 0.3f});
  if (S.kimi) {
    t->push_back({a + "f_a_proj.weight", {hd, H}});
    t->push_back({a + "f_b_proj.weight", {D, hd}});
    t->push_back({a + "g_a_proj.weight", {hd, H}});
    t->push_back({a + "g_b_proj.weight", {D, hd}});
    t->push_back({a + "A_log", {1, 1, nh, 1}, 1.0f, 0.5f});
  } else {
    t->push_back({a + "f_proj.weight", {D, H}});
    t->push_back({a + "g_proj.weight", {D, H}});
    t->push_back({a + "A_log", {nh}, 1.0f, 0.5f});
  }
  t->push_back({a + "dt_bias", {D}, -3.0f, 1.0f});
  t->push_back({a + "b_proj.weight", {nh, H}});
  t->push_back({a + "o_norm.weight", {hd}, 1.0f, 0.02f});
  t->push_back({a + (S.kimi ? "o_proj" : "dense") + ".weight", {H, D}});
}

void add_mla(const KdaMlaShape& S, const std::string& a, std::vector<TensorSpec>* t) {
  const int64_t H = S.hidden, nh = S.heads;
  t->push_back({a + "q_proj.weight", {nh * (kNope + kRope), H}});
  t->push_back({a + "kv_a_proj_with_mqa.weight", {kKvLora + kRope, H}});
  t->push_back({a + "kv_a_layernorm.weight", {kKvLora}, 1.0f, 0.02f});
  t->push_back({a + "kv_b_proj.weight", {nh * (kNope + kV), kKvLora}});
  if (!S.kimi) t->push_back({a + "g_proj.weight", {nh, H}});
  t->push_back({a + (S.kimi ? "o_proj" : "dense") + ".weight", {H, nh * kV}});
}

Result<Layout> kda_mla_layout(const KdaMlaShape& S, const SyntheticOptions& opt) {
  const int layers = opt.layers;
  HYPIC_ASSIGN_OR_RETURN(const int64_t experts, expert_count(opt, S.experts, S.topk));
  const int64_t n_group = experts % S.n_group == 0 ? S.n_group : 1;
  const int64_t topk_group = n_group == 1 ? 1 : S.topk_group;
  const int64_t group = std::min<int64_t>(S.group, layers);  // an MLA layer at any depth
  std::vector<bool> mla;
  for (int i = 0; i < layers; ++i) mla.push_back((i + 1) % group == 0);
  const int64_t H = S.hidden;
  Layout L;
  nlohmann::json c = {
      {"vocab_size", S.vocab}, {"hidden_size", H}, {"intermediate_size", S.dense_inter},
      {"moe_intermediate_size", S.moe_inter}, {"num_hidden_layers", layers},
      {"num_attention_heads", S.heads}, {"num_key_value_heads", S.heads},
      {"kv_lora_rank", kKvLora}, {"qk_nope_head_dim", kNope}, {"qk_rope_head_dim", kRope},
      {"v_head_dim", kV}, {"hidden_act", "silu"}, {"first_k_dense_replace", S.dense_layers},
      {"num_experts", experts}, {"num_experts_per_token", S.topk}, {"num_shared_experts", 1},
      {"num_expert_group", n_group}, {"topk_group", topk_group}, {"moe_renormalize", true},
      {"routed_scaling_factor", S.scaling}, {"tie_word_embeddings", false},
      {"torch_dtype", "bfloat16"}};
  if (S.kimi) {
    std::vector<int> kda, full;
    for (int i = 0; i < layers; ++i) (mla[size_t(i)] ? full : kda).push_back(i + 1);
    c.update({{"architectures", {"KimiLinearForCausalLM"}}, {"model_type", "kimi_linear"},
              {"linear_attn_config", {{"full_attn_layers", full}, {"kda_layers", kda},
                                      {"num_heads", S.heads}, {"head_dim", S.head_dim},
                                      {"short_conv_kernel_size", 4}}},
              {"mla_use_nope", true}, {"q_lora_rank", nullptr}, {"model_max_length", 1048576},
              {"moe_router_activation_func", "sigmoid"}, {"moe_layer_freq", 1},
              {"rms_norm_eps", 1e-5}, {"bos_token_id", 163584}, {"eos_token_id", 163586},
              {"pad_token_id", 163839}});
  } else {
    c.update({{"architectures", {"BailingHybridForCausalLM"}}, {"model_type", "bailing_hybrid"},
              {"head_dim", S.head_dim}, {"short_conv_kernel_size", 4},
              {"layer_group_size", group}, {"kda_safe_gate", true}, {"kda_lower_bound", -5.0},
              {"rope_theta", 6000000.0}, {"model_max_length", 262144},
              {"num_nextn_predict_layers", 0}, {"rms_norm_eps", 1e-6},
              {"eos_token_id", 156895}, {"pad_token_id", 156892}});
  }
  L.config = c;
  for (int i = 0; i < layers; ++i) {
    std::vector<TensorSpec> t;
    const std::string p = "model.layers." + std::to_string(i) + ".";
    t.push_back({p + "input_layernorm.weight", {H}, 1.0f, 0.02f});
    t.push_back({p + "post_attention_layernorm.weight", {H}, 1.0f, 0.02f});
    const std::string a = p + (S.kimi ? "self_attn." : "attention.");
    if (mla[size_t(i)]) add_mla(S, a, &t); else add_kda(S, a, &t);
    if (i < S.dense_layers) {
      for (const char* n : {"gate_proj", "up_proj"}) t.push_back({p + "mlp." + n + ".weight", {S.dense_inter, H}});
      t.push_back({p + "mlp.down_proj.weight", {H, S.dense_inter}});
    } else {
      const std::string m = p + (S.kimi ? "block_sparse_moe." : "mlp.");
      t.push_back({m + "gate.weight", {experts, H}});
      t.push_back({m + (S.kimi ? "gate.e_score_correction_bias" : "gate.expert_bias"), {experts}, 0.0f, 0.01f});
      for (int64_t e = 0; e < experts; ++e) {
        const std::string x = m + "experts." + std::to_string(e) + ".";
        t.push_back({x + (S.kimi ? "w1" : "gate_proj") + ".weight", {S.moe_inter, H}});
        t.push_back({x + (S.kimi ? "w3" : "up_proj") + ".weight", {S.moe_inter, H}});
        t.push_back({x + (S.kimi ? "w2" : "down_proj") + ".weight", {H, S.moe_inter}});
      }
      for (const char* n : {"gate_proj", "up_proj"})
        t.push_back({m + "shared_experts." + n + ".weight", {S.moe_inter, H}});
      t.push_back({m + "shared_experts.down_proj.weight", {H, S.moe_inter}});
    }
    L.layers.push_back(std::move(t));
  }
  L.globals = {{S.kimi ? "model.embed_tokens.weight" : "model.word_embeddings.weight", {S.vocab, H}},
               {"model.norm.weight", {H}, 1.0f, 0.02f},
               {"lm_head.weight", {S.vocab, H}}};
  return L;
}

}  // namespace

void add_kda_shapes(std::map<std::string, Builder>* m) {
  // Kimi-Linear-48B-A3B (its released config.json); Ling-3.0-Flash (transformers'
  // BailingHybridConfig defaults, which name it).
  const KdaMlaShape kimi = {true, 2304, 163840, 32, 128, 4, 1, 9216, 256, 8, 1024, 1, 1, 2.446};
  const KdaMlaShape ling = {false, 2560, 157184, 32, 128, 6, 2, 6144, 512, 8, 768, 8, 4, 2.5};
  (*m)["kimi-linear-48b-a3b"] = [kimi](const SyntheticOptions& o) { return kda_mla_layout(kimi, o); };
  (*m)["ling-3.0-flash"] = [ling](const SyntheticOptions& o) { return kda_mla_layout(ling, o); };
}

}  // namespace hypic::synthetic
