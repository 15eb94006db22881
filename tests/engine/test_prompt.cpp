// PIC prompt layout (engine/prompt.h): each model family's template, and the ChatML parts.
#include <gtest/gtest.h>

#include <cstdlib>

#include "engine/prompt.h"
#include "model/arch.h"

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
  for (const char* type : {"qwen3_next", "qwen3_5", "qwen3_5_moe"}) {
    ModelConfig cfg;
    cfg.arch = find_architecture(type);
    ASSERT_NE(cfg.arch, nullptr) << type;
    EXPECT_EQ(model_chat_template(cfg).name(), "chatml") << type;
  }
  // Every registered family names a template that exists.
  for (const Architecture* a : architectures())
    EXPECT_TRUE(chat_template_for(a->chat_template()).is_ok()) << a->name();
}

TEST(Prompt, ChatPartsLayOutChatMl) {
  const ChatTemplate& chat = *chat_template_for("chatml").value();
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
