// Synthetic checkpoints (`hypic bench make-model`, synthetic/synthetic.h) written quantized
// load as the same model quantized at load.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>

#include "checkpoint/checkpoint.h"
#include "common/model_logits.h"
#include "model/model.h"
#include "synthetic/synthetic.h"

namespace hypic {
namespace {

namespace fs = std::filesystem;
using test::prompt_logits;

// `bench make-model --dtype q4` stores the matrices quantized as it draws them; loaded in q4
// that is the same seed's bf16 model quantized at load, bit for bit (one layer of the
// hidden-1024 shape: the smallest real widths, 0.5 GB of bf16 embeddings).
TEST(Synthetic, ModelWrittenQuantizedEqualsQuantizingAtLoad) {
  std::string dir = (fs::path(::testing::TempDir()) / "hypic_synth_XXXXXX").string();
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  SyntheticOptions o;
  o.layers = 1;
  ASSERT_TRUE(write_synthetic_checkpoint("qwen3.5-h1024", o, dir + "/bf16").is_ok());
  o.dtype = DType::kQ4;
  const Status s = write_synthetic_checkpoint("qwen3.5-h1024", o, dir + "/q4");
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_FALSE(fs::exists(dir + "/q4.probe"));
  auto ck = Checkpoint::open(dir + "/q4");
  ASSERT_TRUE(ck.is_ok());
  const SafetensorsEntry* e = ck->entry("model.language_model.layers.0.mlp.down_proj.weight");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->dtype, "U8");
  EXPECT_NE(ck->entry("model.language_model.layers.0.mlp.down_proj.weight.scale"), nullptr);
  const auto want = prompt_logits(dir + "/bf16", DType::kQ4);
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(prompt_logits(dir + "/q4", DType::kQ4), want);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hypic
