// Chat templates (tokenizer/chat_template.h): ChatML's text, the Bailing and MiniMax texts
// against their real Jinja templates, render() as the concatenation of the pieces, the
// factory's names, the markers as special tokens of each family's tokenizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <tuple>

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

// Each template's text for the same conversations, as the model's own Jinja template renders
// it (transformers' apply_chat_template; tools/render_chat_templates.py prints these). The
// Jinja texts are in tools/family_tokenizers.py, verbatim from:
//   bailing          inclusionAI/Ring-V2 resource/tokenizer/config_sft/tokenizer_config.json
//                    (the same file as inclusionAI/Ling-V2's)
//   minimax          MiniMax-AI/MiniMax-M1 tokenizer_config.json
//   minimax-text-01  MiniMaxAI/MiniMax-Text-01 tokenizer_config.json (a Hugging Face mirror)
//   chatml           tools/make_golden.py's template for the Qwen test checkpoints
//   kimi             Kimi-Linear-48B-A3B-Instruct's (partly reconstructed, see
//                    family_tokenizers.py KIMI_CHAT_TEMPLATE)
//   ling3[-nothink]  Ling-3.0's (reconstructed from ollama's BailingRenderer, which
//                    render_chat_templates.py checks it against), enable_thinking true / false
// MiniMax's templates read content[0]['text']: its messages were given as one text part.
struct JinjaCase {
  const char* name;
  std::vector<ChatMessage> msgs;
  bool add_generation_prompt;
  const char* text;
};

const std::vector<JinjaCase>& jinja_cases() {
  static const std::vector<JinjaCase> cases = {
    {"bailing", {{"system", "You are helpful."}, {"user", "Hi\nthere"}}, false,
     "<role>SYSTEM</role>You are helpful.\ndetailed thinking off<|role_end|><role>HUMAN</role>Hi\nthere<|role_end|>"},
    {"bailing", {{"system", "You are helpful."}, {"user", "Hi\nthere"}}, true,
     "<role>SYSTEM</role>You are helpful.\ndetailed thinking off<|role_end|><role>HUMAN</role>Hi\nthere<|role_end|><role>ASSISTANT</role>"},
    {"bailing", {{"user", "Q"}}, true,
     "<role>SYSTEM</role>detailed thinking off<|role_end|><role>HUMAN</role>Q<|role_end|><role>ASSISTANT</role>"},
    {"bailing", {{"user", "Q"}, {"assistant", "A"}, {"user", ""}}, true,
     "<role>SYSTEM</role>detailed thinking off<|role_end|><role>HUMAN</role>Q<|role_end|><role>ASSISTANT</role>A<|role_end|><role>HUMAN</role><|role_end|><role>ASSISTANT</role>"},
    {"bailing", {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Doc one. Doc two. Why?"}}, true,
     "<role>SYSTEM</role>Be brief.\ndetailed thinking off<|role_end|><role>HUMAN</role>Hi<|role_end|><role>ASSISTANT</role>Hello!<|role_end|><role>HUMAN</role>Doc one. Doc two. Why?<|role_end|><role>ASSISTANT</role>"},
    {"bailing", {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Doc one. Doc two. Why?"}}, false,
     "<role>SYSTEM</role>Be brief.\ndetailed thinking off<|role_end|><role>HUMAN</role>Hi<|role_end|><role>ASSISTANT</role>Hello!<|role_end|><role>HUMAN</role>Doc one. Doc two. Why?<|role_end|>"},
    {"bailing", {{"user", "a"}, {"system", "late"}, {"user", "b"}}, true,
     "<role>SYSTEM</role>detailed thinking off<|role_end|><role>HUMAN</role>a<|role_end|><role>SYSTEM</role>late<|role_end|><role>HUMAN</role>b<|role_end|><role>ASSISTANT</role>"},
    {"bailing", {{"system", ""}, {"user", "x"}}, true,
     "<role>SYSTEM</role>\ndetailed thinking off<|role_end|><role>HUMAN</role>x<|role_end|><role>ASSISTANT</role>"},
    {"minimax", {{"system", "You are helpful."}, {"user", "Hi\nthere"}}, false,
     "<begin_of_document><beginning_of_sentence>system ai_setting=assistant\nYou are helpful.<end_of_sentence>\n<beginning_of_sentence>user name=user\nHi\nthere<end_of_sentence>\n"},
    {"minimax", {{"system", "You are helpful."}, {"user", "Hi\nthere"}}, true,
     "<begin_of_document><beginning_of_sentence>system ai_setting=assistant\nYou are helpful.<end_of_sentence>\n<beginning_of_sentence>user name=user\nHi\nthere<end_of_sentence>\n<beginning_of_sentence>ai name=assistant\n"},
    {"minimax", {{"user", "Q"}}, true,
     "<begin_of_document><beginning_of_sentence>user name=user\nQ<end_of_sentence>\n<beginning_of_sentence>ai name=assistant\n"},
    {"minimax", {{"user", "Q"}, {"assistant", "A"}, {"user", ""}}, true,
     "<begin_of_document><beginning_of_sentence>user name=user\nQ<end_of_sentence>\n<beginning_of_sentence>ai name=assistant\nA<end_of_sentence>\n<beginning_of_sentence>user name=user\n<end_of_sentence>\n<beginning_of_sentence>ai name=assistant\n"},
    {"minimax", {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Doc one. Doc two. Why?"}}, true,
     "<begin_of_document><beginning_of_sentence>system ai_setting=assistant\nBe brief.<end_of_sentence>\n<beginning_of_sentence>user name=user\nHi<end_of_sentence>\n<beginning_of_sentence>ai name=assistant\nHello!<end_of_sentence>\n<beginning_of_sentence>user name=user\nDoc one. Doc two. Why?<end_of_sentence>\n<beginning_of_sentence>ai name=assistant\n"},
    {"minimax", {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Doc one. Doc two. Why?"}}, false,
     "<begin_of_document><beginning_of_sentence>system ai_setting=assistant\nBe brief.<end_of_sentence>\n<beginning_of_sentence>user name=user\nHi<end_of_sentence>\n<beginning_of_sentence>ai name=assistant\nHello!<end_of_sentence>\n<beginning_of_sentence>user name=user\nDoc one. Doc two. Why?<end_of_sentence>\n"},
    {"minimax-text-01", {{"system", "You are helpful."}, {"user", "Hi\nthere"}}, false,
     "<beginning_of_sentence>system ai_setting=assistant\nYou are helpful.<end_of_sentence>\n<beginning_of_sentence>user name=user\nHi\nthere<end_of_sentence>\n"},
    {"minimax-text-01", {{"system", "You are helpful."}, {"user", "Hi\nthere"}}, true,
     "<beginning_of_sentence>system ai_setting=assistant\nYou are helpful.<end_of_sentence>\n<beginning_of_sentence>user name=user\nHi\nthere<end_of_sentence>\n<beginning_of_sentence>ai name=assistant\n"},
    {"minimax-text-01", {{"user", "Q"}}, true,
     "<beginning_of_sentence>user name=user\nQ<end_of_sentence>\n<beginning_of_sentence>ai name=assistant\n"},
    {"minimax-text-01", {{"user", "Q"}, {"assistant", "A"}, {"user", ""}}, true,
     "<beginning_of_sentence>user name=user\nQ<end_of_sentence>\n<beginning_of_sentence>ai name=assistant\nA<end_of_sentence>\n<beginning_of_sentence>user name=user\n<end_of_sentence>\n<beginning_of_sentence>ai name=assistant\n"},
    {"minimax-text-01", {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Doc one. Doc two. Why?"}}, true,
     "<beginning_of_sentence>system ai_setting=assistant\nBe brief.<end_of_sentence>\n<beginning_of_sentence>user name=user\nHi<end_of_sentence>\n<beginning_of_sentence>ai name=assistant\nHello!<end_of_sentence>\n<beginning_of_sentence>user name=user\nDoc one. Doc two. Why?<end_of_sentence>\n<beginning_of_sentence>ai name=assistant\n"},
    {"minimax-text-01", {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Doc one. Doc two. Why?"}}, false,
     "<beginning_of_sentence>system ai_setting=assistant\nBe brief.<end_of_sentence>\n<beginning_of_sentence>user name=user\nHi<end_of_sentence>\n<beginning_of_sentence>ai name=assistant\nHello!<end_of_sentence>\n<beginning_of_sentence>user name=user\nDoc one. Doc two. Why?<end_of_sentence>\n"},
    {"kimi", {{"system", "You are helpful."}, {"user", "Hi\nthere"}}, false,
     "<|im_system|>system<|im_middle|>You are helpful.<|im_end|><|im_user|>user<|im_middle|>Hi\nthere<|im_end|>"},
    {"kimi", {{"system", "You are helpful."}, {"user", "Hi\nthere"}}, true,
     "<|im_system|>system<|im_middle|>You are helpful.<|im_end|><|im_user|>user<|im_middle|>Hi\nthere<|im_end|><|im_assistant|>assistant<|im_middle|>"},
    {"kimi", {{"user", "Q"}}, true,
     "<|im_user|>user<|im_middle|>Q<|im_end|><|im_assistant|>assistant<|im_middle|>"},
    {"kimi", {{"user", "Q"}, {"assistant", "A"}, {"user", ""}}, true,
     "<|im_user|>user<|im_middle|>Q<|im_end|><|im_assistant|>assistant<|im_middle|>A<|im_end|><|im_user|>user<|im_middle|><|im_end|><|im_assistant|>assistant<|im_middle|>"},
    {"kimi", {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Doc one. Doc two. Why?"}}, true,
     "<|im_system|>system<|im_middle|>Be brief.<|im_end|><|im_user|>user<|im_middle|>Hi<|im_end|><|im_assistant|>assistant<|im_middle|>Hello!<|im_end|><|im_user|>user<|im_middle|>Doc one. Doc two. Why?<|im_end|><|im_assistant|>assistant<|im_middle|>"},
    {"kimi", {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Doc one. Doc two. Why?"}}, false,
     "<|im_system|>system<|im_middle|>Be brief.<|im_end|><|im_user|>user<|im_middle|>Hi<|im_end|><|im_assistant|>assistant<|im_middle|>Hello!<|im_end|><|im_user|>user<|im_middle|>Doc one. Doc two. Why?<|im_end|>"},
    {"kimi", {{"user", "a"}, {"system", "late"}, {"user", "b"}}, true,
     "<|im_user|>user<|im_middle|>a<|im_end|><|im_system|>system<|im_middle|>late<|im_end|><|im_user|>user<|im_middle|>b<|im_end|><|im_assistant|>assistant<|im_middle|>"},
    {"kimi", {{"system", ""}, {"user", "x"}}, true,
     "<|im_system|>system<|im_middle|><|im_end|><|im_user|>user<|im_middle|>x<|im_end|><|im_assistant|>assistant<|im_middle|>"},
    {"ling3", {{"system", "You are helpful."}, {"user", "Hi\nthere"}}, false,
     "<role>SYSTEM</role>You are helpful.\ndetailed thinking on<|role_end|><role>HUMAN</role>Hi\nthere<|role_end|>"},
    {"ling3", {{"system", "You are helpful."}, {"user", "Hi\nthere"}}, true,
     "<role>SYSTEM</role>You are helpful.\ndetailed thinking on<|role_end|><role>HUMAN</role>Hi\nthere<|role_end|><role>ASSISTANT</role>\n<think>"},
    {"ling3", {{"user", "Q"}}, true,
     "<role>SYSTEM</role>detailed thinking on<|role_end|><role>HUMAN</role>Q<|role_end|><role>ASSISTANT</role>\n<think>"},
    {"ling3", {{"user", "Q"}, {"assistant", "A"}, {"user", ""}}, true,
     "<role>SYSTEM</role>detailed thinking on<|role_end|><role>HUMAN</role>Q<|role_end|><role>ASSISTANT</role>\n<think></think>A<|role_end|><role>HUMAN</role><|role_end|><role>ASSISTANT</role>\n<think>"},
    {"ling3", {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Doc one. Doc two. Why?"}}, true,
     "<role>SYSTEM</role>Be brief.\ndetailed thinking on<|role_end|><role>HUMAN</role>Hi<|role_end|><role>ASSISTANT</role>\n<think></think>Hello!<|role_end|><role>HUMAN</role>Doc one. Doc two. Why?<|role_end|><role>ASSISTANT</role>\n<think>"},
    {"ling3", {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Doc one. Doc two. Why?"}}, false,
     "<role>SYSTEM</role>Be brief.\ndetailed thinking on<|role_end|><role>HUMAN</role>Hi<|role_end|><role>ASSISTANT</role>\n<think></think>Hello!<|role_end|><role>HUMAN</role>Doc one. Doc two. Why?<|role_end|>"},
    {"ling3", {{"user", "a"}, {"system", "late"}, {"user", "b"}}, true,
     "<role>SYSTEM</role>detailed thinking on<|role_end|><role>HUMAN</role>a<|role_end|><role>SYSTEM</role>late<|role_end|><role>HUMAN</role>b<|role_end|><role>ASSISTANT</role>\n<think>"},
    {"ling3", {{"system", ""}, {"user", "x"}}, true,
     "<role>SYSTEM</role>\ndetailed thinking on<|role_end|><role>HUMAN</role>x<|role_end|><role>ASSISTANT</role>\n<think>"},
    {"ling3-nothink", {{"system", "You are helpful."}, {"user", "Hi\nthere"}}, false,
     "<role>SYSTEM</role>You are helpful.\ndetailed thinking off<|role_end|><role>HUMAN</role>Hi\nthere<|role_end|>"},
    {"ling3-nothink", {{"system", "You are helpful."}, {"user", "Hi\nthere"}}, true,
     "<role>SYSTEM</role>You are helpful.\ndetailed thinking off<|role_end|><role>HUMAN</role>Hi\nthere<|role_end|><role>ASSISTANT</role>\n<think></think>"},
    {"ling3-nothink", {{"user", "Q"}}, true,
     "<role>SYSTEM</role>detailed thinking off<|role_end|><role>HUMAN</role>Q<|role_end|><role>ASSISTANT</role>\n<think></think>"},
    {"ling3-nothink", {{"user", "Q"}, {"assistant", "A"}, {"user", ""}}, true,
     "<role>SYSTEM</role>detailed thinking off<|role_end|><role>HUMAN</role>Q<|role_end|><role>ASSISTANT</role>\n<think></think>A<|role_end|><role>HUMAN</role><|role_end|><role>ASSISTANT</role>\n<think></think>"},
    {"ling3-nothink", {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Doc one. Doc two. Why?"}}, true,
     "<role>SYSTEM</role>Be brief.\ndetailed thinking off<|role_end|><role>HUMAN</role>Hi<|role_end|><role>ASSISTANT</role>\n<think></think>Hello!<|role_end|><role>HUMAN</role>Doc one. Doc two. Why?<|role_end|><role>ASSISTANT</role>\n<think></think>"},
    {"ling3-nothink", {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Doc one. Doc two. Why?"}}, false,
     "<role>SYSTEM</role>Be brief.\ndetailed thinking off<|role_end|><role>HUMAN</role>Hi<|role_end|><role>ASSISTANT</role>\n<think></think>Hello!<|role_end|><role>HUMAN</role>Doc one. Doc two. Why?<|role_end|>"},
    {"ling3-nothink", {{"user", "a"}, {"system", "late"}, {"user", "b"}}, true,
     "<role>SYSTEM</role>detailed thinking off<|role_end|><role>HUMAN</role>a<|role_end|><role>SYSTEM</role>late<|role_end|><role>HUMAN</role>b<|role_end|><role>ASSISTANT</role>\n<think></think>"},
    {"ling3-nothink", {{"system", ""}, {"user", "x"}}, true,
     "<role>SYSTEM</role>\ndetailed thinking off<|role_end|><role>HUMAN</role>x<|role_end|><role>ASSISTANT</role>\n<think></think>"},
    {"chatml", {{"system", "You are helpful."}, {"user", "Hi\nthere"}}, false,
     "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi\nthere<|im_end|>\n"},
    {"chatml", {{"system", "You are helpful."}, {"user", "Hi\nthere"}}, true,
     "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi\nthere<|im_end|>\n<|im_start|>assistant\n"},
    {"chatml", {{"user", "Q"}}, true,
     "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n"},
    {"chatml", {{"user", "Q"}, {"assistant", "A"}, {"user", ""}}, true,
     "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n"},
    {"chatml", {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Doc one. Doc two. Why?"}}, true,
     "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nDoc one. Doc two. Why?<|im_end|>\n<|im_start|>assistant\n"},
    {"chatml", {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Doc one. Doc two. Why?"}}, false,
     "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nDoc one. Doc two. Why?<|im_end|>\n"},
  };
  return cases;
}

const ChatTemplate& named(const char* name) {
  auto r = chat_template_for(name);
  if (!r) std::abort();
  return *r.value();
}

TEST(ChatTemplate, RendersAsTheRealJinjaTemplate) {
  for (const JinjaCase& c : jinja_cases()) {
    std::string roles;
    for (const ChatMessage& m : c.msgs) roles += m.role + " ";
    EXPECT_EQ(named(c.name).render(c.msgs, c.add_generation_prompt), c.text)
        << c.name << ": " << roles << (c.add_generation_prompt ? "+ generation prompt" : "");
  }
}

TEST(ChatTemplate, MessagePiecesConcatenateToTheRenderForEveryTemplate) {
  for (const char* name : {"chatml", "bailing", "minimax", "minimax-text-01", "kimi", "ling3",
                           "ling3-nothink"}) {
    const ChatTemplate& t = named(name);
    for (const JinjaCase& c : jinja_cases()) {
      std::string pieces;
      for (size_t i = 0; i < c.msgs.size(); ++i)
        pieces += t.message_open(i, c.msgs[i].role) + c.msgs[i].content + t.message_close(i, c.msgs[i].role);
      EXPECT_EQ(t.render(c.msgs, false), pieces) << name;
      EXPECT_EQ(t.render(c.msgs, true), pieces + t.generation_prompt()) << name;
    }
    EXPECT_EQ(t.render({}, true), t.conversation_open("") + t.generation_prompt()) << name;
  }
}

TEST(Bailing, Pieces) {
  const ChatTemplate& t = named("bailing");
  EXPECT_EQ(t.name(), "bailing");
  EXPECT_EQ(t.turn_open("user"), "<role>HUMAN</role>");
  EXPECT_EQ(t.turn_open("assistant"), "<role>ASSISTANT</role>");
  EXPECT_EQ(t.turn_open("system"), "<role>SYSTEM</role>");
  EXPECT_EQ(t.turn_close("user"), "<|role_end|>");
  EXPECT_EQ(t.generation_prompt(), "<role>ASSISTANT</role>");
  // The default system turn, and a leading system message's close.
  EXPECT_EQ(t.conversation_open("user"), "<role>SYSTEM</role>detailed thinking off<|role_end|>");
  EXPECT_EQ(t.conversation_open("system"), "");
  EXPECT_EQ(t.message_open(0, "system"), "<role>SYSTEM</role>");
  EXPECT_EQ(t.message_close(0, "system"), "\ndetailed thinking off<|role_end|>");
  EXPECT_EQ(t.message_close(1, "system"), "<|role_end|>");
  EXPECT_EQ(t.message_open(0, "user"), "<role>SYSTEM</role>detailed thinking off<|role_end|><role>HUMAN</role>");
}

TEST(Kimi, Pieces) {
  const ChatTemplate& t = named("kimi");
  EXPECT_EQ(t.turn_open("system"), "<|im_system|>system<|im_middle|>");
  EXPECT_EQ(t.turn_open("user"), "<|im_user|>user<|im_middle|>");
  EXPECT_EQ(t.turn_open("assistant"), "<|im_assistant|>assistant<|im_middle|>");
  EXPECT_EQ(t.turn_open("tool"), "<|im_system|>tool<|im_middle|>");
  EXPECT_EQ(t.turn_close("user"), "<|im_end|>");
  EXPECT_EQ(t.generation_prompt(), "<|im_assistant|>assistant<|im_middle|>");
  EXPECT_EQ(t.conversation_open("user"), "");
  EXPECT_EQ(t.end_tokens(), (std::vector<std::string>{"<|im_end|>", "[EOS]"}));
}

TEST(Ling3, Pieces) {
  const ChatTemplate& on = named("ling3");
  const ChatTemplate& off = named("ling3-nothink");
  for (const ChatTemplate* t : {&on, &off}) {
    EXPECT_EQ(t->turn_open("user"), "<role>HUMAN</role>");
    EXPECT_EQ(t->turn_open("system"), "<role>SYSTEM</role>");
    EXPECT_EQ(t->turn_open("assistant"), "<role>ASSISTANT</role>\n<think></think>");
    EXPECT_EQ(t->turn_close("assistant"), "<|role_end|>");
    EXPECT_EQ(t->conversation_open("system"), "");
    EXPECT_EQ(t->end_tokens(), (std::vector<std::string>{"<|role_end|>", "<|endoftext|>"}));
  }
  EXPECT_EQ(on.generation_prompt(), "<role>ASSISTANT</role>\n<think>");
  EXPECT_EQ(off.generation_prompt(), "<role>ASSISTANT</role>\n<think></think>");
  EXPECT_EQ(on.conversation_open("user"), "<role>SYSTEM</role>detailed thinking on<|role_end|>");
  EXPECT_EQ(off.message_close(0, "system"), "\ndetailed thinking off<|role_end|>");
  EXPECT_NE(&on, &named("bailing"));
}

TEST(MiniMax, Pieces) {
  const ChatTemplate& m1 = named("minimax");
  const ChatTemplate& t01 = named("minimax-text-01");
  EXPECT_EQ(m1.name(), "minimax");
  EXPECT_EQ(t01.name(), "minimax-text-01");
  for (const ChatTemplate* t : {&m1, &t01}) {
    EXPECT_EQ(t->turn_open("system"), "<beginning_of_sentence>system ai_setting=assistant\n");
    EXPECT_EQ(t->turn_open("user"), "<beginning_of_sentence>user name=user\n");
    EXPECT_EQ(t->turn_open("assistant"), "<beginning_of_sentence>ai name=assistant\n");
    EXPECT_EQ(t->turn_close("user"), "<end_of_sentence>\n");
    EXPECT_EQ(t->generation_prompt(), "<beginning_of_sentence>ai name=assistant\n");
  }
  EXPECT_EQ(m1.conversation_open("user"), "<begin_of_document>");
  EXPECT_EQ(t01.conversation_open("user"), "");
}

// Every marker a template writes is one special token of the family's tokenizer
// (tests/data/tokenizer/<family>_tokenizer.json, made by tools/family_tokenizers.py), and the
// text round-trips.
TEST(ChatTemplate, MarkersAreSpecialTokensOfTheFamilyTokenizer) {
  for (auto [name, file, markers] :
       {std::tuple{"bailing", "bailing_tokenizer.json",
                   std::vector<std::string>{"<role>", "</role>", "<|role_end|>"}},
        std::tuple{"minimax", "minimax_tokenizer.json",
                   std::vector<std::string>{"<begin_of_document>", "<beginning_of_sentence>",
                                            "<end_of_sentence>"}},
        std::tuple{"kimi", "kimi",
                   std::vector<std::string>{"<|im_system|>", "<|im_user|>", "<|im_assistant|>",
                                            "<|im_middle|>", "<|im_end|>"}},
        std::tuple{"ling3", "ling3_tokenizer.json",
                   std::vector<std::string>{"<role>", "</role>", "<|role_end|>"}}}) {
    const Tokenizer tok = testing::load_or_die(testing::tok_data(file));
    const std::string text = named(name).render({{"system", "Sei kurz."}, {"user", "Hallo, wie geht's?"}}, true);
    const auto ids = tok.encode(text);
    size_t count = 0;
    for (const std::string& m : markers) {
      const int32_t id = tok.token_id(m);
      ASSERT_GE(id, 0) << name << " " << m;
      EXPECT_TRUE(tok.is_special(id)) << name << " " << m;
      count += size_t(std::count(ids.begin(), ids.end(), id));
    }
    size_t expected = 0;
    for (const std::string& m : markers)
      for (size_t at = text.find(m); at != std::string::npos; at = text.find(m, at + 1)) ++expected;
    EXPECT_EQ(count, expected) << name;
    EXPECT_EQ(tok.decode(ids), text) << name;
    // Content never becomes a marker.
    EXPECT_GT(tok.encode(markers[0], /*parse_special=*/false).size(), 1u) << name;
  }
}

TEST(ChatTemplate, FactoryKnowsChatMl) {
  auto t = chat_template_for("chatml");
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(t.value()->name(), "chatml");
  EXPECT_EQ(t.value(), chat_template_for("chatml").value());  // one instance
}

TEST(ChatTemplate, FactoryKnowsEveryFamily) {
  for (const char* name : {"chatml", "bailing", "minimax", "minimax-text-01", "kimi", "ling3",
                           "ling3-nothink"}) {
    auto t = chat_template_for(name);
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    EXPECT_EQ(t.value()->name(), name);
    EXPECT_EQ(t.value(), chat_template_for(name).value());
  }
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
    for (const char* known : {"chatml", "bailing", "minimax", "minimax-text-01", "kimi", "ling3",
                              "ling3-nothink"})
      EXPECT_NE(t.status().message().find(known), std::string::npos) << t.status().message();
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
