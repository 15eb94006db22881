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

TEST(Prompt, FamiliesUseTheirChatTemplates) {
  for (auto [type, want] : {std::pair{"qwen3_next", "chatml"}, {"qwen3_5", "qwen3.5"},
                            {"qwen3_5_moe", "qwen3.5"}, {"bailing_moe_linear", "bailing"},
                            {"minimax_m1", "minimax"}, {"minimax_text_01", "minimax-text-01"},
                            {"minimax", "minimax-text-01"}}) {
    ModelConfig cfg;
    cfg.arch = find_architecture(type);
    cfg.model_type = type;
    ASSERT_NE(cfg.arch, nullptr) << type;
    EXPECT_EQ(model_chat_template(cfg).name(), want) << type;
  }
  // Every registered family names a template that exists.
  for (const Architecture* a : architectures())
    for (const std::string& type : a->model_types()) {
      ModelConfig cfg;
      cfg.arch = a;
      cfg.model_type = type;
      EXPECT_TRUE(chat_template_for(a->chat_template(cfg)).is_ok()) << a->name() << " " << type;
    }
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

// Bailing (Ling / Ring 2.0): a default system turn when there is no system message, and the
// leading system message closed with the thinking switch (texts: the real Jinja template, see
// tests/tokenizer/test_chat_template.cpp). The prefix is one text, so it tokenises as HF does.
TEST(Prompt, ChatPartsLayOutBailing) {
  auto r = Tokenizer::load(std::string(HYPIC_SOURCE_DIR) + "/tests/data/tokenizer/bailing_tokenizer.json");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const Tokenizer& btok = r.value();
  const ChatTemplate& chat = *chat_template_for("bailing").value();
  const PromptParts p = chat_parts(chat, btok, "Be brief.", {"Doc one.", "Two."}, "Why?");
  EXPECT_EQ(p.prefix, btok.encode("<role>SYSTEM</role>Be brief.\ndetailed thinking off<|role_end|><role>HUMAN</role>"));
  ASSERT_EQ(p.segments.size(), 2u);
  EXPECT_EQ(p.segments[0], btok.encode("Doc one.", /*parse_special=*/false));
  auto suffix = btok.encode("Why?", /*parse_special=*/false);
  btok.encode_append("<|role_end|><role>ASSISTANT</role>", suffix);
  EXPECT_EQ(p.suffix, suffix);
  EXPECT_EQ(chat_parts(chat, btok, "", {}, "Q").prefix,
            btok.encode("<role>SYSTEM</role>detailed thinking off<|role_end|><role>HUMAN</role>"));
}

TEST(Prompt, ChatPartsLayOutMiniMax) {
  auto r = Tokenizer::load(std::string(HYPIC_SOURCE_DIR) + "/tests/data/tokenizer/minimax_tokenizer.json");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const Tokenizer& mtok = r.value();
  const ChatTemplate& chat = *chat_template_for("minimax").value();
  const PromptParts p = chat_parts(chat, mtok, "Be brief.", {"Doc one."}, "Why?");
  EXPECT_EQ(p.prefix, mtok.encode("<begin_of_document><beginning_of_sentence>system ai_setting=assistant\n"
                                  "Be brief.<end_of_sentence>\n<beginning_of_sentence>user name=user\n"));
  auto suffix = mtok.encode("Why?", /*parse_special=*/false);
  mtok.encode_append("<end_of_sentence>\n<beginning_of_sentence>ai name=assistant\n", suffix);
  EXPECT_EQ(p.suffix, suffix);
}

}  // namespace
}  // namespace hypic
