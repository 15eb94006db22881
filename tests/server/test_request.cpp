// Request parsing and validation: hostile inputs with their expected status and param, and a
// bounded mutation fuzz test.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "server/engine_request.h"

namespace hypic::server {

using namespace api;
namespace {

RequestLimits limits() {
  RequestLimits l;
  l.max_body_bytes = 1 << 16;
  l.max_segments = 3;
  l.max_tokens = 1000;
  return l;
}

struct Bad {
  const char* name;
  Endpoint ep;
  std::string body;
  int status;
  std::string param;
};

TEST(Request, ValidChatParses) {
  ApiRequest r;
  auto e = parse_request(R"({"model":"m","messages":[{"role":"system","content":"S"},
      {"role":"user","content":[{"type":"text","text":"doc1","cache_control":{"type":"segment"}},
      {"type":"text","text":"doc2","hypic_segment":true},{"type":"text","text":"Q?"}]}],
      "max_completion_tokens":7,"temperature":0,"top_p":0.5,"seed":42,"stop":["a","b"],
      "stream":true,"stream_options":{"include_usage":true},"n":1,"cache_salt":"t1",
      "hypic":{"mode":"prefix","seam":4}})",
                         Endpoint::kChat, limits(), &r);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[0].role, Role::kSystem);
  ASSERT_EQ(r.messages[1].parts.size(), 3u);
  EXPECT_TRUE(r.messages[1].parts[0].segment);
  EXPECT_TRUE(r.messages[1].parts[1].segment);
  EXPECT_FALSE(r.messages[1].parts[2].segment);
  EXPECT_EQ(r.segment_count(), 2);
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_EQ(r.temperature, 0);
  EXPECT_EQ(r.top_p, 0.5);
  EXPECT_EQ(*r.seed, 42u);
  EXPECT_EQ(r.stop.size(), 2u);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.cache_salt, "t1");
  EXPECT_EQ(r.mode, PicMode::kPrefix);
  EXPECT_EQ(r.seam, 4);
}

TEST(Request, ValidCompletionAndDefaults) {
  ApiRequest r;
  auto e = parse_request(R"({"model":"m","prompt":"hello","stop":"x","max_tokens":3.0})",
                         Endpoint::kCompletions, limits(), &r);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(r.prompt, "hello");
  EXPECT_EQ(r.max_tokens, 3);
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
  EXPECT_EQ(r.mode, PicMode::kHypic);
  EXPECT_FALSE(r.stream);
  e = parse_request(R"({"model":"m","prompt":["one"]})", Endpoint::kCompletions, limits(), &r);
  ASSERT_FALSE(e);
  EXPECT_EQ(r.prompt, "one");
  EXPECT_EQ(r.max_tokens, limits().default_max_tokens);
  // Token ids, bare or as the only prompt of an array (as OpenAI's API accepts them).
  for (const char* body : {R"({"model":"m","prompt":[5,0,2147483647]})", R"({"model":"m","prompt":[[5,0,2147483647]]})"}) {
    ApiRequest t;
    e = parse_request(body, Endpoint::kCompletions, limits(), &t);
    ASSERT_FALSE(e) << e->message;
    EXPECT_TRUE(t.prompt.empty());
    EXPECT_EQ(t.prompt_tokens, (std::vector<int32_t>{5, 0, 2147483647}));
  }
}

TEST(Request, HostileInputsGiveTypedErrors) {
  const std::string big(70000, 'a');
  const std::vector<Bad> cases = {
      {"empty body", Endpoint::kChat, "", 400, ""},
      {"not json", Endpoint::kChat, "hello", 400, ""},
      {"truncated", Endpoint::kChat, R"({"model":"m","messages":[)", 400, ""},
      {"trailing garbage", Endpoint::kChat, R"({"model":"m"} x)", 400, ""},
      {"array body", Endpoint::kChat, "[1,2]", 400, ""},
      {"invalid utf8", Endpoint::kChat, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}", 400, ""},
      {"overlong utf8", Endpoint::kChat, "{\"model\":\"\xc0\xaf\",\"messages\":[]}", 400, ""},
      {"lone surrogate", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"\ud800"}]})", 400, ""},
      {"body too large", Endpoint::kChat, "{\"model\":\"" + big + "\"}", 413, ""},
      {"missing model", Endpoint::kChat, R"({"messages":[{"role":"user","content":"x"}]})", 400, "model"},
      {"model not string", Endpoint::kChat, R"({"model":5,"messages":[{"role":"user","content":"x"}]})", 400, "model"},
      {"missing messages", Endpoint::kChat, R"({"model":"m"})", 400, "messages"},
      {"messages not array", Endpoint::kChat, R"({"model":"m","messages":{}})", 400, "messages"},
      {"empty messages", Endpoint::kChat, R"({"model":"m","messages":[]})", 400, "messages"},
      {"message not object", Endpoint::kChat, R"({"model":"m","messages":["hi"]})", 400, "messages[0]"},
      {"missing role", Endpoint::kChat, R"({"model":"m","messages":[{"content":"x"}]})", 400, "messages[0].role"},
      {"unknown role", Endpoint::kChat, R"({"model":"m","messages":[{"role":"wizard","content":"x"}]})", 400, "messages[0].role"},
      {"role not string", Endpoint::kChat, R"({"model":"m","messages":[{"role":1,"content":"x"}]})", 400, "messages[0].role"},
      {"missing content", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user"}]})", 400, "messages[0].content"},
      {"content number", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":3}]})", 400, "messages[0].content"},
      {"empty parts", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":[]}]})", 400, "messages[0].content"},
      {"image part", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})", 400, "messages[0].content[0].type"},
      {"part text missing", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":[{"type":"text"}]}]})", 400, "messages[0].content[0].text"},
      {"part text number", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":1}]}]})", 400, "messages[0].content[0].text"},
      {"bad cache_control", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a","cache_control":{"type":"forever"}}]}]})", 400, "messages[0].content[0].cache_control.type"},
      {"hypic_segment string", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a","hypic_segment":"yes"}]}]})", 400, "messages[0].content[0].hypic_segment"},
      {"segment in system", Endpoint::kChat, R"({"model":"m","messages":[{"role":"system","content":[{"type":"text","text":"a","hypic_segment":true}]},{"role":"user","content":"q"}]})", 400, "messages[0].content[0]"},
      {"segment in earlier turn", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a","hypic_segment":true}]},{"role":"assistant","content":"b"},{"role":"user","content":"q"}]})", 400, "messages[0].content[0]"},
      {"text between segments", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a","hypic_segment":true},{"type":"text","text":"mid"},{"type":"text","text":"b","hypic_segment":true}]}]})", 400, "messages[0].content[1]"},
      {"empty segment", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"","hypic_segment":true},{"type":"text","text":"q"}]}]})", 400, "messages[0].content[0]"},
      {"too many segments", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a","hypic_segment":true},{"type":"text","text":"b","hypic_segment":true},{"type":"text","text":"c","hypic_segment":true},{"type":"text","text":"d","hypic_segment":true}]}]})", 400, "messages"},
      {"last is assistant", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"}]})", 400, "messages"},
      {"negative max_tokens", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"max_tokens":-1})", 400, "max_tokens"},
      {"zero max_tokens", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"max_tokens":0})", 400, "max_tokens"},
      {"huge max_tokens", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"max_tokens":1e300})", 400, "max_tokens"},
      {"u64 max_tokens", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"max_tokens":18446744073709551615})", 400, "max_tokens"},
      {"fractional max_tokens", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"max_completion_tokens":2.5})", 400, "max_completion_tokens"},
      {"string max_tokens", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"max_tokens":"5"})", 400, "max_tokens"},
      {"temperature too high", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"temperature":3})", 400, "temperature"},
      {"temperature string", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"temperature":"hot"})", 400, "temperature"},
      {"top_p zero", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"top_p":0})", 400, "top_p"},
      {"top_p > 1", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"top_p":1.5})", 400, "top_p"},
      {"seed string", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"seed":"x"})", 400, "seed"},
      {"n = 17", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"n":17})", 400, "n"},
      {"n = 0", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"n":0})", 400, "n"},
      {"n = 0", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"n":0})", 400, "n"},
      {"five stops", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"stop":["a","b","c","d","e"]})", 400, "stop"},
      {"stop number", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"stop":7})", 400, "stop"},
      {"stop array of numbers", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"stop":["a",1]})", 400, "stop[1]"},
      {"empty stop", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"stop":""})", 400, "stop"},
      {"stream string", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"stream":"yes"})", 400, "stream"},
      {"stream_options without stream", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"stream_options":{"include_usage":true}})", 400, "stream_options"},
      {"include_usage string", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"stream":true,"stream_options":{"include_usage":"y"}})", 400, "stream_options.include_usage"},
      {"salt number", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"cache_salt":1})", 400, "cache_salt"},
      {"bad mode", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"hypic":{"mode":"magic"}})", 400, "hypic.mode"},
      {"negative seam", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"hypic":{"seam":-1}})", 400, "hypic.seam"},
      {"hypic not object", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"hypic":"fast"})", 400, "hypic"},
      {"logprobs not a boolean", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"logprobs":1})", 400, "logprobs"},
      {"top_logprobs alone", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"top_logprobs":1})", 400, "top_logprobs"},
      {"top_logprobs too many", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"logprobs":true,"top_logprobs":21})", 400, "top_logprobs"},
      {"completions logprobs boolean", Endpoint::kCompletions, R"({"model":"m","prompt":"a","logprobs":true})", 400, "logprobs"},
      {"completions logprobs 21", Endpoint::kCompletions, R"({"model":"m","prompt":"a","logprobs":21})", 400, "logprobs"},
      {"echo not a boolean", Endpoint::kCompletions, R"({"model":"m","prompt":"a","echo":1})", 400, "echo"},
      {"max_tokens 0 without echo", Endpoint::kCompletions, R"({"model":"m","prompt":"a","max_tokens":0})", 400, "max_tokens"},
      {"chat max_tokens 0", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":"a"}],"max_completion_tokens":0})", 400, "max_completion_tokens"},
      {"segment ref without id", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":[{"type":"segment"},{"type":"text","text":"q"}]}]})", 400, "messages[0].content[0].segment_id"},
      {"segment id number", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":[{"type":"segment","segment_id":7},{"type":"text","text":"q"}]}]})", 400, "messages[0].content[0].segment_id"},
      {"segment id null", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":[{"type":"segment","segment_id":null},{"type":"text","text":"q"}]}]})", 400, "messages[0].content[0].segment_id"},
      {"segment id empty", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":[{"type":"segment","segment_id":""},{"type":"text","text":"q"}]}]})", 400, "messages[0].content[0].segment_id"},
      {"segment id too long", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":[{"type":"segment","segment_id":")" + std::string(65, 'a') + R"("},{"type":"text","text":"q"}]}]})", 400, "messages[0].content[0].segment_id"},
      {"segment ref with text", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":[{"type":"segment","segment_id":"seg_1","text":"x"},{"type":"text","text":"q"}]}]})", 400, "messages[0].content[0].text"},
      {"segment ref in system", Endpoint::kChat, R"({"model":"m","messages":[{"role":"system","content":[{"type":"segment","segment_id":"seg_1"}]},{"role":"user","content":"q"}]})", 400, "messages[0].content[0]"},
      {"segment ref in earlier turn", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":[{"type":"segment","segment_id":"seg_1"}]},{"role":"assistant","content":"b"},{"role":"user","content":"q"}]})", 400, "messages[0].content[0]"},
      {"text between refs", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":[{"type":"segment","segment_id":"seg_1"},{"type":"text","text":"mid"},{"type":"segment","segment_id":"seg_2"}]}]})", 400, "messages[0].content[1]"},
      {"too many refs", Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":[{"type":"segment","segment_id":"seg_1"},{"type":"segment","segment_id":"seg_2"},{"type":"text","text":"c","hypic_segment":true},{"type":"segment","segment_id":"seg_1"},{"type":"text","text":"q"}]}]})", 400, "messages"},
      {"missing prompt", Endpoint::kCompletions, R"({"model":"m"})", 400, "prompt"},
      {"empty prompt", Endpoint::kCompletions, R"({"model":"m","prompt":""})", 400, "prompt"},
      {"batched prompt", Endpoint::kCompletions, R"({"model":"m","prompt":["a","b"]})", 400, "prompt"},
      {"batched token prompts", Endpoint::kCompletions, R"({"model":"m","prompt":[[1,2],[3]]})", 400, "prompt"},
      {"empty token prompt", Endpoint::kCompletions, R"({"model":"m","prompt":[]})", 400, "prompt"},
      {"empty nested token prompt", Endpoint::kCompletions, R"({"model":"m","prompt":[[]]})", 400, "prompt"},
      {"negative token id", Endpoint::kCompletions, R"({"model":"m","prompt":[1,-2]})", 400, "prompt"},
      {"huge token id", Endpoint::kCompletions, R"({"model":"m","prompt":[4294967296]})", 400, "prompt"},
      {"float token id", Endpoint::kCompletions, R"({"model":"m","prompt":[1,2.5]})", 400, "prompt"},
      {"mixed prompt", Endpoint::kCompletions, R"({"model":"m","prompt":[1,"a"]})", 400, "prompt"},
      {"prompt object", Endpoint::kCompletions, R"({"model":"m","prompt":{}})", 400, "prompt"},
  };
  ASSERT_GE(cases.size(), 30u);
  for (const auto& c : cases) {
    ApiRequest r;
    auto e = parse_request(c.body, c.ep, limits(), &r);
    ASSERT_TRUE(e.has_value()) << c.name;
    EXPECT_EQ(e->http_status, c.status) << c.name << ": " << e->message;
    EXPECT_EQ(e->param, c.param) << c.name << ": " << e->message;
    EXPECT_EQ(e->type, "invalid_request_error") << c.name;
    EXPECT_FALSE(e->message.empty()) << c.name;
    const auto j = e->to_json();
    ASSERT_TRUE(j.contains("error")) << c.name;
    for (const char* k : {"message", "type", "param", "code"}) EXPECT_TRUE(j["error"].contains(k)) << c.name;
  }
}

// One rule for every required field: null is the same error as absent (same code, param, message).
TEST(Request, NullIsMissingForEveryRequiredField) {
  struct Case {
    Endpoint ep;
    std::string with_null, without, param;
  };
  const std::vector<Case> cases = {
      {Endpoint::kChat, R"({"model":null,"messages":[{"role":"user","content":"x"}]})",
       R"({"messages":[{"role":"user","content":"x"}]})", "model"},
      {Endpoint::kChat, R"({"model":"m","messages":null})", R"({"model":"m"})", "messages"},
      {Endpoint::kChat, R"({"model":"m","messages":[{"role":null,"content":"x"}]})",
       R"({"model":"m","messages":[{"content":"x"}]})", "messages[0].role"},
      {Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":null}]})",
       R"({"model":"m","messages":[{"role":"user"}]})", "messages[0].content"},
      {Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":[{"type":null,"text":"a"}]}]})",
       R"({"model":"m","messages":[{"role":"user","content":[{"text":"a"}]}]})", "messages[0].content[0].type"},
      {Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":null}]}]})",
       R"({"model":"m","messages":[{"role":"user","content":[{"type":"text"}]}]})", "messages[0].content[0].text"},
      {Endpoint::kChat, R"({"model":"m","messages":[{"role":"user","content":[{"type":"segment","segment_id":null}]}]})",
       R"({"model":"m","messages":[{"role":"user","content":[{"type":"segment"}]}]})", "messages[0].content[0].segment_id"},
      {Endpoint::kChat, R"({"model":"m","messages":[{"role":"tool","content":"r","tool_call_id":null}]})",
       R"({"model":"m","messages":[{"role":"tool","content":"r"}]})", "messages[0].tool_call_id"},
      {Endpoint::kCompletions, R"({"model":"m","prompt":null})", R"({"model":"m"})", "prompt"},
  };
  for (const Case& c : cases) {
    ApiRequest a, b;
    const auto ea = parse_request(c.with_null, c.ep, limits(), &a);
    const auto eb = parse_request(c.without, c.ep, limits(), &b);
    ASSERT_TRUE(ea && eb) << c.param;
    EXPECT_EQ(ea->code, "missing_required_parameter") << c.param << ": " << ea->message;
    EXPECT_EQ(ea->param, c.param);
    EXPECT_EQ(ea->code, eb->code) << c.param;
    EXPECT_EQ(ea->param, eb->param) << c.param;
    EXPECT_EQ(ea->message, eb->message) << c.param;
  }
  SegmentRequest sa, sb;
  const auto ea = parse_segment_request(R"({"text":null})", limits(), &sa);
  const auto eb = parse_segment_request(R"({})", limits(), &sb);
  ASSERT_TRUE(ea && eb);
  EXPECT_EQ(std::tie(ea->code, ea->param, ea->message), std::tie(eb->code, eb->param, eb->message));
}

TEST(Request, SegmentReferenceParses) {
  ApiRequest r;
  auto e = parse_request(R"({"model":"m","messages":[{"role":"user","content":[
      {"type":"segment","segment_id":"seg_00ff"},
      {"type":"text","text":"inline","hypic_segment":true},
      {"type":"text","text":"Q?"}]}]})",
                         Endpoint::kChat, limits(), &r);
  ASSERT_FALSE(e) << e->message;
  const auto& p = r.messages[0].parts;
  ASSERT_EQ(p.size(), 3u);
  EXPECT_TRUE(p[0].segment);
  EXPECT_EQ(p[0].segment_id, "seg_00ff");
  EXPECT_TRUE(p[0].text.empty());
  EXPECT_TRUE(p[1].segment);
  EXPECT_TRUE(p[1].segment_id.empty());
  EXPECT_EQ(r.segment_count(), 2);
}

TEST(Request, SegmentRegistrationParses) {
  SegmentRequest s;
  auto e = parse_segment_request(R"({"text":"a document"})", limits(), &s);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(s.text, "a document");
  EXPECT_EQ(s.seam, ApiRequest{}.seam);
  EXPECT_FALSE(s.ttl_seconds);
  EXPECT_TRUE(s.cache_salt.empty());
  EXPECT_TRUE(s.model.empty());
  e = parse_segment_request(R"({"text":"d","ttl":60.0,"cache_salt":"t","seam":4,"model":"m"})", limits(), &s);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(*s.ttl_seconds, 60);
  EXPECT_EQ(s.cache_salt, "t");
  EXPECT_EQ(s.seam, 4);
  EXPECT_EQ(s.model, "m");
  e = parse_segment_request(R"({"text":"d","ttl":null,"seam":null,"cache_salt":null})", limits(), &s);
  ASSERT_FALSE(e) << e->message;
  EXPECT_FALSE(s.ttl_seconds);
}

TEST(Request, HostileSegmentRegistrations) {
  const std::string big(70000, 'a');
  const std::vector<std::pair<std::string, std::pair<int, std::string>>> cases = {
      {"", {400, ""}},
      {"nope", {400, ""}},
      {"[]", {400, ""}},
      {"\"text\"", {400, ""}},
      {"{\"text\":\"\xff\"}", {400, ""}},
      {"{\"text\":\"" + big + "\"}", {413, ""}},
      {R"({})", {400, "text"}},
      {R"({"text":null})", {400, "text"}},
      {R"({"text":5})", {400, "text"}},
      {R"({"text":["a"]})", {400, "text"}},
      {R"({"text":""})", {400, "text"}},
      {R"({"text":"a","ttl":-1})", {400, "ttl"}},
      {R"({"text":"a","ttl":0})", {400, "ttl"}},
      {R"({"text":"a","ttl":1e300})", {400, "ttl"}},
      {R"({"text":"a","ttl":99999999999})", {400, "ttl"}},
      {R"({"text":"a","ttl":18446744073709551615})", {400, "ttl"}},
      {R"({"text":"a","ttl":1.5})", {400, "ttl"}},
      {R"({"text":"a","ttl":"60"})", {400, "ttl"}},
      {R"({"text":"a","ttl":true})", {400, "ttl"}},
      {R"({"text":"a","cache_salt":1})", {400, "cache_salt"}},
      {R"({"text":"a","cache_salt":")" + std::string(300, 's') + R"("})", {400, "cache_salt"}},
      {R"({"text":"a","seam":-1})", {400, "seam"}},
      {R"({"text":"a","seam":100000})", {400, "seam"}},
      {R"({"text":"a","seam":"8"})", {400, "seam"}},
      {R"({"text":"a","model":3})", {400, "model"}},
      {R"({"text":"a","cache_salts":"tenantA"})", {400, "cache_salts"}},  // a typo: never unsalted
      {R"({"text":"a","ttl_s":60})", {400, "ttl_s"}},
  };
  for (const auto& [body, want] : cases) {
    SegmentRequest s;
    auto e = parse_segment_request(body, limits(), &s);
    ASSERT_TRUE(e.has_value()) << body.substr(0, 80);
    EXPECT_EQ(e->http_status, want.first) << body.substr(0, 80) << ": " << e->message;
    EXPECT_EQ(e->param, want.second) << body.substr(0, 80) << ": " << e->message;
    EXPECT_FALSE(e->message.empty());
  }
}

TEST(Request, DeepNestingDoesNotCrash) {
  std::string s = "{\"model\":\"m\",\"x\":" + std::string(20000, '[') + std::string(20000, ']') + "}";
  ApiRequest r;
  auto e = parse_request(s, Endpoint::kChat, limits(), &r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "messages");
}

// Random byte mutations, splices and truncations of valid requests: every result is a parsed
// request or an error with a 4xx status. Bounded: a fixed number of iterations.
TEST(Request, FuzzMutationsNeverCrash) {
  const std::vector<std::string> seeds = {
      R"({"model":"m","messages":[{"role":"system","content":"S"},{"role":"user","content":[{"type":"text","text":"d","cache_control":{"type":"segment"}},{"type":"text","text":"q"}]}],"max_tokens":5,"temperature":0.5,"top_p":0.9,"seed":1,"stop":["x"],"stream":true,"stream_options":{"include_usage":true},"hypic":{"mode":"naive","seam":2}})",
      R"({"model":"m","prompt":"hello world","max_completion_tokens":3,"n":1,"cache_salt":"s"})",
      R"({"model":"m","messages":[{"role":"user","content":"hi"}]})",
      R"({"model":"m","messages":[{"role":"user","content":[{"type":"segment","segment_id":"seg_ab"},{"type":"text","text":"q"}]}]})",
  };
  const std::string alphabet = "{}[]\":,0123456789-.eE truefalsnl\\u\xff\xc3\xa9";
  std::mt19937 rng(1234);
  int ok = 0, err = 0;
  for (int it = 0; it < 20000; ++it) {
    std::string s = seeds[rng() % seeds.size()];
    const int edits = 1 + int(rng() % 4);
    for (int k = 0; k < edits && !s.empty(); ++k) {
      const size_t pos = rng() % s.size();
      switch (rng() % 5) {
        case 0: s[pos] = alphabet[rng() % alphabet.size()]; break;
        case 1: s.erase(pos, 1 + rng() % 8); break;
        case 2: s.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
        case 3: s.resize(pos); break;
        case 4: {
          const std::string& o = seeds[rng() % seeds.size()];
          const size_t a = rng() % o.size();
          s.insert(pos, o.substr(a, rng() % 40));
          break;
        }
      }
    }
    const Endpoint ep = rng() % 2 ? Endpoint::kChat : Endpoint::kCompletions;
    ApiRequest r;
    auto e = parse_request(s, ep, limits(), &r);
    if (e) {
      ++err;
      ASSERT_GE(e->http_status, 400);
      ASSERT_LT(e->http_status, 500);
      ASSERT_FALSE(e->message.empty());
      (void)e->to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    } else {
      ++ok;
      ASSERT_GE(r.max_tokens, 1);
      if (ep == Endpoint::kChat) ASSERT_FALSE(r.messages.empty());
      else ASSERT_FALSE(r.prompt.empty());
    }
  }
  EXPECT_GT(err, 0);
  EXPECT_GT(ok, 0);
}

// Fields hypic does not implement: refused with their name unless at a value that changes
// nothing, so a client never believes they worked.
TEST(Request, UnimplementedFieldsAreRefusedByName) {
  const std::string chat_head = R"({"model":"m","messages":[{"role":"user","content":"a"}],)";
  const std::string cmpl_head = R"({"model":"m","prompt":"a",)";
  struct Case {
    Endpoint ep;
    std::string field;  // "name":value
    std::string param;
  };
  const std::vector<Case> refused = {
      {Endpoint::kChat, R"("presence_penalty":0.5)", "presence_penalty"},
      {Endpoint::kChat, R"("frequency_penalty":-1)", "frequency_penalty"},
      {Endpoint::kChat, R"("logit_bias":{"42":5})", "logit_bias"},
      {Endpoint::kChat, R"("functions":[{"name":"f"}])", "functions"},
      {Endpoint::kChat, R"("function_call":"auto")", "function_call"},
      {Endpoint::kChat, R"("reasoning_effort":"low")", "reasoning_effort"},
      {Endpoint::kChat, R"("repetition_penalty":1.1)", "repetition_penalty"},
      {Endpoint::kChat, R"("hypic":{"mode":"hypic","seem":4})", "hypic.seem"},
      {Endpoint::kCompletions, R"("best_of":3)", "best_of"},
      {Endpoint::kCompletions, R"("suffix":"end")", "suffix"},
      {Endpoint::kCompletions, R"("messages":[])", "messages"},
      {Endpoint::kCompletions, R"("presence_penalty":2)", "presence_penalty"},
  };
  for (const Case& c : refused) {
    ApiRequest r;
    const std::string body = (c.ep == Endpoint::kChat ? chat_head : cmpl_head) + c.field + "}";
    auto e = parse_request(body, c.ep, limits(), &r);
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->http_status, 400) << body;
    EXPECT_EQ(e->code, "unsupported_parameter") << body;
    EXPECT_EQ(e->param, c.param) << body;
    EXPECT_NE(e->message.find(c.param), std::string::npos) << e->message;
  }
  const std::vector<Case> noops = {
      {Endpoint::kChat, R"("tools":[])", ""}, {Endpoint::kChat, R"("tool_choice":"none")", ""},
      {Endpoint::kChat, R"("tools":null)", ""}, {Endpoint::kChat, R"("response_format":{"type":"text"})", ""},
      {Endpoint::kChat, R"("presence_penalty":0)", ""}, {Endpoint::kChat, R"("frequency_penalty":0.0)", ""},
      {Endpoint::kChat, R"("logit_bias":{})", ""}, {Endpoint::kChat, R"("logprobs":false)", ""},
      {Endpoint::kChat, R"("parallel_tool_calls":true)", ""}, {Endpoint::kChat, R"("store":false)", ""},
      {Endpoint::kChat, R"("n":1)", ""}, {Endpoint::kChat, R"("user":"u1")", ""},
      {Endpoint::kCompletions, R"("best_of":1)", ""}, {Endpoint::kCompletions, R"("logprobs":0)", ""},
      {Endpoint::kCompletions, R"("echo":false)", ""}, {Endpoint::kCompletions, R"("suffix":"")", ""},
  };
  for (const Case& c : noops) {
    ApiRequest r;
    const std::string body = (c.ep == Endpoint::kChat ? chat_head : cmpl_head) + c.field + "}";
    auto e = parse_request(body, c.ep, limits(), &r);
    EXPECT_FALSE(e) << body << " -> " << (e ? e->message : "");
  }
}

// Found by fuzzing: a float of 2^63 passed the range check (double(INT64_MAX) is 2^63) and
// its conversion to int64_t was undefined.
TEST(Request, FloatAtTwoToTheSixtyThreeIsOutOfRange) {
  ApiRequest r;
  auto e = parse_request(R"({"model":"m","messages":[{"role":"user","content":"x"}],"seed":9223372036854775808.0})",
                         Endpoint::kChat, limits(), &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "seed");
  EXPECT_FALSE(parse_request(R"({"model":"m","messages":[{"role":"user","content":"x"}],"seed":-9223372036854775808.0})",
                             Endpoint::kChat, limits(), &r));
}

TEST(Request, TopKIsAnExtension) {
  ApiRequest r;
  ASSERT_FALSE(parse_request(R"({"model":"m","prompt":"a","top_k":40})", Endpoint::kCompletions, limits(), &r));
  EXPECT_EQ(r.top_k, 40);
  EXPECT_EQ(generate_options(r).sampling.top_k, 40);
  ASSERT_FALSE(parse_request(R"({"model":"m","prompt":"a","top_k":-1})", Endpoint::kCompletions, limits(), &r));
  EXPECT_EQ(r.top_k, 0);
  auto e = parse_request(R"({"model":"m","prompt":"a","top_k":-2})", Endpoint::kCompletions, limits(), &r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "top_k");
}

}  // namespace
}  // namespace hypic::server
