// config.json parsing for qwen3_next (flat) and qwen3_5 / qwen3_5_moe (text_config), with
// the transformers 5.x defaults for absent fields.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "model/config.h"

namespace hypic {
namespace {

using json = nlohmann::json;

// Qwen/Qwen3-Next-80B-A3B-Instruct config.json.
const char* kQwen3NextConfig = R"({
  "architectures": ["Qwen3NextForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "decoder_sparse_step": 1,
  "eos_token_id": 151645,
  "full_attention_interval": 4,
  "head_dim": 256,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "initializer_range": 0.02,
  "intermediate_size": 5120,
  "linear_conv_kernel_dim": 4,
  "linear_key_head_dim": 128,
  "linear_num_key_heads": 16,
  "linear_num_value_heads": 32,
  "linear_value_head_dim": 128,
  "max_position_embeddings": 262144,
  "mlp_only_layers": [],
  "model_type": "qwen3_next",
  "moe_intermediate_size": 512,
  "norm_topk_prob": true,
  "num_attention_heads": 16,
  "num_experts": 512,
  "num_experts_per_tok": 10,
  "num_hidden_layers": 48,
  "num_key_value_heads": 2,
  "output_router_logits": false,
  "partial_rotary_factor": 0.25,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 10000000,
  "router_aux_loss_coef": 0.001,
  "shared_expert_intermediate_size": 512,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.57.0.dev0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
})";

json layer_types(int n, int interval = 4) {
  json a = json::array();
  for (int i = 0; i < n; ++i)
    a.push_back((i + 1) % interval ? "linear_attention" : "full_attention");
  return a;
}

// Qwen/Qwen3.5-27B config.json (vision_config abridged).
json qwen35_27b() {
  json text = {
      {"attention_bias", false}, {"attention_dropout", 0.0}, {"attn_output_gate", true},
      {"dtype", "bfloat16"}, {"eos_token_id", 248044}, {"full_attention_interval", 4},
      {"head_dim", 256}, {"hidden_act", "silu"}, {"hidden_size", 5120},
      {"initializer_range", 0.02}, {"intermediate_size", 17408},
      {"layer_types", layer_types(64)}, {"linear_conv_kernel_dim", 4},
      {"linear_key_head_dim", 128}, {"linear_num_key_heads", 16},
      {"linear_num_value_heads", 48}, {"linear_value_head_dim", 128},
      {"max_position_embeddings", 262144}, {"mlp_only_layers", json::array()},
      {"model_type", "qwen3_5_text"}, {"mtp_num_hidden_layers", 1},
      {"mtp_use_dedicated_embeddings", false}, {"num_attention_heads", 24},
      {"num_hidden_layers", 64}, {"num_key_value_heads", 4}, {"rms_norm_eps", 1e-6},
      {"use_cache", true}, {"vocab_size", 248320},
      {"rope_parameters", {{"mrope_interleaved", true}, {"mrope_section", {11, 11, 10}},
                           {"rope_type", "default"}, {"rope_theta", 10000000},
                           {"partial_rotary_factor", 0.25}}}};
  return {{"architectures", {"Qwen3_5ForConditionalGeneration"}},
          {"image_token_id", 248056},
          {"model_type", "qwen3_5"},
          {"text_config", text},
          {"tie_word_embeddings", false},
          {"transformers_version", "4.57.0.dev0"},
          {"video_token_id", 248057},
          {"vision_config", {{"depth", 27}, {"hidden_size", 1152}, {"model_type", "qwen3_5"},
                             {"out_hidden_size", 5120}}},
          {"vision_end_token_id", 248054},
          {"vision_start_token_id", 248053}};
}

// Qwen/Qwen3.5-35B-A3B config.json (vision_config abridged).
json qwen35_35b_a3b() {
  json text = {
      {"attention_bias", false}, {"dtype", "bfloat16"}, {"eos_token_id", 248044},
      {"full_attention_interval", 4}, {"head_dim", 256}, {"hidden_act", "silu"},
      {"hidden_size", 2048}, {"layer_types", layer_types(40)},
      {"linear_conv_kernel_dim", 4}, {"linear_key_head_dim", 128},
      {"linear_num_key_heads", 16}, {"linear_num_value_heads", 32},
      {"linear_value_head_dim", 128}, {"max_position_embeddings", 262144},
      {"model_type", "qwen3_5_moe_text"}, {"moe_intermediate_size", 512},
      {"mtp_num_hidden_layers", 1}, {"num_attention_heads", 16}, {"num_experts", 256},
      {"num_experts_per_tok", 8}, {"num_hidden_layers", 40}, {"num_key_value_heads", 2},
      {"rms_norm_eps", 1e-6}, {"shared_expert_intermediate_size", 512},
      {"vocab_size", 248320},
      {"rope_parameters", {{"mrope_interleaved", true}, {"mrope_section", {11, 11, 10}},
                           {"rope_type", "default"}, {"rope_theta", 10000000},
                           {"partial_rotary_factor", 0.25}}}};
  return {{"architectures", {"Qwen3_5MoeForConditionalGeneration"}},
          {"model_type", "qwen3_5_moe"},
          {"text_config", text},
          {"tie_word_embeddings", false},
          {"vision_config", {{"depth", 27}, {"model_type", "qwen3_5_moe"}}}};
}

Result<ModelConfig> parse(const json& j) { return ModelConfig::from_json(j.dump()); }

bool defaulted(const ModelConfig& c, const std::string& field) {
  return std::find(c.defaulted_fields.begin(), c.defaulted_fields.end(), field) !=
         c.defaulted_fields.end();
}

#define EXPECT_CONFIG_ERROR(expr, want_code, ...)                                     \
  do {                                                                           \
    auto _r = (expr);                                                            \
    ASSERT_FALSE(_r.is_ok()) << #expr " unexpectedly succeeded";                 \
    EXPECT_EQ(_r.status().code(), want_code) << _r.status().to_string();              \
    for (const std::string& _s : std::vector<std::string>{__VA_ARGS__})          \
      EXPECT_NE(_r.status().message().find(_s), std::string::npos)               \
          << "message lacks '" << _s << "': " << _r.status().message();          \
  } while (0)

TEST(Config, Qwen3NextFlat) {
  auto r = ModelConfig::from_json(kQwen3NextConfig);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const ModelConfig& c = *r;
  EXPECT_STREQ(c.arch_name(), "Qwen3-Next");
  EXPECT_EQ(c.model_type, "qwen3_next");
  EXPECT_EQ(c.text_model_type, "qwen3_next");
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.hidden_size, 2048);
  EXPECT_EQ(c.num_hidden_layers, 48);
  EXPECT_EQ(c.num_attention_heads, 16);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e7);
  EXPECT_DOUBLE_EQ(c.partial_rotary_factor, 0.25);
  EXPECT_EQ(c.rotary_dim(), 64);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_EQ(c.max_position_embeddings, 262144);
  EXPECT_EQ(c.linear.key_heads, 16);
  EXPECT_EQ(c.linear.value_heads, 32);
  EXPECT_EQ(c.linear.key_head_dim, 128);
  EXPECT_EQ(c.linear.value_head_dim, 128);
  EXPECT_EQ(c.linear.conv_kernel, 4);
  EXPECT_EQ(c.intermediate_size, 5120);
  EXPECT_EQ(c.moe.experts, 512);
  EXPECT_EQ(c.moe.experts_per_tok, 10);
  EXPECT_EQ(c.moe.intermediate_size, 512);
  EXPECT_EQ(c.moe.shared_intermediate_size, 512);
  EXPECT_TRUE(c.moe.norm_topk_prob);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{151645});
  EXPECT_EQ(c.bos_token_id, 151643);
  EXPECT_FALSE(c.pad_token_id.has_value());
  EXPECT_EQ(c.hidden_act, "silu");
  EXPECT_EQ(c.dtype, "bfloat16");
  EXPECT_EQ(c.weight_prefix, "model.");
  ASSERT_EQ(c.layers.size(), 48u);
  for (int i = 0; i < 48; ++i) {
    EXPECT_EQ(c.is_full(i), (i + 1) % 4 == 0) << i;
    EXPECT_TRUE(c.is_moe(i)) << i;
  }
  EXPECT_EQ(c.num_full_layers(), 12);
  EXPECT_EQ(c.layer_pattern(), "LLLF×12");
  // 80B total / ~3B active (plus 0.6B of embeddings and head counted here).
  EXPECT_NEAR(double(c.param_count()), 79.67e9, 0.05e9);
  EXPECT_NEAR(double(c.active_param_count()), 3.87e9, 0.05e9);
  EXPECT_TRUE(c.defaulted_fields.empty() ||
              std::all_of(c.defaulted_fields.begin(), c.defaulted_fields.end(),
                          [](const std::string& f) { return f == "full_attention_interval"; }))
      << c.defaulted_fields.front();
  const std::string s = c.summary();
  EXPECT_NE(s.find("Qwen3-Next"), std::string::npos) << s;
  EXPECT_NE(s.find("LLLF×12"), std::string::npos) << s;
  EXPECT_NE(s.find("512 experts, top-10"), std::string::npos) << s;
}

TEST(Config, Qwen35NestedDense) {
  auto r = parse(qwen35_27b());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const ModelConfig& c = *r;
  EXPECT_STREQ(c.arch_name(), "Qwen3.5");
  EXPECT_EQ(c.model_type, "qwen3_5");
  EXPECT_EQ(c.text_model_type, "qwen3_5_text");
  EXPECT_EQ(c.hidden_size, 5120);
  EXPECT_EQ(c.num_hidden_layers, 64);
  EXPECT_EQ(c.num_attention_heads, 24);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_EQ(c.linear.value_heads, 48);
  EXPECT_EQ(c.intermediate_size, 17408);
  EXPECT_EQ(c.moe.experts, 0);
  EXPECT_EQ(c.vocab_size, 248320);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e7);  // from rope_parameters
  EXPECT_EQ(c.rotary_dim(), 64);
  EXPECT_EQ(c.mrope_section, (std::vector<int64_t>{11, 11, 10}));
  EXPECT_TRUE(c.mrope_interleaved);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{248044});
  EXPECT_FALSE(c.bos_token_id.has_value());
  EXPECT_EQ(c.dtype, "bfloat16");
  EXPECT_EQ(c.mtp_num_hidden_layers, 1);
  EXPECT_EQ(c.weight_prefix, "model.language_model.");
  EXPECT_EQ(c.layer_pattern(), "LLLF×16");
  for (int i = 0; i < 64; ++i) EXPECT_FALSE(c.is_moe(i));
  EXPECT_NEAR(double(c.param_count()), 26.9e9, 0.05e9);
  EXPECT_EQ(c.param_count(), c.active_param_count());
  EXPECT_TRUE(c.defaulted_fields.empty()) << c.defaulted_fields.front();
}

TEST(Config, Qwen35NestedMoe) {
  auto r = parse(qwen35_35b_a3b());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const ModelConfig& c = *r;
  EXPECT_STREQ(c.arch_name(), "Qwen3.5-MoE");
  EXPECT_EQ(c.text_model_type, "qwen3_5_moe_text");
  EXPECT_EQ(c.num_hidden_layers, 40);
  EXPECT_EQ(c.moe.experts, 256);
  EXPECT_EQ(c.moe.experts_per_tok, 8);
  EXPECT_EQ(c.intermediate_size, 0);  // Qwen3_5MoeTextConfig has no dense MLP
  EXPECT_TRUE(c.moe.norm_topk_prob);      // always renormalised
  for (int i = 0; i < 40; ++i) EXPECT_TRUE(c.is_moe(i));
  EXPECT_EQ(c.layer_pattern(), "LLLF×10");
  EXPECT_EQ(c.weight_prefix, "model.language_model.");
  EXPECT_NEAR(double(c.param_count()), 34.66e9, 0.05e9);
  EXPECT_NEAR(double(c.active_param_count()), 3.45e9, 0.05e9);
}

TEST(Config, TransformersDefaultsForAbsentFields) {
  auto next = ModelConfig::from_json(R"({"model_type": "qwen3_next"})");
  ASSERT_TRUE(next.is_ok()) << next.status().to_string();
  EXPECT_EQ(next->vocab_size, 151936);
  EXPECT_EQ(next->hidden_size, 2048);
  EXPECT_EQ(next->intermediate_size, 5632);
  EXPECT_EQ(next->num_hidden_layers, 48);
  EXPECT_EQ(next->num_key_value_heads, 2);
  EXPECT_EQ(next->max_position_embeddings, 32768);
  EXPECT_DOUBLE_EQ(next->rope_theta, 10000.0);  // default_theta, not the checkpoints' 1e7
  EXPECT_DOUBLE_EQ(next->partial_rotary_factor, 0.25);
  EXPECT_EQ(next->moe.experts, 512);
  EXPECT_EQ(next->moe.experts_per_tok, 10);
  EXPECT_TRUE(next->moe.norm_topk_prob);
  EXPECT_EQ(next->layer_pattern(), "LLLF×12");
  EXPECT_TRUE(next->eos_token_ids.empty());
  EXPECT_TRUE(defaulted(*next, "hidden_size"));
  EXPECT_TRUE(defaulted(*next, "rope_theta"));

  auto dense = ModelConfig::from_json(R"({"model_type": "qwen3_5", "text_config": {}})");
  ASSERT_TRUE(dense.is_ok()) << dense.status().to_string();
  EXPECT_EQ(dense->hidden_size, 4096);
  EXPECT_EQ(dense->intermediate_size, 12288);
  EXPECT_EQ(dense->num_hidden_layers, 32);
  EXPECT_EQ(dense->num_key_value_heads, 4);
  EXPECT_EQ(dense->vocab_size, 248320);
  EXPECT_EQ(dense->text_model_type, "qwen3_5_text");
  EXPECT_TRUE(defaulted(*dense, "text_config.hidden_size"));

  auto moe = ModelConfig::from_json(R"({"model_type": "qwen3_5_moe", "text_config": {}})");
  ASSERT_TRUE(moe.is_ok()) << moe.status().to_string();
  EXPECT_EQ(moe->hidden_size, 2048);
  EXPECT_EQ(moe->num_hidden_layers, 40);
  EXPECT_EQ(moe->moe.experts, 256);
  EXPECT_EQ(moe->moe.experts_per_tok, 8);
}

TEST(Config, TextOnlyConfigsAreFlat) {
  json j = qwen35_27b()["text_config"];  // as saved by Qwen3_5ForCausalLM
  j["tie_word_embeddings"] = true;
  auto r = parse(j);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_STREQ(r->arch_name(), "Qwen3.5");
  EXPECT_EQ(r->weight_prefix, "model.");
  EXPECT_TRUE(r->tie_word_embeddings);
  EXPECT_EQ(r->hidden_size, 5120);
}

TEST(Config, RopeFieldPlacement) {
  // Legacy top-level fields (transformers 4.x files).
  json j = json::parse(kQwen3NextConfig);
  j["rope_theta"] = 5e6;
  j["partial_rotary_factor"] = 0.5;
  auto r = parse(j);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_DOUBLE_EQ(r->rope_theta, 5e6);
  EXPECT_EQ(r->rotary_dim(), 128);
  // rope_parameters wins over top-level fields, as in convert_rope_params_to_dict.
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}};
  r = parse(j);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_DOUBLE_EQ(r->rope_theta, 1e6);
  EXPECT_DOUBLE_EQ(r->partial_rotary_factor, 0.5);  // not in the dict: top level
  // Nested by layer type.
  j["rope_parameters"] = {
      {"full_attention", {{"rope_theta", 2e6}, {"partial_rotary_factor", 0.25}}}};
  r = parse(j);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_DOUBLE_EQ(r->rope_theta, 2e6);
  EXPECT_EQ(r->rotary_dim(), 64);
  // Context-extension scaling is not implemented.
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"rope_theta", 1e7}};
  EXPECT_CONFIG_ERROR(parse(j), StatusCode::kUnsupported, "yarn");
  j.erase("rope_parameters");
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}};
  EXPECT_CONFIG_ERROR(parse(j), StatusCode::kUnsupported, "yarn");
}

TEST(Config, TieAndTokenIdsOnEitherLevel) {
  json j = qwen35_27b();
  j.erase("tie_word_embeddings");
  j["text_config"]["tie_word_embeddings"] = true;
  auto r = parse(j);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_TRUE(r->tie_word_embeddings);
  j["tie_word_embeddings"] = false;  // the VL model reads the top level
  r = parse(j);
  ASSERT_TRUE(r.is_ok());
  EXPECT_FALSE(r->tie_word_embeddings);

  j = qwen35_27b();
  j["text_config"].erase("eos_token_id");
  j["eos_token_id"] = {248044, 248046};
  j["bos_token_id"] = 248045;
  r = parse(j);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->eos_token_ids, (std::vector<int64_t>{248044, 248046}));
  EXPECT_EQ(r->bos_token_id, 248045);
}

TEST(Config, LayerPatternAndMoeLayers) {
  json j = json::parse(kQwen3NextConfig);
  j["num_hidden_layers"] = 6;
  j["full_attention_interval"] = 2;
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = {3};
  auto r = parse(j);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->layer_pattern(), "LF×3");
  // MoE iff not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0.
  const bool want[6] = {false, true, false, false, false, true};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(r->is_moe(i), want[i]) << i;

  j["layer_types"] = {"full_attention", "linear_attention", "linear_attention",
                      "linear_attention", "linear_attention", "full_attention"};
  r = parse(j);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->layer_pattern(), "FLLLLF");  // layer_types wins over the interval
  j["layer_types"].push_back("full_attention");
  EXPECT_CONFIG_ERROR(parse(j), StatusCode::kInvalidArgument, "layer_types", "7");
  j["layer_types"] = {"linear_attention", "sliding_attention", "full_attention",
                      "linear_attention", "linear_attention", "full_attention"};
  EXPECT_CONFIG_ERROR(parse(j), StatusCode::kUnsupported, "layer_types[1]", "sliding_attention");
}

TEST(Config, MissingRequiredFields) {
  json j = json::parse(kQwen3NextConfig);
  j.erase("model_type");
  EXPECT_CONFIG_ERROR(parse(j), StatusCode::kInvalidArgument, "model_type");
  j = qwen35_27b();
  j.erase("text_config");
  EXPECT_CONFIG_ERROR(parse(j), StatusCode::kInvalidArgument, "text_config");
}

TEST(Config, ValueHeadsMustBeMultipleOfKeyHeads) {
  json j = json::parse(kQwen3NextConfig);
  j["linear_num_value_heads"] = 24;
  j["linear_num_key_heads"] = 16;
  EXPECT_CONFIG_ERROR(parse(j), StatusCode::kInvalidArgument, "linear_num_value_heads", "24",
                      "linear_num_key_heads", "16");
  j = qwen35_27b();
  j["text_config"]["linear_num_value_heads"] = 40;
  EXPECT_CONFIG_ERROR(parse(j), StatusCode::kInvalidArgument,
                      "text_config.linear_num_value_heads");
}

TEST(Config, InvalidValuesNameTheField) {
  auto with = [](const char* key, json v) {
    json j = json::parse(kQwen3NextConfig);
    j[key] = std::move(v);
    return parse(j);
  };
  EXPECT_CONFIG_ERROR(with("hidden_size", "2048"), StatusCode::kInvalidArgument, "'hidden_size'",
                      "integer");
  EXPECT_CONFIG_ERROR(with("hidden_size", 0), StatusCode::kInvalidArgument, "'hidden_size'",
                      "positive");
  EXPECT_CONFIG_ERROR(with("num_key_value_heads", 3), StatusCode::kInvalidArgument,
                      "num_key_value_heads");
  EXPECT_CONFIG_ERROR(with("hidden_act", "gelu"), StatusCode::kUnsupported, "hidden_act", "gelu");
  EXPECT_CONFIG_ERROR(with("attention_bias", true), StatusCode::kUnsupported, "attention_bias");
  EXPECT_CONFIG_ERROR(with("head_dim", 254), StatusCode::kInvalidArgument,
                      "rotary dims", "even");
  EXPECT_CONFIG_ERROR(with("num_experts_per_tok", 600), StatusCode::kInvalidArgument,
                      "num_experts_per_tok");
  EXPECT_CONFIG_ERROR(with("mlp_only_layers", {48}), StatusCode::kInvalidArgument,
                      "mlp_only_layers");
  EXPECT_CONFIG_ERROR(with("eos_token_id", "</s>"), StatusCode::kInvalidArgument, "eos_token_id");
  EXPECT_CONFIG_ERROR(with("model_type", "llama"), StatusCode::kUnsupported, "llama");
  json j = qwen35_27b();
  j["text_config"]["hidden_size"] = -5;
  EXPECT_CONFIG_ERROR(parse(j), StatusCode::kInvalidArgument, "text_config.hidden_size");
  j = qwen35_27b();
  j["text_config"]["rope_parameters"]["mrope_section"] = {11, 11, 11};
  EXPECT_CONFIG_ERROR(parse(j), StatusCode::kInvalidArgument, "mrope_section");
  j = qwen35_27b();
  j["text_config"]["model_type"] = "qwen3_5_moe_text";
  EXPECT_CONFIG_ERROR(parse(j), StatusCode::kInvalidArgument, "text_config.model_type");
  EXPECT_CONFIG_ERROR(ModelConfig::from_json("{\"model_type\": "), StatusCode::kInvalidArgument,
                      "not valid JSON");
  EXPECT_CONFIG_ERROR(ModelConfig::from_dir("/nonexistent/hypic/model"), StatusCode::kNotFound,
                      "/nonexistent/hypic/model/config.json");
}

TEST(Config, DetectWeightPrefix) {
  auto vl = detect_weight_prefix({"lm_head.weight", "model.language_model.embed_tokens.weight",
                                  "model.language_model.layers.0.input_layernorm.weight",
                                  "model.visual.blocks.0.attn.qkv.weight", "mtp.fc.weight"});
  ASSERT_TRUE(vl.is_ok());
  EXPECT_EQ(*vl, "model.language_model.");
  auto text = detect_weight_prefix({"model.layers.0.mlp.gate.weight", "lm_head.weight"});
  ASSERT_TRUE(text.is_ok());
  EXPECT_EQ(*text, "model.");
  EXPECT_CONFIG_ERROR(detect_weight_prefix({"encoder.weight"}), StatusCode::kNotFound,
                      "encoder.weight");
}

// A damaged config.json nested very deep: a clear error, not a stack overflow (copies and
// dumps of nlohmann values recurse per level).
TEST(ModelConfig, DeeplyNestedIsAnError) {
  const std::string text = R"({"model_type": "qwen3_5", "x": )" + std::string(200000, '[') + std::string(200000, ']') + "}";
  auto r = ModelConfig::from_json(text, "config.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("levels deep"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace hypic
