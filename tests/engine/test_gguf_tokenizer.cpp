// The tokenizer a GGUF file carries (tokenizer/gguf_vocab.h), against the tokenizer.json it
// was written from (tools/make_gguf_fixtures.py writes it as llama.cpp's converter does).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "checkpoint/gguf.h"
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

}  // namespace
}  // namespace hypic
