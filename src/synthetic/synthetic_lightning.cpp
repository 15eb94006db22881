// Synthetic Ring-linear-2.0 and MiniMax-M1 checkpoints (synthetic.h) in their published
// config keys and tensor names, at their real widths.
#include <algorithm>

#include "synthetic/synthetic_layout.h"

namespace hypic::synthetic {
namespace {

// Ring-mini-linear-2.0's config.json; Ring-flash-linear-2.0 at Ling-flash-2.0's widths with
// its 7 Lightning : 1 softmax grouping (28 of 32 layers linear).
struct RingShape {
  int64_t hidden, heads, kv_heads, head_dim, group, norm_groups, dense_inter;
  int64_t experts, topk, moe_inter, n_group, topk_group;
};

Result<Layout> ring_layout(const RingShape& S, const SyntheticOptions& opt) {
  const int layers = opt.layers;
  HYPIC_ASSIGN_OR_RETURN(const int64_t experts, expert_count(opt, S.experts, S.topk));
  const int64_t group = std::min<int64_t>(S.group, layers);  // a whole group at this depth
  const int64_t n_group = experts % S.n_group == 0 ? S.n_group : 1;
  const int64_t H = S.hidden, V = 157184, D = S.heads * S.head_dim;
  Layout L;
  L.config = {{"architectures", {"BailingMoeLinearV2ForCausalLM"}},
              {"model_type", "bailing_moe_linear"}, {"vocab_size", V}, {"hidden_size", H},
              {"intermediate_size", S.dense_inter}, {"num_hidden_layers", layers},
              {"num_attention_heads", S.heads}, {"num_key_value_heads", S.kv_heads},
              {"head_dim", S.head_dim}, {"hidden_act", "silu"},
              {"max_position_embeddings", 131072}, {"rms_norm_eps", 1e-6},
              {"rope_theta", 1000000}, {"rope_scaling", nullptr},
              {"partial_rotary_factor", 0.5}, {"layer_group_size", group},
              {"group_norm_size", S.norm_groups}, {"linear_silu", false},
              {"use_qk_norm", true}, {"use_bias", false}, {"use_qkv_bias", false},
              {"first_k_dense_replace", 1}, {"num_experts", experts},
              {"num_experts_per_tok", S.topk}, {"num_shared_experts", 1},
              {"moe_intermediate_size", S.moe_inter},
              {"moe_shared_expert_intermediate_size", S.moe_inter},
              {"moe_router_enable_expert_bias", true}, {"n_group", n_group},
              {"topk_group", n_group == 1 ? 1 : S.topk_group}, {"norm_topk_prob", true},
              {"routed_scaling_factor", 2.5}, {"score_function", "sigmoid"},
              {"router_dtype", "fp32"}, {"tie_word_embeddings", false},
              {"eos_token_id", 156892}, {"pad_token_id", 156892},
              {"num_nextn_predict_layers", 0}, {"torch_dtype", "bfloat16"}};
  for (int i = 0; i < layers; ++i) {
    std::vector<TensorSpec> t;
    const std::string p = "model.layers." + std::to_string(i) + ".";
    t.push_back({p + "input_layernorm.weight", {H}, 1.0f, 0.02f});
    t.push_back({p + "post_attention_layernorm.weight", {H}, 1.0f, 0.02f});
    const std::string a = p + "attention.";
    const bool attention = (i + 1) % group == 0 || i >= (layers / group) * group;
    const int64_t qkv_rows = attention ? D + 2 * S.kv_heads * S.head_dim : 3 * D;
    t.push_back({a + "query_key_value.weight", {qkv_rows, H}});
    t.push_back({a + "query_layernorm.weight", {S.head_dim}, 1.0f, 0.02f});
    t.push_back({a + "key_layernorm.weight", {S.head_dim}, 1.0f, 0.02f});
    if (!attention) {
      t.push_back({a + "g_proj.weight", {D, H}});
      t.push_back({a + "g_norm.weight", {D}, 1.0f, 0.02f});
    }
    t.push_back({a + "dense.weight", {H, D}});
    const std::string m = p + "mlp.";
    if (i < 1) {
      for (const char* w : {"gate_proj", "up_proj"}) t.push_back({m + w + ".weight", {S.dense_inter, H}});
      t.push_back({m + "down_proj.weight", {H, S.dense_inter}});
    } else {
      t.push_back({m + "gate.weight", {experts, H}});
      t.push_back({m + "gate.expert_bias", {experts}, 0.0f, 0.01f});
      for (int64_t e = 0; e < experts; ++e) {
        const std::string x = m + "experts." + std::to_string(e) + ".";
        t.push_back({x + "gate_proj.weight", {S.moe_inter, H}});
        t.push_back({x + "up_proj.weight", {S.moe_inter, H}});
        t.push_back({x + "down_proj.weight", {H, S.moe_inter}});
      }
      for (const char* w : {"gate_proj", "up_proj"})
        t.push_back({m + "shared_experts." + w + ".weight", {S.moe_inter, H}});
      t.push_back({m + "shared_experts.down_proj.weight", {H, S.moe_inter}});
    }
    L.layers.push_back(std::move(t));
  }
  L.globals = {{"model.word_embeddings.weight", {V, H}},
               {"model.norm.weight", {H}, 1.0f, 0.02f},
               {"lm_head.weight", {V, H}}};
  return L;
}

// MiniMax-M1 (MiniMaxAI/MiniMax-M1-80k's config.json, original format): 80 layers of
// which every 8th is softmax attention; 32 experts, top-2.
Result<Layout> minimax_m1_layout(const SyntheticOptions& opt) {
  const int layers = opt.layers;
  HYPIC_ASSIGN_OR_RETURN(const int64_t experts, expert_count(opt, 32, 2));
  const int64_t H = 6144, V = 200064, nh = 64, nkv = 8, hd = 128, I = 9216, D = nh * hd;
  const double alpha = 3.5565588200778455;  // (2·80)^(1/4): the published factor
  std::vector<int> types;
  for (int i = 0; i < layers; ++i)
    types.push_back((i + 1) % 8 == 0 || (layers < 8 && i + 1 == layers) ? 1 : 0);
  Layout L;
  L.config = {{"architectures", {"MiniMaxM1ForCausalLM"}}, {"model_type", "minimax_m1"},
              {"attn_type_list", types}, {"hidden_size", H}, {"intermediate_size", I},
              {"num_hidden_layers", layers}, {"num_attention_heads", nh},
              {"num_key_value_heads", nkv}, {"head_dim", hd}, {"rotary_dim", 64},
              {"rope_theta", 10000000}, {"hidden_act", "silu"},
              {"max_position_embeddings", 10240000}, {"rms_norm_eps", 1e-5},
              {"num_local_experts", experts}, {"num_experts_per_tok", 2},
              {"shared_intermediate_size", 0}, {"postnorm", true},
              {"layernorm_full_attention_alpha", alpha}, {"layernorm_full_attention_beta", 1.0},
              {"layernorm_linear_attention_alpha", alpha},
              {"layernorm_linear_attention_beta", 1.0}, {"layernorm_mlp_alpha", alpha},
              {"layernorm_mlp_beta", 1.0}, {"block_size", 256}, {"vocab_size", V},
              {"tie_word_embeddings", false}, {"bos_token_id", 200034},
              {"eos_token_id", 200020}, {"torch_dtype", "bfloat16"}};
  for (int i = 0; i < layers; ++i) {
    std::vector<TensorSpec> t;
    const std::string p = "model.layers." + std::to_string(i) + ".";
    t.push_back({p + "input_layernorm.weight", {H}, 1.0f, 0.02f});
    t.push_back({p + "post_attention_layernorm.weight", {H}, 1.0f, 0.02f});
    const std::string a = p + "self_attn.";
    if (types[size_t(i)] == 0) {
      t.push_back({a + "qkv_proj.weight", {3 * D, H}});
      t.push_back({a + "output_gate.weight", {D, H}});
      t.push_back({a + "norm.weight", {D}, 1.0f, 0.02f});
      t.push_back({a + "out_proj.weight", {H, D}});
    } else {
      t.push_back({a + "q_proj.weight", {D, H}});
      t.push_back({a + "k_proj.weight", {nkv * hd, H}});
      t.push_back({a + "v_proj.weight", {nkv * hd, H}});
      t.push_back({a + "o_proj.weight", {H, D}});
    }
    const std::string m = p + "block_sparse_moe.";
    t.push_back({m + "gate.weight", {experts, H}});
    for (int64_t e = 0; e < experts; ++e) {
      const std::string x = m + "experts." + std::to_string(e) + ".";
      t.push_back({x + "w1.weight", {I, H}});
      t.push_back({x + "w3.weight", {I, H}});
      t.push_back({x + "w2.weight", {H, I}});
    }
    L.layers.push_back(std::move(t));
  }
  L.globals = {{"model.embed_tokens.weight", {V, H}},
               {"model.norm.weight", {H}, 1.0f, 0.02f},
               {"lm_head.weight", {V, H}}};
  return L;
}

}  // namespace

void add_lightning_shapes(std::map<std::string, Builder>* m) {
  const RingShape mini = {2048, 16, 4, 128, 5, 4, 5120, 256, 8, 512, 8, 4};
  const RingShape flash = {4096, 32, 4, 128, 8, 8, 9216, 256, 8, 1024, 8, 4};
  (*m)["ring-mini-linear-2.0"] = [mini](const SyntheticOptions& o) { return ring_layout(mini, o); };
  (*m)["ring-flash-linear-2.0"] = [flash](const SyntheticOptions& o) { return ring_layout(flash, o); };
  (*m)["minimax-m1"] = minimax_m1_layout;
}

}  // namespace hypic::synthetic
