// A model directory whose tokenizer.json is missing or broken: Tokenizer::load returns an
// error naming the file (never a crash), and the model itself still loads without it.
// (Model::load errors: tests/model/test_load_errors.cpp.)
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace hypic {
namespace {

namespace fs = std::filesystem;

class TokenizerFileErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(::testing::TempDir()) / "hypic_tokfile_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    const fs::path src = fs::path(HYPIC_SOURCE_DIR) / "tests/models/qwen3_5_dense";
    for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"})
      fs::copy_file(src / f, dir_ / f);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  fs::path dir_;
};

TEST_F(TokenizerFileErrors, Missing) {
  const std::string path = (dir_ / "tokenizer.json").string();
  fs::remove(path);
  auto t = Tokenizer::load(path);
  ASSERT_FALSE(t.is_ok());
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find(path), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find("does not exist"), std::string::npos) << t.status().message();
  // the weights do not need it
  auto m = Model::load(dir_.string(), {DType::kF32, false});
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
}

TEST_F(TokenizerFileErrors, NotJson) {
  const std::string path = (dir_ / "tokenizer.json").string();
  std::ofstream(path, std::ios::trunc) << "{\"model\": ";
  auto t = Tokenizer::load(path);
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find(path), std::string::npos) << t.status().message();
}

// A deeply nested value where an entry belongs: an error describing it, not a stack
// overflow while the message is written (nlohmann's dump() recurses per level).
TEST_F(TokenizerFileErrors, DeeplyNestedEntry) {
  const std::string path = (dir_ / "tokenizer.json").string();
  std::string text;
  {
    std::ifstream in(path);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const size_t at = text.find("\"added_tokens\"");
  ASSERT_NE(at, std::string::npos);
  const size_t open = text.find('[', at);
  ASSERT_NE(open, std::string::npos);
  text.insert(open + 1, std::string(200000, '[') + std::string(200000, ']') + ",");
  std::ofstream(path, std::ios::trunc) << text;
  auto t = Tokenizer::load(path);
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("levels deep"), std::string::npos) << t.status().message().substr(0, 300);
}

TEST_F(TokenizerFileErrors, NotATokenizer) {
  const std::string path = (dir_ / "tokenizer.json").string();
  std::ofstream(path, std::ios::trunc) << "{\"model\": {\"type\": \"Unigram\"}}";
  auto t = Tokenizer::load(path);
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find(path), std::string::npos) << t.status().message();
}

}  // namespace
}  // namespace hypic
