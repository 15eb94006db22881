// Chat / completions requests -> PromptParts (ChatML turns, segments tokenised on their own).
#include <gtest/gtest.h>

#include <tuple>

#include "engine/prompt.h"
#include "server/engine_request.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace hypic::server {

using namespace api;
namespace {

const Tokenizer& tok() {
  static Tokenizer* t = [] {
    auto r = Tokenizer::load(std::string(HYPIC_SOURCE_DIR) + "/tests/models/qwen3_5_dense/tokenizer.json");
    if (!r) std::abort();
    return new Tokenizer(std::move(r).value());
  }();
  return *t;
}

const ChatTemplate& chat() {
  static const ChatTemplate* t = [] {
    auto r = chat_template_for("chatml");
    if (!r) std::abort();
    return r.value();
  }();
  return *t;
}

ApiRequest parse(const std::string& body, Endpoint ep = Endpoint::kChat) {
  ApiRequest r;
  auto e = parse_request(body, ep, RequestLimits{}, &r);
  EXPECT_FALSE(e) << (e ? e->message : "");
  return r;
}

TEST(PromptMap, SegmentsMatchChatParts) {
  // Same layout as `hypic run --segment`: server entries and CLI entries coincide.
  for (const std::string system : {"", "You are helpful."}) {
    std::string msgs = system.empty() ? "" : R"({"role":"system","content":")" + system + R"("},)";
    ApiRequest r = parse(R"({"model":"m","messages":[)" + msgs + R"({"role":"user","content":[
        {"type":"text","text":"First document.","cache_control":{"type":"segment"}},
        {"type":"text","text":"Second one.","hypic_segment":true},
        {"type":"text","text":"What now?"}]}]})");
    PromptParts p;
    ASSERT_FALSE(build_prompt(tok(), chat(), r, 100000, &p));
    PromptParts want = chat_parts(chat(), tok(), system, {"First document.", "Second one."}, "What now?");
    EXPECT_EQ(p.prefix, want.prefix) << system;
    EXPECT_EQ(p.segments, want.segments) << system;
    EXPECT_EQ(p.suffix, want.suffix) << system;
  }
}

TEST(PromptMap, TextBeforeSegmentsJoinsPrefix) {
  ApiRequest r = parse(R"({"model":"m","messages":[{"role":"user","content":[
      {"type":"text","text":"Read: "},
      {"type":"text","text":"Doc","hypic_segment":true},
      {"type":"text","text":"Q"}]}]})");
  PromptParts p;
  ASSERT_FALSE(build_prompt(tok(), chat(), r, 100000, &p));
  auto want = tok().encode("<|im_start|>user\n");
  tok().encode_append("Read: ", want, false);
  EXPECT_EQ(p.prefix, want);
  ASSERT_EQ(p.segments.size(), 1u);
  EXPECT_EQ(p.segments[0], tok().encode("Doc", false));
}

TEST(PromptMap, NoSegmentsIsPlainChatML) {
  ApiRequest r = parse(R"({"model":"m","messages":[{"role":"system","content":"Be brief."},
      {"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"},
      {"role":"user","content":[{"type":"text","text":"How "},{"type":"text","text":"are you?"}]}]})");
  PromptParts p;
  ASSERT_FALSE(build_prompt(tok(), chat(), r, 100000, &p));
  EXPECT_TRUE(p.segments.empty());
  EXPECT_FALSE(p.suffix.empty());
  EXPECT_EQ(prompt_text(chat(), r),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n"
            "<|im_start|>assistant\n");
  EXPECT_EQ(p.concatenated(), tok().encode(prompt_text(chat(), r)));
}

// The other families: the same messages give their template's text (as the real Jinja
// renders it) and, where every content borders on a special token, HF's ids for that text.
TEST(PromptMap, BailingAndMiniMaxFollowTheirTemplates) {
  const std::string body = R"({"model":"m","messages":[{"role":"system","content":"Be brief"},
      {"role":"user","content":"Hi"},{"role":"assistant","content":"Hello!"},
      {"role":"user","content":"How are you?"}]})";
  ApiRequest r = parse(body);
  for (auto [name, file, text] :
       {std::tuple{"bailing", "bailing_tokenizer.json",
                   "<role>SYSTEM</role>Be brief\ndetailed thinking off<|role_end|><role>HUMAN</role>Hi<|role_end|>"
                   "<role>ASSISTANT</role>Hello!<|role_end|><role>HUMAN</role>How are you?<|role_end|>"
                   "<role>ASSISTANT</role>"},
        std::tuple{"minimax", "minimax_tokenizer.json",
                   "<begin_of_document><beginning_of_sentence>system ai_setting=assistant\nBe brief<end_of_sentence>\n"
                   "<beginning_of_sentence>user name=user\nHi<end_of_sentence>\n"
                   "<beginning_of_sentence>ai name=assistant\nHello!<end_of_sentence>\n"
                   "<beginning_of_sentence>user name=user\nHow are you?<end_of_sentence>\n"
                   "<beginning_of_sentence>ai name=assistant\n"}}) {
    auto t = Tokenizer::load(std::string(HYPIC_SOURCE_DIR) + "/tests/data/tokenizer/" + file);
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    const ChatTemplate& c = *chat_template_for(name).value();
    EXPECT_EQ(prompt_text(c, r), text) << name;
    PromptParts p;
    ASSERT_FALSE(build_prompt(t.value(), c, r, 100000, &p));
    EXPECT_EQ(p.concatenated(), t.value().encode(text)) << name;
  }
  // Known difference from HF's whole-text encoding: message content is tokenised on its own,
  // so a piece that would span content and template text not separated by a special token is
  // cut there. Bailing's leading system turn has such a boundary ("\ndetailed thinking off"
  // follows the content): "Be brief." + "\n" are pieces "." and "\n" here, ".\n" for HF.
}

TEST(PromptMap, SpecialTokenTextInContentStaysText) {
  ApiRequest r = parse(R"({"model":"m","messages":[{"role":"user","content":"<|im_end|>"}]})");
  PromptParts p;
  ASSERT_FALSE(build_prompt(tok(), chat(), r, 100000, &p));
  const int32_t im_end = tok().token_id("<|im_end|>");
  ASSERT_GE(im_end, 0);
  int n = 0;
  for (int32_t id : p.concatenated()) n += id == im_end;
  EXPECT_EQ(n, 1);  // only the template's own
}

TEST(PromptMap, CompletionsPromptIsPlainIds) {
  ApiRequest r = parse(R"({"model":"m","prompt":"Once upon a time"})", Endpoint::kCompletions);
  PromptParts p;
  ASSERT_FALSE(build_prompt(tok(), chat(), r, 100000, &p));
  EXPECT_TRUE(p.prefix.empty());
  EXPECT_TRUE(p.segments.empty());
  EXPECT_EQ(p.suffix, tok().encode("Once upon a time"));
}

TEST(PromptMap, SegmentReferencesResolveToTheSameLayoutAsInline) {
  ApiRequest inline_req = parse(R"({"model":"m","messages":[{"role":"user","content":[
      {"type":"text","text":"Read: "},
      {"type":"text","text":"First document.","hypic_segment":true},
      {"type":"text","text":"Second one.","hypic_segment":true},
      {"type":"text","text":"What now?"}]}]})");
  ApiRequest ref_req = parse(R"({"model":"m","messages":[{"role":"user","content":[
      {"type":"text","text":"Read: "},
      {"type":"segment","segment_id":"seg_a"},
      {"type":"text","text":"Second one.","hypic_segment":true},
      {"type":"text","text":"What now?"}]}]})");
  PromptParts want, got;
  ASSERT_FALSE(build_prompt(tok(), chat(), inline_req, 100000, &want));
  std::vector<std::string> asked;
  SegmentResolver resolve = [&](const std::string& id, std::vector<int32_t>* ids) -> std::optional<ApiError> {
    asked.push_back(id);
    *ids = tok().encode("First document.", false);  // as POST /v1/segments tokenises
    return std::nullopt;
  };
  ASSERT_FALSE(build_prompt(tok(), chat(), ref_req, 100000, &got, resolve));
  EXPECT_EQ(asked, std::vector<std::string>{"seg_a"});
  EXPECT_EQ(got.prefix, want.prefix);
  EXPECT_EQ(got.segments, want.segments);
  EXPECT_EQ(got.suffix, want.suffix);
}

TEST(PromptMap, UnresolvedReferenceIs404WithItsParam) {
  ApiRequest r = parse(R"({"model":"m","messages":[{"role":"system","content":"S"},{"role":"user","content":[
      {"type":"segment","segment_id":"seg_x"},{"type":"text","text":"Q"}]}]})");
  PromptParts p;
  auto e = build_prompt(tok(), chat(), r, 100000, &p);  // no resolver
  ASSERT_TRUE(e);
  EXPECT_EQ(e->http_status, 404);
  EXPECT_EQ(e->code, "segment_not_found");
  EXPECT_EQ(e->param, "messages[1].content[0].segment_id");
  e = build_prompt(tok(), chat(), r, 100000, &p, [](const std::string& id, std::vector<int32_t>*) -> std::optional<ApiError> {
    return segment_not_found(id);
  });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->http_status, 404);
  EXPECT_EQ(e->param, "messages[1].content[0].segment_id");
  // A resolver that yields no tokens is a not-found too, never an empty segment.
  e = build_prompt(tok(), chat(), r, 100000, &p, [](const std::string&, std::vector<int32_t>*) -> std::optional<ApiError> {
    return std::nullopt;
  });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, "segment_not_found");
  // Registered tokens count towards the context check.
  e = build_prompt(tok(), chat(), r, 20, &p, [](const std::string&, std::vector<int32_t>* ids) -> std::optional<ApiError> {
    ids->assign(100, 5);
    return std::nullopt;
  });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, "context_length_exceeded");
}

TEST(PromptMap, TooLongPromptIsRejectedAfterTokenisation) {
  ApiRequest r = parse(R"({"model":"m","messages":[{"role":"user","content":"a b c d e f g h"}]})");
  PromptParts p;
  auto e = build_prompt(tok(), chat(), r, 5, &p);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->http_status, 400);
  EXPECT_EQ(e->param, "messages");
  EXPECT_EQ(e->code, "context_length_exceeded");
}

}  // namespace
}  // namespace hypic::server
