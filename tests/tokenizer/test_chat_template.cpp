// Chat templates (tokenizer/chat_template.h): ChatML's text, render() as the concatenation
// of the pieces, the factory's names.
#include <gtest/gtest.h>

#include <algorithm>

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer_test_util.h"

namespace hypic {
namespace {

using testing::qwen_tokenizer;

const ChatTemplate& chatml() {
  static const ChatTemplate* t = [] {
    auto r = chat_template_for("chatml");
    if (!r) std::abort();
    return r.value();
  }();
  return *t;
}

TEST(ChatMl, RendersTheKnownLayout) {
  const std::vector<ChatMessage> msgs = {{"system", "You are helpful."}, {"user", "Hi\nthere"}};
  EXPECT_EQ(chatml().render(msgs, false),
            "<|im_start|>system\nYou are helpful.<|im_end|>\n"
            "<|im_start|>user\nHi\nthere<|im_end|>\n");
  EXPECT_EQ(chatml().render(msgs, true),
            "<|im_start|>system\nYou are helpful.<|im_end|>\n"
            "<|im_start|>user\nHi\nthere<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(chatml().render({{"user", "Q"}, {"assistant", "A"}, {"user", ""}}, true),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n"
            "<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(chatml().render({}, true), "<|im_start|>assistant\n");
  EXPECT_EQ(chatml().render({}, false), "");
}

TEST(ChatMl, Pieces) {
  const ChatMl t;
  EXPECT_EQ(t.name(), "chatml");
  EXPECT_EQ(t.turn_open("system"), "<|im_start|>system\n");
  EXPECT_EQ(t.turn_open("user"), "<|im_start|>user\n");
  EXPECT_EQ(t.turn_close("user"), "<|im_end|>\n");
  EXPECT_EQ(t.turn_close("assistant"), "<|im_end|>\n");
  EXPECT_EQ(t.generation_prompt(), "<|im_start|>assistant\n");
}

TEST(ChatTemplate, PiecesConcatenateToTheRender) {
  const ChatTemplate& t = chatml();
  const std::vector<ChatMessage> msgs = {
      {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Doc one. Doc two. Why?"}};
  std::string pieces;
  for (const ChatMessage& m : msgs) pieces += t.turn_open(m.role) + m.content + t.turn_close(m.role);
  EXPECT_EQ(t.render(msgs, false), pieces);
  EXPECT_EQ(t.render(msgs, true), pieces + t.generation_prompt());
  // The PIC layout: documents and query placed inside the user turn, split anywhere.
  const std::string pic = t.turn_open("system") + "Be brief." + t.turn_close("system") +
                          t.turn_open("user") + "Doc one." + " Doc two." + " Why?" +
                          t.turn_close("user") + t.generation_prompt();
  EXPECT_EQ(t.render({msgs[0], msgs[3]}, true), pic);
}

TEST(ChatTemplate, FactoryKnowsChatMl) {
  auto t = chat_template_for("chatml");
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(t.value()->name(), "chatml");
  EXPECT_EQ(t.value(), chat_template_for("chatml").value());  // one instance
}

TEST(ChatTemplate, UnknownNameIsAnError) {
  for (const char* name : {"llama3", "", "ChatML", "chatml "}) {
    auto t = chat_template_for(name);
    ASSERT_FALSE(t.is_ok()) << name;
    EXPECT_EQ(t.status().code(), StatusCode::kNotFound) << name;
    std::string quoted = "'";
    quoted += name;
    quoted += '\'';
    EXPECT_NE(t.status().message().find(quoted), std::string::npos) << t.status().message();
    EXPECT_NE(t.status().message().find("chatml"), std::string::npos) << t.status().message();
  }
}

TEST(ChatMl, MarkersBecomeSingleSpecialIds) {
  const Tokenizer& tok = qwen_tokenizer();
  const std::string text = chatml().render({{"user", "Hallo, wie geht's?"}}, true);
  auto ids = tok.encode(text);
  int32_t start = tok.token_id("<|im_start|>"), end = tok.token_id("<|im_end|>");
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids.front(), start);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), start), 2);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), end), 1);
  EXPECT_EQ(tok.decode(ids), text);
  EXPECT_EQ(tok.decode(ids, true), "user\nHallo, wie geht's?\nassistant\n");
}

}  // namespace
}  // namespace hypic
