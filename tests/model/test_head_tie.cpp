// Which matrix is the head when config.json says tie_word_embeddings: the embedding for the
// families whose transformers class ties it (Qwen3.5 without lm_head.weight); lm_head.weight
// whenever a checkpoint has one for Kimi-Linear and Ling-3.0, whose transformers classes never
// tie (`_tied_weights_keys` empty: the flag is ignored, so their logits are the untied
// directory's goldens), and the embedding only when lm_head.weight is absent.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/model_logits.h"
#include "model/model.h"

namespace hypic {
namespace {

namespace fs = std::filesystem;

std::string model_dir(const std::string& name) {
  return std::string(HYPIC_SOURCE_DIR) + "/tests/models/" + name;
}

// `name` linked file by file into a temporary directory whose config.json says
// tie_word_embeddings: true.
std::string tied_copy(const std::string& name) {
  std::string out = (fs::path(::testing::TempDir()) / ("hypic_tie_" + name + "_XXXXXX")).string();
  EXPECT_NE(::mkdtemp(out.data()), nullptr);
  for (const auto& f : fs::directory_iterator(model_dir(name)))
    if (f.path().filename() != "config.json") fs::create_symlink(f.path(), out / f.path().filename());
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(model_dir(name) + "/config.json"));
  cfg["tie_word_embeddings"] = true;
  if (cfg.contains("text_config")) cfg["text_config"]["tie_word_embeddings"] = true;
  std::ofstream(out + "/config.json") << cfg.dump(2);
  return out;
}

TEST(HeadTie, KimiAndLingUseLmHeadWhateverTheFlagSays) {
  for (const char* name : {"kimi_linear_moe", "ling3_hybrid"}) {
    const std::string dir = tied_copy(name);
    const auto want = test::prompt_logits(model_dir(name), DType::kF32), got = test::prompt_logits(dir, DType::kF32);
    ASSERT_FALSE(want.empty());
    EXPECT_EQ(got, want) << name;
    // The loaded model says it is untied and counts its head's parameters.
    auto tied = Model::load(dir, LoadOptions{}), untied = Model::load(model_dir(name), LoadOptions{});
    ASSERT_TRUE(tied.is_ok() && untied.is_ok()) << name;
    EXPECT_FALSE((*tied)->config().tie_word_embeddings) << name;
    EXPECT_EQ((*tied)->config().param_count(), (*untied)->config().param_count()) << name;
    fs::remove_all(dir);
  }
}

TEST(HeadTie, TheFlagTiesWhereTheClassTies) {
  // qwen3_next_moe has an lm_head.weight of its own; tied, the embedding replaces it.
  const std::string dir = tied_copy("qwen3_next_moe");
  const auto untied = test::prompt_logits(model_dir("qwen3_next_moe"), DType::kF32),
             tied = test::prompt_logits(dir, DType::kF32);
  ASSERT_EQ(tied.size(), untied.size());
  EXPECT_NE(tied, untied);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hypic
