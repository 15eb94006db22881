// config.json parsing for the Lightning families: Ring-linear-2.0 (bailing_moe_linear) and
// MiniMax (transformers' minimax, the original minimax_m1 / minimax_text_01), with their
// published configs and each kind of inconsistency.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/mixers/lightning.h"

namespace hypic {
namespace {

using json = nlohmann::json;

// inclusionAI/Ring-mini-linear-2.0 config.json (without its auto_map).
json ring_mini() {
  return json::parse(R"({
    "architectures": ["BailingMoeLinearV2ForCausalLM"], "attention_dropout": 0.0,
    "embedding_dropout": 0.0, "eos_token_id": 156892, "first_k_dense_replace": 1,
    "group_norm_size": 4, "head_dim": 128, "hidden_act": "silu", "hidden_size": 2048,
    "intermediate_size": 5120, "layer_group_size": 5, "linear_silu": false,
    "max_position_embeddings": 131072, "model_type": "bailing_moe_linear",
    "moe_intermediate_size": 512, "moe_router_enable_expert_bias": true,
    "moe_shared_expert_intermediate_size": 512, "n_group": 8, "norm_topk_prob": true,
    "num_attention_heads": 16, "num_experts": 256, "num_experts_per_tok": 8,
    "num_hidden_layers": 20, "num_key_value_heads": 4, "num_nextn_predict_layers": 0,
    "num_shared_experts": 1, "output_dropout": 0.0, "pad_token_id": 156892,
    "partial_rotary_factor": 0.5, "rms_norm_eps": 1e-06, "rope_scaling": null,
    "rope_theta": 1000000, "routed_scaling_factor": 2.5, "router_dtype": "fp32",
    "score_function": "sigmoid", "tie_word_embeddings": false, "topk_group": 4,
    "torch_dtype": "bfloat16", "transformers_version": "4.56.1", "use_bias": false,
    "use_cache": true, "use_qk_norm": true, "use_qkv_bias": false, "use_rmsnorm": true,
    "vocab_size": 157184})");
}

// MiniMaxAI/MiniMax-M1-80k config.json, shortened to 8 layers (original format).
json minimax_m1() {
  return json::parse(R"({
    "architectures": ["MiniMaxM1ForCausalLM"], "attn_type_list": [0, 0, 0, 0, 0, 0, 0, 1],
    "bos_token_id": null, "eos_token_id": null, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 6144, "intermediate_size": 9216,
    "layernorm_full_attention_alpha": 3.5565588200778455, "layernorm_full_attention_beta": 1.0,
    "layernorm_linear_attention_alpha": 3.5565588200778455,
    "layernorm_linear_attention_beta": 1.0, "layernorm_mlp_alpha": 3.5565588200778455,
    "layernorm_mlp_beta": 1.0, "max_position_embeddings": 10240000, "model_type": "minimax_m1",
    "num_attention_heads": 64, "num_experts_per_tok": 2, "num_hidden_layers": 8,
    "num_key_value_heads": 8, "num_local_experts": 32, "postnorm": true,
    "rms_norm_eps": 1e-05, "rope_theta": 10000000, "rotary_dim": 64,
    "shared_intermediate_size": 0, "shared_moe_mode": "sigmoid", "sliding_window": null,
    "tie_word_embeddings": false, "vocab_size": 200064})");
}

Result<ModelConfig> parse(const json& j) { return ModelConfig::from_json(j.dump()); }

void expect_error(const json& j, StatusCode code, const std::string& needle) {
  auto r = parse(j);
  ASSERT_FALSE(r.is_ok()) << j.dump();
  EXPECT_EQ(r.status().code(), code) << r.status().message();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

TEST(RingConfig, RingMiniParses) {
  auto r = parse(ring_mini());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const ModelConfig& c = *r;
  EXPECT_STREQ(c.arch_name(), "Ring-linear");
  EXPECT_EQ(c.layer_pattern(), "LLLLF×4");
  EXPECT_FALSE(c.zero_centred_norms);
  EXPECT_EQ(c.rotary_dim(), 64);
  EXPECT_EQ(c.lightning.heads, 16);
  EXPECT_EQ(c.lightning.head_dim, 128);
  EXPECT_EQ(c.lightning.rotary_dim, 64);
  EXPECT_EQ(c.lightning.norm_groups, 4);
  EXPECT_TRUE(c.lightning.qk_norm);
  EXPECT_TRUE(c.lightning.scale_q);
  EXPECT_FALSE(c.lightning.silu_qkv);
  EXPECT_FALSE(c.is_moe(0));
  for (int i = 1; i < 20; ++i) EXPECT_TRUE(c.is_moe(i)) << i;
  EXPECT_TRUE(c.moe.router_sigmoid);
  EXPECT_TRUE(c.moe.router_bias);
  EXPECT_EQ(c.moe.router_groups, 8);
  EXPECT_EQ(c.moe.router_topk_groups, 4);
  EXPECT_DOUBLE_EQ(c.moe.routed_scaling_factor, 2.5);
  EXPECT_EQ(c.moe.shared_intermediate_size, 512);
  EXPECT_FALSE(c.moe.shared_gated);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{156892});
  // 16.4B parameters in total, about 1B active (the model card's figures: 16.4B, 957M
  // without the embeddings).
  EXPECT_NEAR(double(c.param_count()), 16.4e9, 0.3e9);
  EXPECT_NE(c.summary().find("16 Lightning (L) + 4 attention (F)"), std::string::npos)
      << c.summary();
}

TEST(RingConfig, TrailingLayersAfterTheLastGroupAreAttention) {
  json j = ring_mini();
  j["num_hidden_layers"] = 7;
  j["layer_group_size"] = 3;
  auto r = parse(j);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->layer_pattern(), "LLFLLFF");
  j["num_hidden_layers"] = 2;  // shorter than one group: all attention
  EXPECT_EQ(parse(j)->layer_pattern(), "F×2");
}

TEST(RingConfig, RotaryDimAndLinearOptions) {
  json j = ring_mini();
  j["rotary_dim"] = 32;
  j["linear_silu"] = true;
  j["use_qk_norm"] = false;
  auto r = parse(j);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->rotary_dim(), 32);
  EXPECT_EQ(r->lightning.rotary_dim, 32);
  EXPECT_TRUE(r->lightning.silu_qkv);
  EXPECT_FALSE(r->lightning.qk_norm);
  EXPECT_FALSE(r->attn_qk_norm);
  j["linear_rope"] = false;
  EXPECT_EQ(parse(j)->lightning.rotary_dim, 0);
}

TEST(RingConfig, InconsistentConfigsAreRejected) {
  json j = ring_mini();
  j["use_bias"] = true;
  expect_error(j, StatusCode::kUnsupported, "use_bias");
  j = ring_mini();
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}};
  expect_error(j, StatusCode::kUnsupported, "rope_scaling");
  j = ring_mini();
  j["group_norm_size"] = 3;  // 16·128 = 2048 channels do not split into 3 groups
  expect_error(j, StatusCode::kInvalidArgument, "groups must divide");
  j = ring_mini();
  j["score_function"] = "softmax";  // with the expert bias on
  expect_error(j, StatusCode::kInvalidArgument, "moe_router_enable_expert_bias");
  j = ring_mini();
  j["n_group"] = 7;
  expect_error(j, StatusCode::kInvalidArgument, "n_group");
  j = ring_mini();
  j["layer_group_size"] = 0;
  expect_error(j, StatusCode::kInvalidArgument, "layer_group_size");
  j = ring_mini();
  j["rotary_dim"] = 130;
  expect_error(j, StatusCode::kInvalidArgument, "rotate");
  j = ring_mini();
  j["architectures"] = {"MiniMaxForCausalLM"};
  expect_error(j, StatusCode::kInvalidArgument, "contradicts itself");
}

TEST(MiniMaxConfig, OriginalFormatParses) {
  auto r = parse(minimax_m1());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const ModelConfig& c = *r;
  EXPECT_STREQ(c.arch_name(), "MiniMax");
  EXPECT_EQ(c.layer_pattern(), "LLLLLLLF");
  EXPECT_EQ(c.rotary_dim(), 64);
  EXPECT_EQ(c.lightning.rotary_dim, 0);
  EXPECT_TRUE(c.lightning.silu_qkv);
  EXPECT_FALSE(c.lightning.scale_q);
  EXPECT_EQ(c.lightning.norm_groups, 1);
  EXPECT_FALSE(c.attn_qk_norm);
  EXPECT_TRUE(c.residual.from_norm);
  EXPECT_DOUBLE_EQ(c.residual.linear_attn_alpha, 3.5565588200778455);
  EXPECT_DOUBLE_EQ(c.residual.mlp_beta, 1.0);
  EXPECT_EQ(c.moe.experts, 32);
  EXPECT_EQ(c.moe.intermediate_size, 9216);
  EXPECT_TRUE(c.moe.norm_topk_prob);
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(c.is_moe(i));
}

TEST(MiniMaxConfig, TransformersFormatParses) {
  json j = {{"model_type", "minimax"}, {"architectures", {"MiniMaxForCausalLM"}},
            {"vocab_size", 512}, {"hidden_size", 64}, {"num_hidden_layers", 4},
            {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 16},
            {"intermediate_size", 32}, {"num_local_experts", 8}, {"num_experts_per_tok", 2},
            {"layer_types", {"linear_attention", "full_attention", "linear_attention",
                             "full_attention"}},
            {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 1e6}}},
            {"full_attn_alpha_factor", 1.5}, {"mlp_beta_factor", 0.8}};
  auto r = parse(j);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->layer_pattern(), "LF×2");
  EXPECT_EQ(r->rotary_dim(), 16);  // transformers rotates the whole head
  EXPECT_DOUBLE_EQ(r->rope_theta, 1e6);
  EXPECT_TRUE(r->residual.from_norm);
  EXPECT_DOUBLE_EQ(r->residual.full_attn_alpha, 1.5);
  EXPECT_DOUBLE_EQ(r->residual.mlp_beta, 0.8);
  EXPECT_DOUBLE_EQ(r->residual.linear_attn_beta, 1.0);
  j.erase("layer_types");  // transformers' default: softmax on even layers
  EXPECT_EQ(parse(j)->layer_pattern(), "FL×2");
}

TEST(MiniMaxConfig, InconsistentConfigsAreRejected) {
  json j = minimax_m1();
  j["attn_type_list"] = {0, 1};
  expect_error(j, StatusCode::kInvalidArgument, "attn_type_list lists 2 layers");
  j = minimax_m1();
  j["attn_type_list"][3] = 2;
  expect_error(j, StatusCode::kInvalidArgument, "attn_type_list holds 2");
  j = minimax_m1();
  j.erase("attn_type_list");
  expect_error(j, StatusCode::kInvalidArgument, "attn_type_list");
  j = minimax_m1();
  j["shared_intermediate_size"] = 512;
  expect_error(j, StatusCode::kUnsupported, "shared_intermediate_size");
  j = minimax_m1();
  j["sliding_window"] = 4096;
  expect_error(j, StatusCode::kUnsupported, "sliding_window");
  j = minimax_m1();
  j["num_experts_per_tok"] = 40;
  expect_error(j, StatusCode::kInvalidArgument, "top_k");
  j = minimax_m1();
  j["num_attention_heads"] = 60;  // not a multiple of 8 KV heads
  expect_error(j, StatusCode::kInvalidArgument, "multiple");
}

}  // namespace
}  // namespace hypic
