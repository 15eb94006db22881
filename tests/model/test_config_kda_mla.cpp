// config.json parsing for the KDA + MLA families: Kimi-Linear (kimi_linear, the released
// Kimi-Linear-48B-A3B config) and Ling-3.0 (bailing_hybrid, transformers' keys), with each
// kind of inconsistency.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/mixers/kda.h"
#include "model/mixers/mla.h"

namespace hypic {
namespace {

using json = nlohmann::json;

// moonshotai/Kimi-Linear-48B-A3B-Instruct config.json (without auto_map).
json kimi() {
  return json::parse(R"({
    "architectures": ["KimiLinearForCausalLM"], "model_type": "kimi_linear",
    "bos_token_id": 163584, "eos_token_id": 163586, "pad_token_id": 163839,
    "first_k_dense_replace": 1, "head_dim": 72, "hidden_act": "silu", "hidden_size": 2304,
    "initializer_range": 0.02, "intermediate_size": 9216, "kv_lora_rank": 512,
    "linear_attn_config": {"full_attn_layers": [4, 8, 12, 16, 20, 24, 27], "head_dim": 128,
      "kda_layers": [1, 2, 3, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 18, 19, 21, 22, 23, 25, 26],
      "num_heads": 32, "short_conv_kernel_size": 4},
    "mla_use_nope": true, "model_max_length": 1048576, "moe_intermediate_size": 1024,
    "moe_layer_freq": 1, "moe_renormalize": true, "moe_router_activation_func": "sigmoid",
    "num_attention_heads": 32, "num_expert_group": 1, "num_experts": 256,
    "num_experts_per_token": 8, "num_hidden_layers": 27, "num_key_value_heads": 32,
    "num_nextn_predict_layers": 0, "num_shared_experts": 1, "q_lora_rank": null,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "rms_norm_eps": 1e-05,
    "rope_scaling": null, "rope_theta": 10000.0, "routed_scaling_factor": 2.446,
    "tie_word_embeddings": false, "topk_group": 1, "torch_dtype": "bfloat16",
    "use_cache": true, "use_grouped_topk": true, "v_head_dim": 128, "vocab_size": 163840})");
}

// Ling-3.0-Flash as transformers' BailingHybridConfig describes it (its defaults).
json ling() {
  return json::parse(R"({
    "architectures": ["BailingHybridForCausalLM"], "model_type": "bailing_hybrid",
    "vocab_size": 157184, "hidden_size": 2560, "intermediate_size": 6144,
    "moe_intermediate_size": 768, "num_hidden_layers": 42, "num_attention_heads": 32,
    "num_key_value_heads": 32, "num_experts": 512, "num_experts_per_token": 8,
    "num_shared_experts": 1, "num_expert_group": 8, "topk_group": 4,
    "routed_scaling_factor": 2.5, "moe_renormalize": true, "first_k_dense_replace": 2,
    "hidden_act": "silu", "model_max_length": 262144, "rms_norm_eps": 1e-06,
    "pad_token_id": 156892, "eos_token_id": 156895, "tie_word_embeddings": false,
    "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "rope_theta": 6000000.0, "head_dim": 128, "short_conv_kernel_size": 4,
    "layer_group_size": 6, "kda_safe_gate": true, "kda_lower_bound": -5.0,
    "num_nextn_predict_layers": 1})");
}

Result<ModelConfig> parse(const json& j) { return ModelConfig::from_json(j.dump()); }

void expect_error(const json& j, StatusCode code, const std::string& needle) {
  auto r = parse(j);
  ASSERT_FALSE(r.is_ok()) << j.dump();
  EXPECT_EQ(r.status().code(), code) << r.status().message();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

TEST(KimiConfig, ReleasedConfigParses) {
  auto r = parse(kimi());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const ModelConfig& c = *r;
  EXPECT_STREQ(c.arch_name(), "Kimi-Linear");
  EXPECT_EQ(c.layer_pattern(), "LLLFLLLFLLLFLLLFLLLFLLLFLLF");
  EXPECT_EQ(c.layer(0).token, &kda_type());
  EXPECT_EQ(c.layer(26).token, &mla_type());
  EXPECT_EQ(c.linear.key_heads, 32);
  EXPECT_EQ(c.linear.key_head_dim, 128);  // linear_attn_config's, not the top-level 72
  EXPECT_TRUE(c.kda.low_rank_gates);
  EXPECT_FALSE(c.kda.safe_gate);
  EXPECT_EQ(c.mla.kv_lora_rank, 512);
  EXPECT_EQ(c.mla.q_lora_rank, 0);
  EXPECT_FALSE(c.mla.rope);
  EXPECT_FALSE(c.is_moe(0));
  EXPECT_TRUE(c.is_moe(1));
  EXPECT_EQ(c.moe.experts_per_tok, 8);
  EXPECT_DOUBLE_EQ(c.moe.routed_scaling_factor, 2.446);
  EXPECT_EQ(c.moe.shared_intermediate_size, 1024);
  EXPECT_EQ(c.max_position_embeddings, 1048576);
  // 48B parameters, 3B active (the model's name).
  EXPECT_NEAR(double(c.param_count()), 48.5e9, 1.5e9);
  EXPECT_NEAR(double(c.active_param_count()), 3.0e9, 0.5e9);
}

TEST(KimiConfig, InconsistentConfigsAreRejected) {
  json j = kimi();
  j["linear_attn_config"]["full_attn_layers"] = {4, 8, 12, 16, 20, 24, 28};
  expect_error(j, StatusCode::kInvalidArgument, "names layer 28");
  j = kimi();
  j["linear_attn_config"]["kda_layers"].erase(0);
  expect_error(j, StatusCode::kInvalidArgument, "lists layer 1 in neither");
  j = kimi();
  j["mla_use_nope"] = false;
  expect_error(j, StatusCode::kUnsupported, "mla_use_nope");
  j = kimi();
  j["linear_attn_config"] = 3;
  expect_error(j, StatusCode::kInvalidArgument, "'linear_attn_config' must be an object, got 3");
  j = kimi();
  j["linear_attn_config"]["use_rope"] = true;  // RoPE inside KDA: no exact re-rotation
  expect_error(j, StatusCode::kUnsupported, "linear_attn_config.use_rope");
  j = kimi();
  j["linear_rope"] = true;
  expect_error(j, StatusCode::kUnsupported, "'linear_rope' asks for RoPE in the KDA layers");
  j = kimi();
  j["linear_attn_config"]["use_rope"] = false;  // saying no is fine
  EXPECT_TRUE(parse(j).is_ok());
  j = kimi();
  j["moe_router_activation_func"] = "softmax";
  expect_error(j, StatusCode::kUnsupported, "moe_router_activation_func");
  j = kimi();
  j["num_expert_group"] = 3;  // does not divide 256 experts
  expect_error(j, StatusCode::kInvalidArgument, "n_group");
  j = kimi();
  j["qk_rope_head_dim"] = 63;
  expect_error(j, StatusCode::kInvalidArgument, "qk_rope_head_dim");
  j = kimi();
  j["mlp_layer_types"] = {"dense"};
  expect_error(j, StatusCode::kInvalidArgument, "mlp_layer_types lists 1");
}

TEST(LingConfig, ParsesWithMtpAndSafeGate) {
  auto r = parse(ling());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const ModelConfig& c = *r;
  EXPECT_STREQ(c.arch_name(), "Ling-3.0");
  EXPECT_EQ(c.layer_pattern(), "LLLLLF×7");
  EXPECT_TRUE(c.kda.safe_gate);
  EXPECT_DOUBLE_EQ(c.kda.lower_bound, -5.0);
  EXPECT_FALSE(c.kda.low_rank_gates);
  EXPECT_TRUE(c.mla.rope);
  EXPECT_TRUE(c.mla.head_gate);
  EXPECT_DOUBLE_EQ(c.rope_theta, 6e6);
  EXPECT_EQ(c.trailing_mtp_layers, 1);
  EXPECT_FALSE(c.is_moe(1));
  EXPECT_TRUE(c.is_moe(2));
  EXPECT_EQ(c.moe.router_groups, 8);
  EXPECT_EQ(c.moe.router_topk_groups, 4);
}

// transformers 5.25's BailingHybrid: q through q_a_proj / q_a_layernorm / q_b_proj when
// q_lora_rank is set; per-layer SwiGLU limits of the routed and shared experts.
TEST(LingConfig, LowRankQAndSwigluLimits) {
  json j = ling();
  j["q_lora_rank"] = 64;
  const int n = j["num_hidden_layers"].get<int>();
  std::vector<double> lim(size_t(n), 0.0), shared(size_t(n), 0.0);
  lim[2] = 7.0;
  shared[3] = 5.5;
  j["expert_swiglu_limit_list"] = lim;
  j["share_expert_swiglu_limit_list"] = shared;
  auto c = ModelConfig::from_json(j.dump());
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->mla.q_lora_rank, 64);
  EXPECT_EQ(c->moe.swiglu_limits, lim);
  EXPECT_EQ(c->moe.swiglu_limits_shared, shared);
}

TEST(LingConfig, InconsistentConfigsAreRejected) {
  json j = ling();
  j["kda_lower_bound"] = 1.0;
  expect_error(j, StatusCode::kInvalidArgument, "kda_lower_bound");
  j = ling();
  j["rope_parameters"] = "6e6";
  expect_error(j, StatusCode::kInvalidArgument, "'rope_parameters' must be an object");
  j = ling();
  j["linear_rope"] = true;
  expect_error(j, StatusCode::kUnsupported, "'linear_rope' asks for RoPE in the KDA layers");
  j = ling();
  j["attention_bias"] = true;
  expect_error(j, StatusCode::kUnsupported, "'attention_bias' is true");
  j = ling();
  j["expert_swiglu_limit_list"] = {7.0, 0.0};
  expect_error(j, StatusCode::kInvalidArgument, "'expert_swiglu_limit_list' has 2 limits");
  j = ling();
  j["share_expert_swiglu_limit_list"] = "7";
  expect_error(j, StatusCode::kInvalidArgument, "share_expert_swiglu_limit_list");
  j = ling();
  j["rope_scaling"] = {{"type", "yarn"}};
  expect_error(j, StatusCode::kUnsupported, "RoPE scaling");
  j = ling();
  j["layer_group_size"] = 0;
  expect_error(j, StatusCode::kInvalidArgument, "layer_group_size");
  j = ling();
  j["layer_types"] = {"linear_attention", "sliding_attention"};
  expect_error(j, StatusCode::kInvalidArgument, "layer_types lists 2");
}

}  // namespace
}  // namespace hypic
