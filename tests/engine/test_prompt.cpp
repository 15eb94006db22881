// PIC prompt layout (engine/prompt.h): each model family's template, and the ChatML parts.
#include <gtest/gtest.h>

#include <cstdlib>

#include "engine/prompt.h"

namespace hypic {
namespace {

const Tokenizer& tok() {
  static const Tokenizer* t = [] {
    auto r = Tokenizer::load(std::string(HYPIC_SOURCE_DIR) + "/tests/models/qwen3_5_dense/tokenizer.json");
    if (!r) std::abort();
    return new Tokenizer(std::move(r).value());
  }();
  return *t;
}

TEST(Prompt, QwenFamiliesUseChatMl) {
  for (Arch a : {Arch::kQwen3Next, Arch::kQwen3_5, Arch::kQwen3_5Moe}) {
    ModelConfig cfg;
    cfg.arch = a;
    EXPECT_EQ(model_chat_template(cfg).name(), "chatml") << arch_name(a);
  }
}

TEST(Prompt, ChatPartsLayOutChatMl) {
  ModelConfig cfg;
  const ChatTemplate& chat = model_chat_template(cfg);
  const PromptParts p = chat_parts(chat, tok(), "Be brief.", {"Doc <|im_end|> one.", "Two."}, "Why?");
  EXPECT_EQ(p.prefix, tok().encode("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n"));
  ASSERT_EQ(p.segments.size(), 2u);
  EXPECT_EQ(p.segments[0], tok().encode("Doc <|im_end|> one.", /*parse_special=*/false));
  EXPECT_EQ(p.segments[1], tok().encode("Two.", /*parse_special=*/false));
  auto suffix = tok().encode("Why?", /*parse_special=*/false);
  tok().encode_append("<|im_end|>\n<|im_start|>assistant\n", suffix);
  EXPECT_EQ(p.suffix, suffix);
  // Without a system message the prefix is the user turn's opening alone.
  EXPECT_EQ(chat_parts(chat, tok(), "", {}, "Q").prefix, tok().encode("<|im_start|>user\n"));
}

}  // namespace
}  // namespace hypic
