// Model::load on broken copies of the tiny test checkpoints: every way a user's model
// directory can be wrong must come back as an error Status (never a crash) whose message
// names the file and/or tensor at fault, and must leave the directory as it was. Also: a
// bf16 copy of a checkpoint loads and generates the same greedy tokens.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "model/model.h"

namespace hypic {
namespace {

namespace fs = std::filesystem;
using TensorList = std::vector<std::pair<std::string, Tensor>>;

std::string model_dir(const std::string& name) {
  return std::string(HYPIC_SOURCE_DIR) + "/tests/models/" + name;
}

// A temporary copy of a test model directory, removed at the end of the test.
class LoadErrorsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    std::error_code ec;
    for (const auto& d : dirs_) fs::remove_all(d, ec);
  }

  std::string copy_model(const std::string& name) {
    std::string tmpl = (fs::path(::testing::TempDir()) / ("hypic_load_" + name + "_XXXXXX")).string();
    EXPECT_NE(::mkdtemp(tmpl.data()), nullptr);
    dirs_.push_back(tmpl);
    for (const auto& e : fs::directory_iterator(model_dir(name)))
      if (e.path().filename().string().rfind("golden", 0) != 0)  // goldens are not needed
        fs::copy_file(e.path(), fs::path(tmpl) / e.path().filename());
    return tmpl;
  }

  static std::string read_text(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  }
  static void write_text(const fs::path& p, const std::string& s) {
    std::ofstream(p, std::ios::binary | std::ios::trunc) << s;
  }
  static void edit_json(const fs::path& p, const std::function<void(nlohmann::json&)>& f) {
    nlohmann::json j = nlohmann::json::parse(read_text(p));
    f(j);
    write_text(p, j.dump(2));
  }

  // Rewrites a safetensors file through the library writer after `f` edits its tensor list
  // (all test checkpoints are float-only). The list's views keep the old mapping alive
  // while the writer replaces the file.
  static void rewrite(const fs::path& p, const std::function<void(TensorList&)>& f) {
    auto st = SafetensorsFile::open(p.string());
    ASSERT_TRUE(st.is_ok()) << st.status().to_string();
    TensorList ts;
    for (const auto& name : st->names()) {
      auto t = st->tensor(name);
      ASSERT_TRUE(t.is_ok()) << t.status().to_string();
      ts.emplace_back(name, t.value());
    }
    f(ts);
    Status s = write_safetensors(p.string(), ts, st->metadata());
    ASSERT_TRUE(s.is_ok()) << s.to_string();
  }

  // File names and contents of a directory (to check a failed load changed nothing).
  static std::map<std::string, std::string> snapshot(const std::string& dir) {
    std::map<std::string, std::string> m;
    for (const auto& e : fs::directory_iterator(dir)) m[e.path().filename().string()] = read_text(e.path());
    return m;
  }

  // Loads `dir`, expects failure; checks the message contains every string in `needles`
  // and that the directory is unchanged. Returns the status code.
  StatusCode expect_load_error(const std::string& dir, const std::vector<std::string>& needles) {
    const auto before = snapshot(dir);
    Status st;
    for (DType dt : {DType::kF32, DType::kBF16}) {
      auto m = Model::load(dir, {dt, false});
      EXPECT_FALSE(m.is_ok()) << "loaded a broken model in " << dtype_name(dt);
      if (m.is_ok()) return StatusCode::kOk;
      st = m.status();
      for (const auto& n : needles)
        EXPECT_NE(st.message().find(n), std::string::npos)
            << "message lacks '" << n << "': " << st.message();
    }
    EXPECT_TRUE(snapshot(dir) == before) << "a failed load changed the model directory";
    std::printf("  -> %s\n", st.to_string().c_str());
    return st.code();
  }

  std::vector<std::string> dirs_;
};

const char* kDenseWeights = "model.safetensors";
const std::string kP = "model.language_model.";

TEST_F(LoadErrorsTest, CopyLoads) {  // the baseline the other tests break
  for (const char* name : {"qwen3_5_dense", "qwen3_5_moe", "qwen3_next_moe"}) {
    auto m = Model::load(copy_model(name), {DType::kF32, false});
    EXPECT_TRUE(m.is_ok()) << name << ": " << m.status().to_string();
  }
}

TEST_F(LoadErrorsTest, MissingDirectory) {
  const std::string dir = (fs::path(::testing::TempDir()) / "hypic_no_such_model_dir").string();
  auto m = Model::load(dir, {DType::kF32, false});
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find(dir), std::string::npos) << m.status().message();
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
}

TEST_F(LoadErrorsTest, ConfigMissing) {
  const std::string dir = copy_model("qwen3_5_dense");
  fs::remove(fs::path(dir) / "config.json");
  const StatusCode s = expect_load_error(dir, {"config.json", "does not exist"});
  EXPECT_EQ(s, StatusCode::kNotFound);
}

TEST_F(LoadErrorsTest, ConfigNotJson) {
  const std::string dir = copy_model("qwen3_5_dense");
  const fs::path p = fs::path(dir) / "config.json";
  std::string text = read_text(p);
  write_text(p, text.substr(0, text.size() / 2));  // cut in the middle
  expect_load_error(dir, {"config.json", "not valid JSON"});
  write_text(p, "");
  expect_load_error(dir, {"config.json", "not valid JSON"});
  write_text(p, "[1, 2, 3]");
  expect_load_error(dir, {"config.json", "not a JSON object"});
}

TEST_F(LoadErrorsTest, ConfigFieldOfWrongType) {
  const std::string dir = copy_model("qwen3_5_dense");
  edit_json(fs::path(dir) / "config.json", [](nlohmann::json& j) { j["text_config"]["hidden_size"] = "64"; });
  expect_load_error(dir, {"config.json", "hidden_size"});
}

TEST_F(LoadErrorsTest, ConfigMissingModelType) {
  const std::string dir = copy_model("qwen3_5_dense");
  edit_json(fs::path(dir) / "config.json", [](nlohmann::json& j) { j.erase("model_type"); });
  expect_load_error(dir, {"config.json", "model_type"});
}

TEST_F(LoadErrorsTest, ConfigUnsupportedModelType) {
  const std::string dir = copy_model("qwen3_5_dense");
  edit_json(fs::path(dir) / "config.json", [](nlohmann::json& j) { j["model_type"] = "llama"; });
  const StatusCode s = expect_load_error(dir, {"config.json", "llama"});
  EXPECT_EQ(s, StatusCode::kUnsupported);
}

TEST_F(LoadErrorsTest, ConfigHiddenSizeNoLongerMatchesTheWeights) {
  const std::string dir = copy_model("qwen3_5_dense");
  edit_json(fs::path(dir) / "config.json", [](nlohmann::json& j) { j["text_config"]["hidden_size"] = 32; });
  // the first tensor read is the embedding: both shapes and the file are named
  expect_load_error(dir, {kP + "embed_tokens.weight", kDenseWeights, "[512, 64]", "[512, 32]"});
}

TEST_F(LoadErrorsTest, ConfigIntermediateSizeNoLongerMatchesTheWeights) {
  const std::string dir = copy_model("qwen3_5_dense");
  edit_json(fs::path(dir) / "config.json", [](nlohmann::json& j) { j["text_config"]["intermediate_size"] = 128; });
  expect_load_error(dir, {kP + "layers.0.mlp.gate_proj.weight", kDenseWeights, "[96, 64]",
                          "[128, 64]", "layer 0"});
}

TEST_F(LoadErrorsTest, ConfigLayerCountDisagreesWithLayerTypes) {
  const std::string dir = copy_model("qwen3_5_dense");
  edit_json(fs::path(dir) / "config.json", [](nlohmann::json& j) { j["text_config"]["num_hidden_layers"] = 9; });
  expect_load_error(dir, {"layer_types"});
}

TEST_F(LoadErrorsTest, MoreLayersThanTheCheckpointHas) {
  const std::string dir = copy_model("qwen3_5_dense");
  edit_json(fs::path(dir) / "config.json", [](nlohmann::json& j) {
    auto& t = j["text_config"];
    t["num_hidden_layers"] = 9;
    t["layer_types"].push_back("linear_attention");
  });
  expect_load_error(dir, {kP + "layers.8.", "not in the checkpoint", "layer 8"});
}

TEST_F(LoadErrorsTest, TensorRenamed) {
  const std::string dir = copy_model("qwen3_5_dense");
  const std::string name = kP + "layers.5.linear_attn.in_proj_z.weight";
  rewrite(fs::path(dir) / kDenseWeights, [&](TensorList& ts) {
    for (auto& [n, t] : ts)
      if (n == name) n = kP + "layers.5.linear_attn.in_proj_zz.weight";
  });
  const StatusCode s = expect_load_error(dir, {name, "not in the checkpoint", "layer 5"});
  EXPECT_EQ(s, StatusCode::kNotFound);
}

TEST_F(LoadErrorsTest, EmbeddingMissing) {
  const std::string dir = copy_model("qwen3_5_dense");
  rewrite(fs::path(dir) / kDenseWeights, [&](TensorList& ts) {
    std::erase_if(ts, [](const auto& p) { return p.first == kP + "embed_tokens.weight"; });
  });
  expect_load_error(dir, {kP + "embed_tokens.weight"});
}

TEST_F(LoadErrorsTest, TensorWithTheWrongShape) {
  const std::string dir = copy_model("qwen3_5_dense");
  const std::string name = kP + "layers.3.self_attn.o_proj.weight";  // [64, 256]
  rewrite(fs::path(dir) / kDenseWeights, [&](TensorList& ts) {
    for (auto& [n, t] : ts)
      if (n == name) t = t.reshape({128, 128});  // same size, wrong shape
  });
  const StatusCode s = expect_load_error(dir, {name, kDenseWeights, "[128, 128]", "[64, 256]", "layer 3"});
  EXPECT_EQ(s, StatusCode::kInvalidArgument);
}

TEST_F(LoadErrorsTest, PackedExpertsWithTheWrongShape) {
  const std::string dir = copy_model("qwen3_5_moe");
  const std::string name = kP + "layers.0.mlp.experts.gate_up_proj";  // [8, 32, 64]
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".safetensors") continue;
    rewrite(e.path(), [&](TensorList& ts) {
      for (auto& [n, t] : ts)
        if (n == name) t = t.rows(0, 7).clone();  // one expert short
    });
  }
  expect_load_error(dir, {name, "[7, 32, 64]", "[8, 32, 64]"});
}

TEST_F(LoadErrorsTest, TruncatedSafetensors) {
  const std::string dir = copy_model("qwen3_5_dense");
  const fs::path p = fs::path(dir) / kDenseWeights;
  fs::resize_file(p, fs::file_size(p) / 2);
  const StatusCode s = expect_load_error(dir, {p.string()});
  EXPECT_EQ(s, StatusCode::kCorrupt);
  // cut inside the header too
  fs::resize_file(p, 100);
  expect_load_error(dir, {p.string()});
  fs::resize_file(p, 3);  // not even the header length
  expect_load_error(dir, {p.string()});
}

TEST_F(LoadErrorsTest, GarbageSafetensors) {
  const std::string dir = copy_model("qwen3_5_dense");
  const fs::path p = fs::path(dir) / kDenseWeights;
  std::string bytes = read_text(p);
  for (size_t i = 8; i < 40; ++i) bytes[i] = '\x01';  // corrupt the JSON header
  write_text(p, bytes);
  expect_load_error(dir, {p.string()});
}

TEST_F(LoadErrorsTest, WeightsMissing) {
  const std::string dir = copy_model("qwen3_5_dense");
  fs::remove(fs::path(dir) / kDenseWeights);
  expect_load_error(dir, {dir, "model.safetensors"});
}

TEST_F(LoadErrorsTest, MissingShard) {
  const std::string dir = copy_model("qwen3_5_moe");
  const std::string shard = "model-00002-of-00003.safetensors";
  fs::remove(fs::path(dir) / shard);
  const StatusCode s = expect_load_error(dir, {shard, "model.safetensors.index.json", "does not exist"});
  EXPECT_EQ(s, StatusCode::kNotFound);
}

TEST_F(LoadErrorsTest, TruncatedShard) {
  const std::string dir = copy_model("qwen3_5_moe");
  const fs::path p = fs::path(dir) / "model-00003-of-00003.safetensors";
  fs::resize_file(p, fs::file_size(p) - 4);
  expect_load_error(dir, {p.string()});
}

TEST_F(LoadErrorsTest, IndexPointsAtTheWrongShard) {
  const std::string dir = copy_model("qwen3_5_moe");
  const std::string name = kP + "embed_tokens.weight";
  edit_json(fs::path(dir) / "model.safetensors.index.json", [&](nlohmann::json& j) {
    ASSERT_EQ(j["weight_map"][name], "model-00001-of-00003.safetensors");
    j["weight_map"][name] = "model-00002-of-00003.safetensors";
  });
  expect_load_error(dir, {name, "model.safetensors.index.json"});
}

TEST_F(LoadErrorsTest, IndexNotJson) {
  const std::string dir = copy_model("qwen3_5_moe");
  write_text(fs::path(dir) / "model.safetensors.index.json", "{\"weight_map\": {");
  expect_load_error(dir, {"model.safetensors.index.json", "not valid JSON"});
}

TEST_F(LoadErrorsTest, UntiedLmHeadMissing) {
  const std::string dir = copy_model("qwen3_5_moe");
  const fs::path idx = fs::path(dir) / "model.safetensors.index.json";
  std::string shard;
  edit_json(idx, [&](nlohmann::json& j) {
    shard = j["weight_map"]["lm_head.weight"];
    j["weight_map"].erase("lm_head.weight");
  });
  rewrite(fs::path(dir) / shard, [&](TensorList& ts) {
    std::erase_if(ts, [](const auto& p) { return p.first == "lm_head.weight"; });
  });
  expect_load_error(dir, {"lm_head.weight", "tie_word_embeddings"});
}

TEST_F(LoadErrorsTest, PerExpertTensorMissing) {
  const std::string dir = copy_model("qwen3_next_moe");
  const std::string name = "model.layers.6.mlp.experts.5.down_proj.weight";
  rewrite(fs::path(dir) / kDenseWeights, [&](TensorList& ts) {
    std::erase_if(ts, [&](const auto& p) { return p.first == name; });
  });
  expect_load_error(dir, {name, "layer 6"});
}

// tokenizer.json missing / broken: tests/engine/test_tokenizer_file_errors.cpp (test_model does
// not link the tokenizer) and tests/cli.

// ---------------------------------------------------------------------------------------
// A bf16 checkpoint (every F32 tensor rounded to BF16 by the writer) loads, keeps its
// matrices as zero-copy bf16 views, and generates the same greedy tokens as the F32
// checkpoint through the bf16 compute path (and as transformers' fp32 goldens: the README
// shows HF's own bf16-rounded-weights model reproduces them with margin ≥ 1.5× the
// deviation).

std::vector<int32_t> greedy_tokens(const Model& m, const std::vector<int32_t>& prompt, int n) {
  SeqState st = m.new_state();
  std::vector<float> logits;
  std::vector<int32_t> out;
  EXPECT_TRUE(m.forward(st, prompt, LogitsFor::kLast, &logits).is_ok());
  for (int i = 0; i < n; ++i) {
    int32_t best = 0;
    for (size_t v = 1; v < logits.size(); ++v)
      if (logits[v] > logits[size_t(best)]) best = int32_t(v);
    out.push_back(best);
    if (i + 1 < n) {
      EXPECT_TRUE(m.forward(st, {best}, LogitsFor::kLast, &logits).is_ok());
    }
  }
  return out;
}

class Bf16CheckpointTest : public LoadErrorsTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(Bf16CheckpointTest, Bf16CopyGivesTheSameGreedyTokens) {
  const std::string name = GetParam();
  const std::string dir = copy_model(name);
  int converted = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".safetensors") continue;
    rewrite(e.path(), [&](TensorList& ts) {
      for (auto& [n, t] : ts)
        if (t.dtype() == DType::kF32) t = t.to(DType::kBF16), ++converted;
    });
  }
  ASSERT_GT(converted, 50);
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() != ".safetensors") continue;
    auto f = SafetensorsFile::open(e.path().string());
    ASSERT_TRUE(f.is_ok()) << f.status().to_string();
    for (const auto& en : f->entries()) ASSERT_EQ(en.dtype, "BF16") << en.name;
  }

  const nlohmann::json g = nlohmann::json::parse(read_text(fs::path(model_dir(name)) / "golden.json"));
  const auto prompt = g.at("prompt_ids").get<std::vector<int32_t>>();
  const auto want = g.at("greedy_ids").get<std::vector<int32_t>>();

  std::vector<int32_t> from_f32, from_bf16;
  {
    auto m = Model::load(model_dir(name), {DType::kBF16, false});
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    from_f32 = greedy_tokens(**m, prompt, int(want.size()));
  }
  {
    auto m = Model::load(dir, {DType::kBF16, false});
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    EXPECT_EQ((*m)->weights().lm_head.dtype(), DType::kBF16);
    EXPECT_EQ((*m)->weights().embed.dtype(), DType::kBF16);
    from_bf16 = greedy_tokens(**m, prompt, int(want.size()));
  }
  EXPECT_EQ(from_bf16, from_f32);
  EXPECT_EQ(from_bf16, want);
  // the bf16 checkpoint also loads for the exact f32 path (widened on load)
  auto m32 = Model::load(dir, {DType::kF32, false});
  ASSERT_TRUE(m32.is_ok()) << m32.status().to_string();
  EXPECT_EQ((*m32)->weights().lm_head.dtype(), DType::kF32);
}

INSTANTIATE_TEST_SUITE_P(Archs, Bf16CheckpointTest,
                         ::testing::Values("qwen3_5_dense", "qwen3_5_moe", "qwen3_next_moe",
                                           "ring_linear_moe", "minimax_moe"));

// The Lightning families: each loads from its copy; a missing tensor, a wrong shape and a
// config that no longer describes the weights are refused with the name at fault.
TEST_F(LoadErrorsTest, LightningCopiesLoad) {
  for (const char* name : {"ring_linear_moe", "ring_linear_odd", "minimax_moe", "minimax_rotary"}) {
    auto m = Model::load(copy_model(name), {DType::kF32, false});
    EXPECT_TRUE(m.is_ok()) << name << ": " << m.status().to_string();
  }
}

// Every .safetensors file of `dir` rewritten by `f`.
void rewrite_all(const std::string& dir, const std::function<void(TensorList&)>& f) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors" && e.path().filename().string().rfind("golden", 0) != 0) {
      auto st = SafetensorsFile::open(e.path().string());
      ASSERT_TRUE(st.is_ok());
      TensorList ts;
      for (const auto& n : st->names()) ts.emplace_back(n, st->tensor(n).value());
      f(ts);
      ASSERT_TRUE(write_safetensors(e.path().string(), ts, st->metadata()).is_ok());
    }
}

TEST_F(LoadErrorsTest, RingTensorMissingOrMisshapen) {
  const std::string name = "model.layers.1.attention.g_norm.weight";
  std::string dir = copy_model("ring_linear_moe");
  rewrite_all(dir, [&](TensorList& ts) {
    std::erase_if(ts, [&](const auto& p) { return p.first == name; });
  });
  edit_json(fs::path(dir) / "model.safetensors.index.json",
            [&](nlohmann::json& j) { j["weight_map"].erase(name); });
  EXPECT_EQ(expect_load_error(dir, {name, "not in the checkpoint", "layer 1"}),
            StatusCode::kNotFound);
  const std::string bias = "model.layers.3.mlp.gate.expert_bias";
  dir = copy_model("ring_linear_moe");
  rewrite_all(dir, [&](TensorList& ts) {
    for (auto& [n, t] : ts)
      if (n == bias) t = t.rows(0, 4).clone();  // half the experts
  });
  expect_load_error(dir, {bias, "[4]", "[8]", "layer 3"});
  const std::string qkv = "model.layers.2.attention.query_key_value.weight";  // attention
  dir = copy_model("ring_linear_moe");
  rewrite_all(dir, [&](TensorList& ts) {
    for (auto& [n, t] : ts)
      if (n == qkv) t = t.rows(0, t.dim(0) - 16).clone();
  });
  expect_load_error(dir, {qkv, "layer 2"});
}

TEST_F(LoadErrorsTest, RingConfigNoLongerDescribesTheWeights) {
  std::string dir = copy_model("ring_linear_moe");
  // Another group size moves the attention layers: a Lightning layer's tensors are not there.
  edit_json(fs::path(dir) / "config.json", [](nlohmann::json& j) { j["layer_group_size"] = 2; });
  expect_load_error(dir, {"layer 1", "query_key_value"});
  dir = copy_model("ring_linear_moe");
  edit_json(fs::path(dir) / "config.json", [](nlohmann::json& j) { j["first_k_dense_replace"] = 0; });
  expect_load_error(dir, {"model.layers.0.mlp.gate.weight", "layer 0"});
  dir = copy_model("ring_linear_moe");
  edit_json(fs::path(dir) / "config.json", [](nlohmann::json& j) { j["group_norm_size"] = 5; });
  expect_load_error(dir, {"groups must divide"});
}

TEST_F(LoadErrorsTest, KdaMlaTensorsMissingOrMisshapenOrConfigWrong) {
  for (const char* name : {"kimi_linear_moe", "kimi_linear_odd", "ling3_hybrid", "ling3_hybrid_unsafe"}) {
    auto m = Model::load(copy_model(name), {DType::kF32, false});
    EXPECT_TRUE(m.is_ok()) << name << ": " << m.status().to_string();
  }
  const std::string fb = "model.layers.0.self_attn.f_b_proj.weight";  // Kimi's low-rank gate
  std::string dir = copy_model("kimi_linear_moe");
  rewrite_all(dir, [&](TensorList& ts) {
    std::erase_if(ts, [&](const auto& p) { return p.first == fb; });
  });
  EXPECT_EQ(expect_load_error(dir, {fb, "not in the checkpoint", "layer 0"}), StatusCode::kNotFound);
  const std::string kvb = "model.layers.2.self_attn.kv_b_proj.weight";  // MLA
  dir = copy_model("kimi_linear_moe");
  rewrite_all(dir, [&](TensorList& ts) {
    for (auto& [n, t] : ts)
      if (n == kvb) t = t.rows(0, t.dim(0) - 8).clone();
  });
  expect_load_error(dir, {kvb, "layer 2"});
  dir = copy_model("kimi_linear_moe");  // a latent of another width
  edit_json(fs::path(dir) / "config.json", [](nlohmann::json& j) { j["kv_lora_rank"] = 16; });
  expect_load_error(dir, {"kv_a_proj_with_mqa", "layer 2"});
  dir = copy_model("ling3_hybrid");  // MLA where the checkpoint has KDA
  edit_json(fs::path(dir) / "config.json", [](nlohmann::json& j) {
    j.erase("layer_types");
    j["layer_group_size"] = 2;
  });
  expect_load_error(dir, {"layer 1"});
}

TEST_F(LoadErrorsTest, MiniMaxTensorMissingOrMisshapenOrConfigWrong) {
  const std::string w2 = "model.layers.0.block_sparse_moe.experts.3.w2.weight";
  std::string dir = copy_model("minimax_rotary");
  rewrite_all(dir, [&](TensorList& ts) {
    std::erase_if(ts, [&](const auto& p) { return p.first == w2; });
  });
  EXPECT_EQ(expect_load_error(dir, {w2, "not in the checkpoint", "layer 0"}), StatusCode::kNotFound);
  const std::string qkv = "model.layers.0.self_attn.qkv_proj.weight";
  dir = copy_model("minimax_rotary");
  rewrite_all(dir, [&](TensorList& ts) {
    for (auto& [n, t] : ts)
      if (n == qkv) t = t.rows(0, t.dim(0) - 3).clone();
  });
  expect_load_error(dir, {qkv, "layer 0"});
  dir = copy_model("minimax_rotary");
  edit_json(fs::path(dir) / "config.json", [](nlohmann::json& j) {
    j["attn_type_list"] = nlohmann::json::array({0, 1});
  });
  expect_load_error(dir, {"attn_type_list lists 2 layers"});
}

}  // namespace
}  // namespace hypic
