// The tokenizer a GGUF file carries (tokenizer/gguf_vocab.h), against the tokenizer.json it
// was written from (tools/make_gguf_fixtures.py writes it as llama.cpp's converter does).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/gguf.h"
#include "engine/model_tokenizer.h"
#include "model/config.h"
#include "tokenizer/gguf_vocab.h"
#include "tokenizer/tokenizer.h"

namespace hypic {
namespace {

// A checkpoint's tokenizer.json written as llama.cpp's converter writes it, read back through
// tokenizer.ggml.*: the same ids and text as the directory's tokenizer, for each split.
TEST(GgufTokenizer, FromTheFileEncodesAsTheDirectorys) {
  const std::vector<std::string> texts = {
      "Hello, world! It's 2026-12-07 and the cafe\xcc\x81 opens at 9:30.\n\n  indented  ",
      "<|im_start|>user\nWhat is 12345 + 678?<|im_end|>\n<|im_start|>assistant\n",
      "MixedCASE words, don't; they'll\tTAB \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80 caf\xc3\xa9"};
  for (const auto& [pre, model] : std::vector<std::pair<std::string, std::string>>{
           {"qwen2", "qwen3_5_dense"}, {"qwen35", "minimax_moe"}, {"bailingmoe2", "ring_linear_moe"}}) {
    auto f = GgufFile::open(std::string(HYPIC_SOURCE_DIR) + "/tests/data/gguf/tokenizer_" + pre + ".gguf");
    ASSERT_TRUE(f.is_ok()) << f.status().to_string();
    auto got = tokenizer_from_gguf(f->metadata(), f->path());
    ASSERT_TRUE(got.is_ok()) << got.status().to_string();
    auto want = Tokenizer::load(std::string(HYPIC_SOURCE_DIR) + "/tests/models/" + model);
    ASSERT_TRUE(want.is_ok());
    EXPECT_EQ(got->vocab_size(), want->vocab_size()) << pre;
    for (const std::string& t : texts) {
      const auto ids = got->encode(t);
      EXPECT_EQ(ids, want->encode(t)) << pre << ": " << t;
      EXPECT_EQ(got->encode(t, /*parse_special=*/false), want->encode(t, false)) << pre << ": " << t;
      EXPECT_EQ(got->decode(ids), want->decode(ids)) << pre;
    }
  }
}

TEST(GgufTokenizer, RefusesWhatItDoesNotRead) {
  auto f = GgufFile::open(std::string(HYPIC_SOURCE_DIR) + "/tests/data/gguf/tokenizer_qwen2.gguf");
  ASSERT_TRUE(f.is_ok());
  auto meta = f->metadata();
  meta["tokenizer.ggml.pre"] = "deepseek-llm";
  auto r = tokenizer_from_gguf(meta, "x.gguf");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("'deepseek-llm'"), std::string::npos) << r.status().message();
  meta = f->metadata();
  meta["tokenizer.ggml.model"] = "llama";
  r = tokenizer_from_gguf(meta, "x.gguf");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("\"llama\""), std::string::npos) << r.status().message();
  meta = f->metadata();
  meta["tokenizer.ggml.token_type"].erase(0);
  r = tokenizer_from_gguf(meta, "x.gguf");
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("one entry per token"), std::string::npos) << r.status().message();
  EXPECT_EQ(tokenizer_from_gguf({}, "none.gguf").status().code(), StatusCode::kNotFound);
}

// The files llama.cpp's converter wrote of the golden checkpoints: the --model path's tokenizer
// is the file's vocabulary, encoding as the directory's tokenizer.json (Kimi: tiktoken.model,
// the file's merges rebuilt from its ranks by the converter).
TEST(GgufTokenizer, ConverterFilesEncodeAsTheirCheckpoints) {
  const std::string text = "Hello, world! 12345 caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd<|im_end|>\n  x";
  for (const char* model :
       {"qwen3_5_dense", "qwen3_5_moe", "qwen3_next_moe", "kimi_linear_moe", "minimax_rotary", "ling3_hybrid"}) {
    auto got = load_model_tokenizer(std::string(HYPIC_SOURCE_DIR) + "/tests/data/gguf/models/" + model + ".f32.gguf");
    ASSERT_TRUE(got.is_ok()) << got.status().to_string();
    auto want = load_model_tokenizer(std::string(HYPIC_SOURCE_DIR) + "/tests/models/" + model);
    ASSERT_TRUE(want.is_ok());
    // Kimi's file marks its last ids (reserved names to the tiktoken loader) as unused holes.
    if (std::string(model).rfind("kimi", 0) == 0) EXPECT_LE(got->vocab_size(), want->vocab_size());
    else EXPECT_EQ(got->vocab_size(), want->vocab_size()) << model;
    EXPECT_EQ(got->encode(text), want->encode(text)) << model;
  }
}

TEST(GgufTokenizer, ChatTemplateComparedByItsMarkers) {
  auto t = chat_template_for("qwen3.5");
  ASSERT_TRUE(t.is_ok());
  const std::string same = compare_chat_template(**t, "{{ '<|im_start|>' + role }}...<|im_end|>...<think>\n");
  EXPECT_NE(same.find("holds every marker"), std::string::npos) << same;
  const std::string other = compare_chat_template(**t, "{{ '<start_of_turn>' + role }}<end_of_turn>");
  EXPECT_NE(other.find("differs"), std::string::npos) << other;
  EXPECT_NE(other.find("<|im_start|>"), std::string::npos) << other;
}

// --reasoning auto: a checkpoint reasons when its own chat template writes <think> (a string
// in tokenizer_config.json, its "default" entry of a list, or chat_template.jinja), and hypic
// has the family's reasoning format.
TEST(GgufTokenizer, ReasoningFollowsTheCheckpointsTemplate) {
  const std::string src = std::string(HYPIC_SOURCE_DIR) + "/tests/models/";
  auto q35 = ModelConfig::from_dir(src + "qwen3_5_dense");
  auto next = ModelConfig::from_dir(src + "qwen3_next_moe");
  ASSERT_TRUE(q35.is_ok() && next.is_ok());
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "hypic_reasoning_template";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) { std::ofstream(dir / name) << text; };
  const ReasoningFormat* want = chat_template_for("qwen3.5").value()->reasoning_format();
  ASSERT_NE(want, nullptr);
  auto mode = [&](const ModelConfig& c, const char* m) { return model_reasoning(dir.string(), c, m); };
  auto format = [&](const ModelConfig& c, const char* m) {
    auto r = mode(c, m);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    return r.is_ok() ? r.value() : nullptr;
  };
  EXPECT_EQ(format(*q35, "auto"), nullptr);  // no template at all
  write("tokenizer_config.json", R"({"chat_template": "{{ '<|im_start|>assistant\n' }}"})");
  EXPECT_EQ(format(*q35, "auto"), nullptr);
  write("tokenizer_config.json", R"({"chat_template": [{"name": "tool_use", "template": "x"},
                                     {"name": "default", "template": "{{ '<think>\n' }}"}]})");
  EXPECT_EQ(format(*q35, "auto"), want);
  std::filesystem::remove(dir / "tokenizer_config.json");
  write("chat_template.jinja", "{%- if enable_thinking %}<think>{% endif %}");
  EXPECT_EQ(format(*q35, "auto"), want);
  EXPECT_EQ(format(*q35, "off"), nullptr);
  EXPECT_EQ(format(*next, "auto"), nullptr);  // Qwen3-Next: hypic writes no reasoning for it
  EXPECT_EQ(format(*q35, "on"), want);
  EXPECT_FALSE(mode(*next, "on").is_ok());
  EXPECT_FALSE(mode(*q35, "sometimes").is_ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hypic
