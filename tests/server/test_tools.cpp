// Tool calling on the API side: parsing tools / tool_choice / response_format / tool messages
// (every bad input a 400 naming its param), the prompt text as Qwen3's chat template writes
// tools, calls and results, the grammar a request gets, and reading calls out of replies
// (whole and split at every byte: the same content and calls).
#include <gtest/gtest.h>

#include "api/auto_segments.h"
#include "api/request_tools.h"
#include "grammar/grammar.h"
#include "server/engine_request.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace hypic::server {

using namespace api;
namespace {

using nlohmann::json;

const ChatTemplate& chatml() { return *chat_template_for("chatml").value(); }

const std::string kWeather =
    R"({"type":"function","function":{"name":"get_weather","description":"Weather now","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["c","f"]}},"required":["city","unit"],"additionalProperties":false}}})";
const std::string kTime = R"({"type":"function","function":{"name":"get_time"}})";

std::string body(const std::string& extra, const std::string& messages = R"([{"role":"user","content":"Hi"}])") {
  return R"({"model":"m","messages":)" + messages + (extra.empty() ? "" : "," + extra) + "}";
}

ApiRequest ok(const std::string& b) {
  ApiRequest r;
  auto e = parse_request(b, Endpoint::kChat, RequestLimits{}, &r);
  EXPECT_FALSE(e) << b << " -> " << (e ? e->message : "");
  return r;
}

TEST(Tools, ParsesToolsChoiceAndFormat) {
  ApiRequest r = ok(body(R"("tools":[)" + kWeather + "," + kTime +
                         R"(],"tool_choice":{"type":"function","function":{"name":"get_time"}},"parallel_tool_calls":false)"));
  ASSERT_EQ(r.tools.size(), 2u);
  EXPECT_EQ(r.tools[0].name, "get_weather");
  // Rendered as json.dumps writes the client's object: its key order, ", " and ": ".
  EXPECT_EQ(r.tools[0].rendered,
            R"({"type": "function", "function": {"name": "get_weather", "description": "Weather now", "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, "required": ["city", "unit"], "additionalProperties": false}}})");
  EXPECT_EQ(r.tools[0].parameters.begin().key(), "type");  // key order kept
  EXPECT_TRUE(r.tools[1].parameters.is_null());
  EXPECT_EQ(r.tool_choice, ToolChoice::kNamed);
  EXPECT_EQ(r.tool_choice_name, "get_time");
  EXPECT_FALSE(r.parallel_tool_calls);
  ApiRequest f = ok(body(R"("response_format":{"type":"json_schema","json_schema":{"name":"p","strict":true,"schema":{"type":"object","properties":{"z":{"type":"integer"},"a":{"type":"boolean"}},"required":["z","a"]}}})"));
  EXPECT_EQ(f.response_format, ResponseFormat::kJsonSchema);
  EXPECT_EQ(f.response_schema["properties"].begin().key(), "z");
}

TEST(Tools, BadInputIs400NamingTheParam) {
  const std::string two_turn_head = R"([{"role":"user","content":"Hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_time","arguments":"{}"}}]},)";
  const std::pair<std::string, std::string> cases[] = {
      {body(R"("tools":{})"), "tools"},
      {body(R"("tools":[3])"), "tools[0]"},
      {body(R"("tools":[{"type":"retrieval","function":{"name":"f"}}])"), "tools[0].type"},
      {body(R"("tools":[{"type":"function"}])"), "tools[0].function"},
      {body(R"("tools":[{"type":"function","function":{"name":"has space"}}])"), "tools[0].function.name"},
      {body(R"("tools":[{"type":"function","function":{"name":""}}])"), "tools[0].function.name"},
      {body(R"("tools":[)" + kTime + "," + kTime + "]"), "tools[1].function.name"},
      {body(R"("tools":[{"type":"function","function":{"name":"f","description":3}}])"), "tools[0].function.description"},
      {body(R"("tools":[{"type":"function","function":{"name":"f","parameters":"x"}}])"), "tools[0].function.parameters"},
      {body(R"("tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"d":{"type":"string","format":"date"}}}}}])"),
       "tools[0].function.parameters"},
      {body(R"("tool_choice":"sometimes","tools":[)" + kTime + "]"), "tool_choice"},
      {body(R"("tool_choice":7)"), "tool_choice"},
      {body(R"("tool_choice":"required")"), "tool_choice"},
      {body(R"("tools":[)" + kTime + R"(],"tool_choice":{"type":"function","function":{"name":"nope"}})"), "tool_choice"},
      {body(R"("tools":[)" + kTime + R"(],"tool_choice":{"type":"function"})"), "tool_choice"},
      {body(R"("parallel_tool_calls":"yes")"), "parallel_tool_calls"},
      {body(R"("response_format":{"type":"xml"})"), "response_format.type"},
      {body(R"("response_format":{"type":"json_schema"})"), "response_format.json_schema"},
      {body(R"("response_format":{"type":"json_schema","json_schema":{"schema":{}}})"), "response_format.json_schema.name"},
      {body(R"("response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"string","pattern":"a+"}}})"),
       "response_format.json_schema.schema"},
      {body(R"("response_format":{"type":"json_object"},"tools":[)" + kTime + R"(],"tool_choice":"required")"), "response_format"},
      {body("", R"([{"role":"user","content":"Hi"},{"role":"tool","content":"42"}])"), "messages[1].tool_call_id"},
      {body("", R"([{"role":"user","content":"Hi"},{"role":"tool","tool_call_id":"zz","content":"42"}])"), "messages[1].tool_call_id"},
      {body("", two_turn_head + R"({"role":"tool","tool_call_id":"c2","content":"42"}])"), "messages[2].tool_call_id"},
      {body("", R"([{"role":"user","content":"Hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","function":{"name":"f","arguments":{}}}]},{"role":"user","content":"x"}])"),
       "messages[1].tool_calls[0].function"},
      {body("", R"([{"role":"user","content":"Hi"},{"role":"assistant","content":"a","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"user","content":"x"}])"),
       "messages[1].tool_calls[0].id"},
      {body("", R"([{"role":"user","content":"Hi","tool_calls":[]}])"), "messages[0].tool_calls"},
      {body("", R"([{"role":"user","content":"Hi"},{"role":"assistant","content":null}])"), "messages[1].content"},
  };
  for (const auto& [b, param] : cases) {
    ApiRequest r;
    auto e = parse_request(b, Endpoint::kChat, RequestLimits{}, &r);
    ASSERT_TRUE(e) << b;
    EXPECT_EQ(e->http_status, 400) << b;
    EXPECT_EQ(e->param, param) << b << " -> " << e->message;
    EXPECT_FALSE(e->message.empty());
  }
  // Valid: a two-turn exchange whose last message is the tool's result.
  ok(body(R"("tools":[)" + kTime + "]", two_turn_head + R"({"role":"tool","tool_call_id":"c1","content":"12:00"}])"));
}

// The prompt text of Qwen3's chat template with tools: the <tools> block in the system turn,
// the assistant's call after its text, results in one user turn of <tool_response> blocks.
TEST(Tools, PromptTextIsQwensToolFormat) {
  ApiRequest r = ok(body(R"("tools":[)" + kTime + "]", R"([{"role":"system","content":"Be brief."},
      {"role":"user","content":"Time?"},
      {"role":"assistant","content":"Checking.","tool_calls":[{"id":"a","type":"function","function":{"name":"get_time","arguments":"{\"tz\": \"UTC\"}"}},
                                                             {"id":"b","type":"function","function":{"name":"get_time","arguments":"{}"}}]},
      {"role":"tool","tool_call_id":"a","content":"12:00"},{"role":"tool","tool_call_id":"b","content":"13:00"}])"));
  const std::string want =
      "<|im_start|>system\nBe brief.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
      "{\"type\": \"function\", \"function\": {\"name\": \"get_time\"}}\n</tools>\n\n"
      "For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n"
      "<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
      "<|im_start|>user\nTime?<|im_end|>\n"
      "<|im_start|>assistant\nChecking.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call><|im_end|>\n"
      "<|im_start|>user\n<tool_response>\n12:00\n</tool_response>\n<tool_response>\n13:00\n</tool_response><|im_end|>\n"
      "<|im_start|>assistant\n";
  EXPECT_EQ(prompt_text(chatml(), r), want);
  // Without a system message the tools make one; with tool_choice none they stay out.
  ApiRequest s = ok(body(R"("tools":[)" + kTime + "]"));
  EXPECT_EQ(prompt_text(chatml(), s).rfind("<|im_start|>system\n# Tools\n", 0), 0u);
  ApiRequest n = ok(body(R"("tools":[)" + kTime + R"(],"tool_choice":"none")"));
  EXPECT_EQ(prompt_text(chatml(), n), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  // The token layout build_prompt makes is that text's tokens.
  auto tok = Tokenizer::load(std::string(HYPIC_SOURCE_DIR) + "/tests/models/qwen3_5_dense/tokenizer.json");
  ASSERT_TRUE(tok.is_ok());
  PromptParts p;
  ASSERT_FALSE(build_prompt(*tok, chatml(), r, 1 << 20, &p));
  EXPECT_EQ(p.concatenated(), tok->encode(want));
  // A family without a tool format here: a clear 400, not a prompt without the tools.
  PromptParts q;
  auto e = build_prompt(*tok, *chat_template_for("bailing").value(), r, 1 << 20, &q);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "tools");
}

// --auto-segments tools: each description its own segment, the rest of the conversation in
// the suffix; documents in the question win (one run of segments). parts: trailing tool results.
TEST(Tools, ToolDescriptionsAndResultsAsSegments) {
  auto tok = Tokenizer::load(std::string(HYPIC_SOURCE_DIR) + "/tests/models/qwen3_5_dense/tokenizer.json");
  ASSERT_TRUE(tok.is_ok());
  AutoSegments tools_mode;
  tools_mode.tools = true;
  ApiRequest r = ok(body(R"("tools":[)" + kWeather + "," + kTime + "]", R"([{"role":"system","content":"S"},{"role":"user","content":"Hi"}])"));
  ASSERT_FALSE(apply_auto_segments(&r, tools_mode, RequestLimits{}));
  EXPECT_TRUE(r.segment_tools);
  EXPECT_EQ(r.auto_segments_made, 2);
  PromptParts p;
  ASSERT_FALSE(build_prompt(*tok, chatml(), r, 1 << 20, &p));
  ASSERT_EQ(p.segments.size(), 2u);
  EXPECT_EQ(p.segments[0], tok->encode("\n" + r.tools[0].rendered, false));
  EXPECT_EQ(p.segments[1], tok->encode("\n" + r.tools[1].rendered, false));
  EXPECT_EQ(tok->decode(p.prefix), "<|im_start|>system\nS\n\n" + chatml().tool_format()->preamble_head);
  EXPECT_EQ(tok->decode(p.suffix).rfind(chatml().tool_format()->preamble_tail + "<|im_end|>\n<|im_start|>user\nHi", 0), 0u);
  EXPECT_EQ(tok->decode(p.concatenated()), prompt_text(chatml(), r));  // the same text, cut
  // A question with separated documents keeps them as the segments.
  AutoSegments both = tools_mode;
  both.separator = true;
  ApiRequest d = ok(body(R"("tools":[)" + kTime + "]", R"([{"role":"user","content":"Doc one<<PIC_SEP>>Q?"}])"));
  ASSERT_FALSE(apply_auto_segments(&d, both, RequestLimits{}));
  EXPECT_FALSE(d.segment_tools);
  EXPECT_EQ(d.auto_segments_made, 1);
  // parts: a conversation that ends with tool results has each result as a segment.
  AutoSegments parts;
  parts.parts = true;
  ApiRequest t = ok(body(R"("tools":[)" + kTime + "]", R"([{"role":"user","content":"Time?"}, {"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"get_time","arguments":"{}"}},                                                  {"id":"b","type":"function","function":{"name":"get_time","arguments":"{}"}}]}, {"role":"tool","tool_call_id":"a","content":"12:00"},{"role":"tool","tool_call_id":"b","content":"13:00"}])"));
  ASSERT_FALSE(apply_auto_segments(&t, parts, RequestLimits{}));
  EXPECT_TRUE(t.segment_tool_results);
  EXPECT_EQ(t.auto_segments_made, 2);
  PromptParts q;
  ASSERT_FALSE(build_prompt(*tok, chatml(), t, 1 << 20, &q));
  ASSERT_EQ(q.segments.size(), 2u);
  EXPECT_EQ(tok->decode(q.segments[0]), "<tool_response>\n12:00\n</tool_response>");
  EXPECT_EQ(tok->decode(q.segments[1]), "\n<tool_response>\n13:00\n</tool_response>");
  EXPECT_EQ(tok->decode(q.concatenated()), prompt_text(chatml(), t));
}

// Qwen3.5's format: the tools block opens the system turn, calls are XML elements (the same
// text as the Qwen3.5 checkpoints' chat template renders).
TEST(Tools, Qwen35WritesToolsFirstAndXmlCalls) {
  const ChatTemplate& q35 = *chat_template_for("qwen3.5").value();
  ApiRequest r = ok(body(R"("tools":[)" + kTime + "]", R"([{"role":"system","content":"Be brief."},
      {"role":"user","content":"Time?"},
      {"role":"assistant","content":"Checking.","tool_calls":[{"id":"a","type":"function","function":{"name":"get_time","arguments":"{\"tz\": \"UTC\", \"exact\": true, \"n\": 2, \"list\": [1, \"x\"]}"}}]},
      {"role":"tool","tool_call_id":"a","content":"12:00"}])"));
  const ToolFormat& f = *q35.tool_format();
  const std::string want = "<|im_start|>system\n" + f.preamble_head + "\n{\"type\": \"function\", \"function\": {\"name\": \"get_time\"}}" +
                           f.preamble_tail + "\n\nBe brief.<|im_end|>\n<|im_start|>user\nTime?<|im_end|>\n"
                           "<|im_start|>assistant\nChecking.\n\n<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n"
                           "<parameter=exact>\nTrue\n</parameter>\n<parameter=n>\n2\n</parameter>\n<parameter=list>\n[1, \"x\"]\n"
                           "</parameter>\n</function>\n</tool_call><|im_end|>\n"
                           "<|im_start|>user\n<tool_response>\n12:00\n</tool_response><|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(prompt_text(q35, r), want);
  EXPECT_EQ(f.preamble_head, "# Tools\n\nYou have access to the following functions:\n\n<tools>");
  // The grammar of a required call is the XML form, typed by the schema.
  ApiRequest req = ok(body(R"("tools":[)" + kWeather + "," + kTime + R"(],"tool_choice":"required","parallel_tool_calls":false)"));
  ASSERT_FALSE(request_grammar(q35, &req));
  const std::string call = "<tool_call>\n<function=get_weather>\n<parameter=city>\nSt. Gallen\nnorth\n</parameter>\n"
                           "<parameter=unit>\nc\n</parameter>\n</function>\n</tool_call>";
  EXPECT_TRUE(req.grammar->matches(call));
  EXPECT_FALSE(req.grammar->matches("<tool_call>\n<function=get_weather>\n<parameter=city>\nx\n</parameter>\n</function>\n</tool_call>"));
  EXPECT_FALSE(req.grammar->matches("<tool_call>\n<function=get_weather>\n<parameter=city>\nx\n</parameter>\n"
                                    "<parameter=unit>\nkelvin\n</parameter>\n</function>\n</tool_call>"));
  EXPECT_TRUE(req.grammar->matches("<tool_call>\n<function=get_time>\n<parameter=anything>\nat all\n</parameter>\n</function>\n</tool_call>"));
  // And the reader types each value by the tool's schema.
  const ParsedReply p = read_tool_calls(call, f.call_open, f.call_close, req.tools, false);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"St. Gallen\nnorth","unit":"c"})");
  const std::string typed = "<tool_call>\n<function=get_time>\n<parameter=n>\n3\n</parameter>\n<parameter=ok>\nTrue\n</parameter>\n"
                            "<parameter=xs>\n[1, 2]\n</parameter>\n<parameter=s>\nplain words\n</parameter>\n</function>\n</tool_call>";
  const ParsedReply t = read_tool_calls("Let me see.\n\n" + typed, f.call_open, f.call_close, req.tools, false);
  EXPECT_EQ(t.content, "Let me see.");
  ASSERT_EQ(t.calls.size(), 1u);
  EXPECT_EQ(t.calls[0].arguments, R"({"n":3,"ok":true,"xs":[1,2],"s":"plain words"})");
  EXPECT_TRUE(read_tool_calls("<tool_call>\n<function=get_time>\n<parameter=n>\n3\n</function>\n</tool_call>", f.call_open, f.call_close,
                              req.tools, false).calls.empty());  // an unclosed parameter: text
}

TEST(Tools, GrammarPerChoice) {
  ApiRequest a = ok(body(R"("tools":[)" + kWeather + "," + kTime + "]"));
  ASSERT_FALSE(request_grammar(chatml(), &a));
  // auto: free text until a call's open tag, then the rest of that one call.
  ASSERT_TRUE(a.grammar);
  EXPECT_EQ(a.grammar_trigger, "<tool_call>");
  EXPECT_TRUE(a.grammar->matches("\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(a.grammar->matches("\n{\"name\": \"nope\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_EQ(a.tool_call_open, "<tool_call>\n");
  ApiRequest req = ok(body(R"("tools":[)" + kWeather + "," + kTime + R"(],"tool_choice":"required","parallel_tool_calls":false)"));
  ASSERT_FALSE(request_grammar(chatml(), &req));
  ASSERT_TRUE(req.grammar);
  const std::string call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"c\"}}\n</tool_call>";
  EXPECT_TRUE(req.grammar->matches(call));
  EXPECT_FALSE(req.grammar->matches(call + "\n" + call));  // parallel_tool_calls false
  ApiRequest named = ok(body(R"("tools":[)" + kWeather + "," + kTime + R"(],"tool_choice":{"type":"function","function":{"name":"get_time"}})"));
  ASSERT_FALSE(request_grammar(chatml(), &named));
  EXPECT_FALSE(named.grammar->matches(call));
  EXPECT_TRUE(named.grammar->matches("<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"x\": [1]}}\n</tool_call>"));
  ApiRequest js = ok(body(R"("response_format":{"type":"json_object"})"));
  ASSERT_FALSE(request_grammar(chatml(), &js));
  EXPECT_TRUE(js.grammar->matches(R"({"a": 1})"));
  EXPECT_FALSE(js.grammar->matches("[1]"));
}

std::vector<ToolDef> defs(const std::vector<std::string>& names) {
  std::vector<ToolDef> out;
  for (const std::string& n : names) out.push_back({n, nullptr, ""});
  return out;
}

TEST(Tools, ReadingCallsOutOfReplies) {
  const std::vector<ToolDef> names = defs({"get_time", "get_weather"});
  const std::string open = "<tool_call>\n", close = "\n</tool_call>";
  struct Case {
    std::string text, content;
    std::vector<std::string> calls;  // name + arguments
    bool cut = false;                // the reply was cut by max_tokens
  };
  const Case cases[] = {
      {"Just text.", "Just text.", {}},
      {"Let me check.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"UTC\"}}\n</tool_call>", "Let me check.",
       {"get_time{\"tz\":\"UTC\"}"}},
      {"<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", "
       "\"arguments\": \"{\\\"city\\\": \\\"Oslo\\\"}\"}\n</tool_call>",
       "", {"get_time{}", "get_weather{\"city\":\"Oslo\"}"}},
      // Broken JSON, an unknown tool, arguments that are not an object, an unterminated block: text,
      // unless the reply was cut by max_tokens inside it (then dropped, after the calls before it).
      {"<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\n</tool_call>", "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\n</tool_call>", {}},
      {"<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>", "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>", {}},
      {"<tool_call>\n{\"name\": \"get_time\", \"arguments\": [1]}\n</tool_call>", "<tool_call>\n{\"name\": \"get_time\", \"arguments\": [1]}\n</tool_call>", {}},
      {"Sure <tool_call>\n{\"name\": \"get_time\"", "Sure <tool_call>\n{\"name\": \"get_time\"", {}},
      {"Sure <tool_call>\n{\"name\": \"get_time\"", "Sure", {}, true},
      {"<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"argu",
       "", {"get_time{}"}, true},
      {"<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n<tool_", "", {"get_time{}"}, true},
      {"a <tool_ca", "a <tool_ca", {}},
      {"a <tool_ca", "a", {}, true},
  };
  for (const Case& c : cases) {
    ParsedReply whole = read_tool_calls(c.text, open, close, names, c.cut);
    EXPECT_EQ(whole.content, c.content) << c.text;
    ASSERT_EQ(whole.calls.size(), c.calls.size()) << c.text;
    for (size_t i = 0; i < c.calls.size(); ++i) {
      EXPECT_EQ(whole.calls[i].name + whole.calls[i].arguments, c.calls[i]) << c.text;
      EXPECT_EQ(whole.calls[i].id.rfind("call_", 0), 0u);
    }
    // Streamed in two pieces cut anywhere, and byte by byte: the same content and calls.
    for (size_t cut = 0; cut <= c.text.size(); ++cut) {
      ToolCallReader r(open, close, names);
      std::string content;
      std::vector<std::string> calls;
      auto add = [&](std::vector<ToolCallReader::Event> evs) {
        for (auto& e : evs) {
          if (e.is_call) calls.push_back(e.call.name + e.call.arguments);
          else content += e.text;
        }
      };
      add(r.feed(c.text.substr(0, cut)));
      if (cut == 1)
        for (size_t i = cut; i < c.text.size(); ++i) add(r.feed(c.text.substr(i, 1)));
      else
        add(r.feed(c.text.substr(cut)));
      add(r.finish(c.cut));
      EXPECT_EQ(content, c.content) << c.text << " cut " << cut;
      EXPECT_EQ(calls, c.calls) << c.text << " cut " << cut;
    }
  }
}

}  // namespace
}  // namespace hypic::server
