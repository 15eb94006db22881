// Reasoning (Qwen3.5's <think> block): replies read apart into reasoning and content (whole
// and split at every byte: the same result), the prompt as the Qwen3.5 checkpoints' chat
// template writes it (the generation prompt opens the block, or writes it closed; history
// keeps reasoning only after the last user query), and the request fields.
#include <gtest/gtest.h>

#include "api/reasoning.h"
#include "api/request.h"
#include "api/request_tools.h"
#include "server/engine_request.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace hypic::server {

using namespace api;
namespace {

const ChatTemplate& q35() { return *chat_template_for("qwen3.5").value(); }

ReasoningReader::Out read_whole(const std::vector<std::string>& pieces) {
  ReasoningReader r;
  ReasoningReader::Out all;
  auto add = [&](ReasoningReader::Out o) {
    all.reasoning += o.reasoning;
    all.content += o.content;
  };
  for (const std::string& p : pieces) add(r.feed(p));
  add(r.finish());
  return all;
}

// The reply whole, in two pieces cut at every byte, and byte by byte.
void expect_split(const std::string& reply, const std::string& reasoning, const std::string& content) {
  auto check = [&](const std::vector<std::string>& pieces, const std::string& how) {
    const ReasoningReader::Out o = read_whole(pieces);
    EXPECT_EQ(o.reasoning, reasoning) << how;
    EXPECT_EQ(o.content, content) << how;
  };
  check({reply}, "whole");
  for (size_t i = 0; i <= reply.size(); ++i) check({reply.substr(0, i), reply.substr(i)}, "cut at " + std::to_string(i));
  std::vector<std::string> bytes;
  for (char c : reply) bytes.emplace_back(1, c);
  check(bytes, "byte by byte");
}

TEST(Reasoning, ReplyReadApartAtEveryCut) {
  expect_split("Two primes.\nSo 5.\n</think>\n\nThe answer is 5.", "Two primes.\nSo 5.", "The answer is 5.");
  expect_split("\n</think>\n\nHi", "", "Hi");  // thinking skipped: an empty block
  expect_split("a < b </thin k\n\n</think>\n\nx\n\ny\n", "a < b </thin k", "x\n\ny\n");
  // Cut by max_tokens inside the reasoning: all of it is reasoning, no content.
  expect_split("Still thinking\n", "Still thinking", "");
  expect_split("Still </thi", "Still </thi", "");
}

TEST(Reasoning, StreamsReasoningAsItComes) {
  ReasoningReader r;
  EXPECT_EQ(r.feed("Let me").reasoning, "Let me");
  EXPECT_EQ(r.feed(" see\n").reasoning, " see");  // the newline waits: it may precede the marker
  EXPECT_EQ(r.feed("ok</").reasoning, "\nok");    // "</" may begin the marker
  const ReasoningReader::Out o = r.feed("think>\n\nDone");
  EXPECT_EQ(o.reasoning, "");
  EXPECT_EQ(o.content, "Done");
}

ApiRequest chat(const std::string& messages, const std::string& extra = "") {
  ApiRequest r;
  auto e = parse_request(R"({"model":"m","messages":)" + messages + extra + "}", Endpoint::kChat, RequestLimits{}, &r);
  EXPECT_FALSE(e) << (e ? e->message : "");
  return r;
}

std::string prompt(const ApiRequest& r) {
  auto tok = Tokenizer::load(std::string(HYPIC_SOURCE_DIR) + "/tests/models/qwen3_5_dense/tokenizer.json");
  EXPECT_TRUE(tok.is_ok());
  PromptParts p;
  auto e = build_prompt(*tok, q35(), r, 1 << 20, &p);
  EXPECT_FALSE(e) << (e ? e->message : "");
  return tok->decode(p.concatenated());
}

// The text Qwen3.5-4B's chat template (llama.cpp models/templates/Qwen3.5-4B.jinja) renders
// for these messages: the reasoning of the turn before the last user query is dropped, that
// of the turn after it (a tool loop) kept, from reasoning_content or from <think> in content.
TEST(Reasoning, Qwen35HistoryAndGenerationPrompt) {
  const std::string msgs = R"([{"role":"system","content":"S"},{"role":"user","content":"Q1"},
      {"role":"assistant","content":"A1","reasoning_content":"r1"},{"role":"user","content":"Q2"},
      {"role":"assistant","content":"<think>\nr2\n</think>\n\nCalling.","tool_calls":[{"id":"a","type":"function","function":{"name":"get_time","arguments":"{\"tz\": \"UTC\"}"}}]},
      {"role":"tool","tool_call_id":"a","content":"12:00"}])";
  const std::string history =
      "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
      "<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n<think>\nr2\n</think>\n\nCalling.\n\n<tool_call>\n"
      "<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n</function>\n</tool_call><|im_end|>\n"
      "<|im_start|>user\n<tool_response>\n12:00\n</tool_response><|im_end|>\n";
  ApiRequest on = chat(msgs);
  on.reasoning = q35().reasoning_format();
  on.thinking = true;
  EXPECT_EQ(prompt(on), history + "<|im_start|>assistant\n<think>\n");
  ApiRequest off = on;
  off.thinking = false;  // enable_thinking false
  EXPECT_EQ(prompt(off), history + "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  // A model that does not reason (hypic-tiny's plain ChatML): content as given, nothing added.
  ApiRequest plain = chat(R"([{"role":"user","content":"Q1"},{"role":"assistant","content":"A1","reasoning_content":"r1"},
      {"role":"user","content":"Q2"}])");
  EXPECT_EQ(prompt(plain), "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n"
                           "<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n");
}

// tool_choice auto while thinking: the call grammar's trigger counts only after the block's
// close (a call written in the reasoning is thought, not a call); without reasoning, at once.
TEST(Reasoning, CallTriggerWaitsForTheEndOfTheThought) {
  const std::string tools = R"(,"tools":[{"type":"function","function":{"name":"get_time","parameters":{"type":"object"}}}])";
  ApiRequest r = chat(R"([{"role":"user","content":"Q"}])", tools);
  ASSERT_FALSE(request_grammar(q35(), &r));
  ASSERT_FALSE(r.grammar_trigger.empty());
  r.reasoning = q35().reasoning_format();
  r.thinking = true;
  EXPECT_EQ(generate_options(r).grammar_gate, "\n</think>\n\n");
  r.thinking = false;
  EXPECT_EQ(generate_options(r).grammar_gate, "");
  r.reasoning = nullptr;
  EXPECT_EQ(generate_options(r).grammar_gate, "");
}

TEST(Reasoning, RequestFields) {
  EXPECT_FALSE(chat(R"([{"role":"user","content":"Q"}])").enable_thinking.has_value());
  EXPECT_EQ(chat(R"([{"role":"user","content":"Q"}])", R"(,"chat_template_kwargs":{"enable_thinking":false})").enable_thinking,
            std::optional<bool>(false));
  EXPECT_EQ(chat(R"([{"role":"user","content":"Q"}])", R"(,"chat_template_kwargs":{"other":1})").enable_thinking, std::nullopt);
  auto bad = [](const std::string& b, const std::string& param) {
    ApiRequest r;
    auto e = parse_request(b, Endpoint::kChat, RequestLimits{}, &r);
    ASSERT_TRUE(e) << b;
    EXPECT_EQ(e->param, param);
  };
  bad(R"({"model":"m","messages":[{"role":"user","content":"Q"}],"chat_template_kwargs":{"enable_thinking":"no"}})",
      "chat_template_kwargs.enable_thinking");
  bad(R"({"model":"m","messages":[{"role":"user","content":"Q"}],"chat_template_kwargs":[]})", "chat_template_kwargs");
  bad(R"({"model":"m","messages":[{"role":"user","content":"Q","reasoning_content":"r"}]})", "messages[0].reasoning_content");
  bad(R"({"model":"m","messages":[{"role":"assistant","content":"A","reasoning_content":1},{"role":"user","content":"Q"}]})",
      "messages[0].reasoning_content");
}

}  // namespace
}  // namespace hypic::server
