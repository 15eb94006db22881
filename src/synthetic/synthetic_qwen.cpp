// Synthetic Qwen3-Next / Qwen3.5 checkpoints (synthetic.h): 3 Gated DeltaNet : 1 gated
// attention, the real widths.
#include "synthetic/synthetic_layout.h"

namespace hypic::synthetic {
namespace {

struct QwenShape {
  std::string model_type;  // config model_type
  int64_t hidden, vocab, heads, kv_heads, head_dim, nk, nv, dk, dv;
  int64_t experts, topk, moe_inter, shared_inter, dense_inter;
  bool tie;
};

Result<Layout> qwen_layout(const QwenShape& S, const SyntheticOptions& opt) {
  const int layers = opt.layers;
  HYPIC_ASSIGN_OR_RETURN(const int64_t experts,
                         S.experts > 0 ? expert_count(opt, S.experts, S.topk) : Result<int64_t>(0));
  const bool vl = S.model_type != "qwen3_next";
  const std::string P = vl ? "model.language_model." : "model.";
  std::vector<std::string> layer_types;
  for (int i = 0; i < layers; ++i)
    layer_types.push_back((i + 1) % 4 == 0 ? "full_attention" : "linear_attention");
  nlohmann::json text = {
      {"vocab_size", S.vocab}, {"hidden_size", S.hidden}, {"num_hidden_layers", layers},
      {"num_attention_heads", S.heads}, {"num_key_value_heads", S.kv_heads},
      {"head_dim", S.head_dim}, {"linear_num_key_heads", S.nk},
      {"linear_num_value_heads", S.nv}, {"linear_key_head_dim", S.dk},
      {"linear_value_head_dim", S.dv}, {"linear_conv_kernel_dim", 4},
      {"layer_types", layer_types}, {"full_attention_interval", 4},
      {"rms_norm_eps", 1e-6}, {"max_position_embeddings", 262144}, {"hidden_act", "silu"},
      {"attention_bias", false}, {"tie_word_embeddings", S.tie},
      {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 10000000.0},
                           {"partial_rotary_factor", 0.25}}},
      {"eos_token_id", 248046}, {"dtype", "bfloat16"}};
  if (experts > 0) {
    text["num_experts"] = experts;
    text["num_experts_per_tok"] = S.topk;
    text["moe_intermediate_size"] = S.moe_inter;
    text["shared_expert_intermediate_size"] = S.shared_inter;
    text["norm_topk_prob"] = true;
    text["decoder_sparse_step"] = 1;
    text["mlp_only_layers"] = nlohmann::json::array();
  }
  if (S.dense_inter > 0) text["intermediate_size"] = S.dense_inter;
  Layout L;
  if (vl) {
    text["model_type"] = S.model_type + "_text";
    const char* cls = S.model_type == "qwen3_5_moe" ? "Qwen3_5MoeForConditionalGeneration"
                                                    : "Qwen3_5ForConditionalGeneration";
    L.config = {{"model_type", S.model_type}, {"architectures", {cls}}, {"text_config", text},
                {"tie_word_embeddings", S.tie}};
  } else {
    L.config = text;
    L.config["model_type"] = S.model_type;
    L.config["architectures"] = {"Qwen3NextForCausalLM"};
  }
  const int64_t H = S.hidden, kd = S.nk * S.dk, vd = S.nv * S.dv;
  for (int k = 0; k < layers; ++k) {
    std::vector<TensorSpec> t;
    auto add = [&](const std::string& name, Shape s, float mean = 0.0f, float sd = 0.02f) {
      t.push_back({name, std::move(s), mean, sd});
    };
    const std::string p = P + "layers." + std::to_string(k) + ".";
    add(p + "input_layernorm.weight", {H});
    add(p + "post_attention_layernorm.weight", {H});
    if (layer_types[size_t(k)] == "linear_attention") {
      const std::string q = p + "linear_attn.";
      if (vl) {
        add(q + "in_proj_qkv.weight", {2 * kd + vd, H});
        add(q + "in_proj_z.weight", {vd, H});
        add(q + "in_proj_b.weight", {S.nv, H});
        add(q + "in_proj_a.weight", {S.nv, H});
      } else {
        add(q + "in_proj_qkvz.weight", {2 * kd + 2 * vd, H});
        add(q + "in_proj_ba.weight", {2 * S.nv, H});
      }
      add(q + "conv1d.weight", {2 * kd + vd, 1, 4}, 0.0f, 0.3f);
      add(q + "A_log", {S.nv}, 0.5f, 0.5f);
      add(q + "dt_bias", {S.nv}, 1.0f, 0.2f);
      add(q + "norm.weight", {S.dv}, 1.0f, 0.02f);
      add(q + "out_proj.weight", {H, vd});
    } else {
      const std::string q = p + "self_attn.";
      add(q + "q_proj.weight", {S.heads * 2 * S.head_dim, H});
      add(q + "k_proj.weight", {S.kv_heads * S.head_dim, H});
      add(q + "v_proj.weight", {S.kv_heads * S.head_dim, H});
      add(q + "o_proj.weight", {H, S.heads * S.head_dim});
      add(q + "q_norm.weight", {S.head_dim});
      add(q + "k_norm.weight", {S.head_dim});
    }
    const std::string m = p + "mlp.";
    if (experts > 0) {
      add(m + "gate.weight", {experts, H});
      for (int64_t e = 0; e < experts; ++e) {
        const std::string x = m + "experts." + std::to_string(e) + ".";
        add(x + "gate_proj.weight", {S.moe_inter, H});
        add(x + "up_proj.weight", {S.moe_inter, H});
        add(x + "down_proj.weight", {H, S.moe_inter});
      }
      add(m + "shared_expert.gate_proj.weight", {S.shared_inter, H});
      add(m + "shared_expert.up_proj.weight", {S.shared_inter, H});
      add(m + "shared_expert.down_proj.weight", {H, S.shared_inter});
      add(m + "shared_expert_gate.weight", {1, H});
    } else {
      add(m + "gate_proj.weight", {S.dense_inter, H});
      add(m + "up_proj.weight", {S.dense_inter, H});
      add(m + "down_proj.weight", {H, S.dense_inter});
    }
    L.layers.push_back(std::move(t));
  }
  L.globals.push_back({P + "embed_tokens.weight", {S.vocab, H}});
  L.globals.push_back({P + "norm.weight", {H}, 0.0f, 0.02f});
  if (!S.tie) L.globals.push_back({"lm_head.weight", {S.vocab, H}});
  return L;
}

}  // namespace

void add_qwen_shapes(std::map<std::string, Builder>* m) {
  const std::pair<const char*, QwenShape> shapes[] = {
      {"qwen3.5-35b-a3b", {"qwen3_5_moe", 2048, 248320, 16, 2, 256, 16, 32, 128, 128, 256, 8, 512, 512, 0, false}},
      {"qwen3-next-80b-a3b", {"qwen3_next", 2048, 151936, 16, 2, 256, 16, 32, 128, 128, 512, 10, 512, 512, 5120, false}},
      {"qwen3.5-27b", {"qwen3_5", 5120, 248320, 24, 4, 256, 16, 48, 128, 128, 0, 0, 0, 0, 17408, false}},
      // Not a released model: Qwen3.5's dense layout and head widths at hidden 1024, small
      // enough for several processes on one small machine (cluster benchmarks).
      {"qwen3.5-h1024", {"qwen3_5", 1024, 248320, 8, 2, 256, 8, 16, 128, 128, 0, 0, 0, 0, 3072, true}},
  };
  for (const auto& [name, s] : shapes)
    (*m)[name] = [s = s](const SyntheticOptions& o) { return qwen_layout(s, o); };
}

}  // namespace hypic::synthetic
