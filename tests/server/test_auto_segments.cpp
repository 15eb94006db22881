// Automatic segments (api/auto_segments.h): separator cuts, text parts, explicit marks
// winning, layouts that cannot be cut, completions, per-request choices and limits.
#include <gtest/gtest.h>

#include "api/auto_segments.h"

namespace hypic::api {
namespace {

ApiRequest chat_request(const std::string& body) {
  ApiRequest r;
  auto e = parse_request(body, Endpoint::kChat, RequestLimits{}, &r);
  EXPECT_FALSE(e) << e->message;
  return r;
}

AutoSegments modes(bool separator, bool parts) {
  AutoSegments a;
  a.separator = separator;
  a.parts = parts;
  return a;
}

std::vector<std::pair<std::string, bool>> layout(const ApiRequest& r) {
  std::vector<std::pair<std::string, bool>> out;
  for (const ContentPart& p : r.messages.back().parts) out.push_back({p.text, p.segment});
  return out;
}

TEST(AutoSegments, SeparatorCutsTheLastUserMessage) {
  ApiRequest r = chat_request(R"({"model":"m","messages":[{"role":"system","content":"Be brief."},
      {"role":"user","content":"Doc one.<<PIC_SEP>>Doc two.<<PIC_SEP>>Which doc?"}]})");
  ASSERT_FALSE(apply_auto_segments(&r, modes(true, false), RequestLimits{}));
  EXPECT_EQ(r.auto_segments_made, 2);
  using L = std::vector<std::pair<std::string, bool>>;
  EXPECT_EQ(layout(r), (L{{"Doc one.", true}, {"Doc two.", true}, {"Which doc?", false}}));
  // Text before the first separator in another part stays the prefix.
  ApiRequest s = chat_request(R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"Read: "},
      {"type":"text","text":"A<<PIC_SEP>>B<<PIC_SEP>>Q"}]}]})");
  ASSERT_FALSE(apply_auto_segments(&s, modes(true, false), RequestLimits{}));
  EXPECT_EQ(layout(s), (L{{"Read: ", false}, {"A", true}, {"B", true}, {"Q", false}}));
  // Off by default: nothing changes.
  ApiRequest t = chat_request(R"({"model":"m","messages":[{"role":"user","content":"A<<PIC_SEP>>Q"}]})");
  ASSERT_FALSE(apply_auto_segments(&t, AutoSegments{}, RequestLimits{}));
  EXPECT_EQ(t.auto_segments_made, 0);
  EXPECT_EQ(layout(t), (L{{"A<<PIC_SEP>>Q", false}}));
}

TEST(AutoSegments, ExplicitMarksWinAndBadLayoutsStayWhole) {
  using L = std::vector<std::pair<std::string, bool>>;
  ApiRequest r = chat_request(R"({"model":"m","messages":[{"role":"user","content":[
      {"type":"text","text":"X<<PIC_SEP>>Y","cache_control":{"type":"segment"}},{"type":"text","text":"Q"}]}]})");
  ASSERT_FALSE(apply_auto_segments(&r, modes(true, true), RequestLimits{}));
  EXPECT_EQ(r.auto_segments_made, 0);
  EXPECT_EQ(layout(r), (L{{"X<<PIC_SEP>>Y", true}, {"Q", false}}));
  // Separators in two parts would put text between segments: not cut, separators removed.
  ApiRequest s = chat_request(R"({"model":"m","messages":[{"role":"user","content":[
      {"type":"text","text":"D1<<PIC_SEP>>Q1 "},{"type":"text","text":"D2<<PIC_SEP>>Q2"}]}]})");
  ASSERT_FALSE(apply_auto_segments(&s, modes(true, false), RequestLimits{}));
  EXPECT_EQ(s.auto_segments_made, 0);
  EXPECT_EQ(layout(s), (L{{"D1Q1 ", false}, {"D2Q2", false}}));
}

TEST(AutoSegments, PartsModeAndRequestChoices) {
  using L = std::vector<std::pair<std::string, bool>>;
  const std::string parts = R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"D1"},
      {"type":"text","text":"D2"},{"type":"text","text":"Q"}]}]})";
  ApiRequest r = chat_request(parts);
  ASSERT_FALSE(apply_auto_segments(&r, modes(false, true), RequestLimits{}));
  EXPECT_EQ(layout(r), (L{{"D1", true}, {"D2", true}, {"Q", false}}));
  // The request turns it off, or on with its own list, or on with true (the server's, else separator).
  ApiRequest off = chat_request(parts.substr(0, parts.size() - 1) + R"(,"hypic":{"auto_segments":false}})");
  ASSERT_FALSE(apply_auto_segments(&off, modes(false, true), RequestLimits{}));
  EXPECT_EQ(off.auto_segments_made, 0);
  ApiRequest on = chat_request(parts.substr(0, parts.size() - 1) + R"(,"hypic":{"auto_segments":["parts"]}})");
  ASSERT_FALSE(apply_auto_segments(&on, AutoSegments{}, RequestLimits{}));
  EXPECT_EQ(on.auto_segments_made, 2);
  ApiRequest dflt = chat_request(R"({"model":"m","messages":[{"role":"user","content":"A<<PIC_SEP>>Q"}],"hypic":{"auto_segments":true}})");
  ASSERT_FALSE(apply_auto_segments(&dflt, AutoSegments{}, RequestLimits{}));
  EXPECT_EQ(dflt.auto_segments_made, 1);
  ApiRequest bad;
  auto e = parse_request(R"({"model":"m","messages":[{"role":"user","content":"q"}],"hypic":{"auto_segments":["all"]}})",
                         Endpoint::kChat, RequestLimits{}, &bad);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "hypic.auto_segments");
  AutoSegments a;
  std::string why;
  EXPECT_TRUE(parse_auto_segments("separator,parts", &a, &why));
  EXPECT_TRUE(a.separator && a.parts);
  EXPECT_FALSE(parse_auto_segments("separator,all", &a, &why));
  EXPECT_NE(why.find("all"), std::string::npos);
}

TEST(AutoSegments, CompletionsAndLimits) {
  ApiRequest r;
  ASSERT_FALSE(parse_request(R"({"model":"m","prompt":"I.<<PIC_SEP>>D1<<PIC_SEP>>D2<<PIC_SEP>>Q<<PIC_SEP>>"})",
                             Endpoint::kCompletions, RequestLimits{}, &r));
  ASSERT_FALSE(apply_auto_segments(&r, modes(true, false), RequestLimits{}));
  EXPECT_EQ(r.prompt_segments, (std::vector<std::string>{"I.", "D1", "D2"}));
  EXPECT_EQ(r.prompt, "Q");
  EXPECT_EQ(r.auto_segments_made, 3);
  RequestLimits lim;
  lim.max_segments = 2;
  ApiRequest many = chat_request(R"({"model":"m","messages":[{"role":"user","content":"a<<PIC_SEP>>b<<PIC_SEP>>c<<PIC_SEP>>q"}]})");
  auto e = apply_auto_segments(&many, modes(true, false), lim);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, "too_many_segments");
  AutoSegments custom = modes(true, false);
  custom.sep = "\n---\n";
  ApiRequest c = chat_request(R"({"model":"m","messages":[{"role":"user","content":"a\n---\nq"}]})");
  ASSERT_FALSE(apply_auto_segments(&c, custom, RequestLimits{}));
  EXPECT_EQ(c.auto_segments_made, 1);
}

}  // namespace
}  // namespace hypic::api
