// The byte-grammar recogniser and the JSON-schema compiler, against plain references: JSON
// texts the grammar admits must parse (nlohmann) and validate (a plain validator of the
// subset, below); texts it rejects must not (hand-picked cases); random walks through the
// grammar's allowed bytes generate texts that are then checked the same way.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "grammar/json_schema.h"

namespace hypic::grammar {
namespace {

using Json = nlohmann::ordered_json;

// Plain validator of the subset (the reference the grammars are checked against).
bool valid(const Json& v, const Json& s, const Json& root) {
  if (s.is_boolean()) return s.get<bool>();
  if (s.contains("$ref")) {
    const std::string r = s["$ref"];
    const std::string key = r.rfind("#/$defs/", 0) == 0 ? "$defs" : "definitions";
    return valid(v, root[key][r.substr(r.find_last_of('/') + 1)], root);
  }
  if (s.value("nullable", false) && v.is_null()) return true;
  if (s.contains("const")) return v == s["const"];
  if (s.contains("enum")) {
    for (const Json& e : s["enum"])
      if (e == v) return true;
    return false;
  }
  if (s.contains("anyOf")) {
    for (const Json& a : s["anyOf"])
      if (valid(v, a, root)) return true;
    return false;
  }
  if (s.contains("type")) {
    std::vector<std::string> types;
    if (s["type"].is_string()) types.push_back(s["type"]);
    else for (const Json& t : s["type"]) types.push_back(t);
    bool any = false;
    for (const std::string& t : types) {
      if (t == "object") any |= v.is_object();
      if (t == "array") any |= v.is_array();
      if (t == "string") any |= v.is_string();
      if (t == "number") any |= v.is_number();
      // An integer of more digits than 64 bits parses as a float: integral is what counts.
      if (t == "integer") any |= v.is_number_integer() || (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()));
      if (t == "boolean") any |= v.is_boolean();
      if (t == "null") any |= v.is_null();
    }
    if (!any) return false;
  }
  if (v.is_object()) {
    const Json props = s.value("properties", Json::object());
    for (const Json& r : s.value("required", Json::array()))
      if (!v.contains(r.get<std::string>())) return false;
    for (const auto& [k, x] : v.items()) {
      if (props.contains(k)) {
        if (!valid(x, props[k], root)) return false;
      } else if (s.contains("additionalProperties")) {
        const Json& a = s["additionalProperties"];
        if (a.is_boolean() ? !a.get<bool>() : !valid(x, a, root)) return false;
      }
    }
  }
  if (v.is_array()) {
    if (v.size() < s.value("minItems", size_t(0)) || v.size() > s.value("maxItems", size_t(1) << 30)) return false;
    if (s.contains("items"))
      for (const Json& x : v)
        if (!valid(x, s["items"], root)) return false;
  }
  return true;
}

// A random sentence of g: random allowed bytes, stopping with probability `stop` once
// accepting (always when nothing may follow); "" if it runs past max_len.
std::string random_walk(const Grammar& g, std::mt19937& rng, double stop, size_t max_len = 4000) {
  Grammar::State s = g.start();
  std::string out;
  while (out.size() < max_len) {
    const ByteSet next = g.next_bytes(s);
    if (Grammar::accepting(s) && (next.none() || std::uniform_real_distribution<>(0, 1)(rng) < stop)) return out;
    std::vector<int> opts;
    for (int b = 0; b < 256; ++b)
      if (next.test(size_t(b))) opts.push_back(b);
    // Favour structure over long strings: printable ASCII mostly.
    std::vector<int> ascii;
    for (int b : opts)
      if (b < 0x80) ascii.push_back(b);
    const auto& pick = ascii.empty() ? opts : ascii;
    const int b = pick[std::uniform_int_distribution<size_t>(0, pick.size() - 1)(rng)];
    out += char(b);
    s = g.advance(s, uint8_t(b));
    EXPECT_FALSE(s.dead()) << out;
  }
  return "";
}

TEST(Grammar, LiteralAltStar) {
  Builder b;
  const auto ab = b.star(b.alt({b.literal("ab"), b.literal("c")}));
  const auto g = b.build(b.seq({b.byte('x'), ab, b.byte('y')}));
  for (const char* ok : {"xy", "xaby", "xcy", "xabcabcy"}) EXPECT_TRUE(g->matches(ok)) << ok;
  for (const char* bad : {"", "x", "xay", "xyy", "abxy", "xabcab"}) EXPECT_FALSE(g->matches(bad)) << bad;
  Grammar::State s = g->start();
  EXPECT_FALSE(g->accept(&s, "xz"));
  EXPECT_TRUE(g->accept(&s, "xab"));
  EXPECT_FALSE(Grammar::accepting(s));
  EXPECT_TRUE(g->accept(&s, "y"));
  EXPECT_TRUE(Grammar::accepting(s));
  EXPECT_FALSE(g->can_continue(s));
}

TEST(Grammar, LongRepetitionKeepsStacksFlat) {
  Builder b;
  const auto g = b.build(b.plus(b.byte('a')));
  Grammar::State s = g->start();
  for (int i = 0; i < 10000; ++i) ASSERT_TRUE(g->accept(&s, "a"));
  ASSERT_EQ(s.stacks.size(), 2u);  // another 'a', or the end
  for (const auto& st : s.stacks) EXPECT_LE(st.size(), 1u);
}

TEST(JsonGrammar, AnyObject) {
  const auto g = json_object_grammar();
  for (const char* ok : {"{}", "{ }", R"({"a": 1})", R"({"a":[1, 2.5e-3, -0, "x\n\u00e9"], "b": {"c": null}})",
                         R"({"k": true, "l": false})", "{\"\xc3\xa9\": \"\xe2\x82\xac\"}"})
    EXPECT_TRUE(g->matches(ok)) << ok;
  for (const char* bad : {"", "[]", "1", "{", R"({"a" 1})", R"({"a": 01})", R"({"a": 1,})", R"({a: 1})",
                          "{\"a\": \"\x01\"}", R"({"a": "\q"})", R"({"a":  1})", R"({"a": tru})", R"({"a": 1.})"})
    EXPECT_FALSE(g->matches(bad)) << bad;
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    const std::string t = random_walk(*g, rng, 0.3);
    if (t.empty()) continue;
    const Json v = Json::parse(t, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << t;
    EXPECT_TRUE(v.is_object()) << t;
  }
}

const char* kSchemas[] = {
    R"({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
        "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city", "unit"], "additionalProperties": false})",
    R"({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "boolean"}, "c": {"type": "null"}},
        "additionalProperties": false})",
    R"({"type": "array", "items": {"type": ["integer", "null"]}, "minItems": 2, "maxItems": 4})",
    R"({"type": "object", "properties": {"tags": {"type": "array", "items": {"enum": ["x", 1, null, {"k": [true]}]}},
        "child": {"$ref": "#/$defs/node"}}, "required": ["tags"],
        "$defs": {"node": {"type": "object", "properties": {"v": {"const": "leaf"}, "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
        "required": ["v", "next"], "additionalProperties": false}}})",
    R"({"type": "object", "additionalProperties": {"type": "integer"}})",
    R"({"properties": {"s": {"type": "string", "nullable": true, "description": "d", "title": "t"}}, "required": ["s"]})",
    R"({})",
};

TEST(JsonSchema, RandomSentencesValidate) {
  std::mt19937 rng(11);
  for (const char* text : kSchemas) {
    const Json schema = Json::parse(text);
    auto g = json_schema_grammar(schema);
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    int made = 0;
    for (int i = 0; i < 200; ++i) {
      const std::string t = random_walk(**g, rng, 0.25);
      if (t.empty()) continue;
      ++made;
      const Json v = Json::parse(t, nullptr, false);
      ASSERT_FALSE(v.is_discarded()) << text << "\n" << t;
      EXPECT_TRUE(valid(v, schema, schema)) << text << "\n" << t;
    }
    EXPECT_GT(made, 100) << text;
  }
}

TEST(JsonSchema, AcceptsAndRejects) {
  const Json weather = Json::parse(kSchemas[0]);
  auto g = json_schema_grammar(weather);
  ASSERT_TRUE(g.is_ok());
  for (const char* ok : {R"({"city": "Paris", "unit": "c"})", R"({"city": "Paris", "days": 3, "unit": "f"})",
                         R"({ "city":"x", "unit": "c" })"})
    EXPECT_TRUE((*g)->matches(ok)) << ok;
  for (const char* bad : {R"({"unit": "c"})", R"({"city": "Paris"})", R"({"city": "Paris", "unit": "k"})",
                          R"({"unit": "c", "city": "Paris"})", R"({"city": "P", "days": 1.5, "unit": "c"})",
                          R"({"city": "P", "unit": "c", "x": 1})", R"({"city": 3, "unit": "c"})"})
    EXPECT_FALSE((*g)->matches(bad)) << bad;
  auto arr = json_schema_grammar(Json::parse(kSchemas[2]));
  ASSERT_TRUE(arr.is_ok());
  EXPECT_TRUE((*arr)->matches("[1, null]"));
  EXPECT_TRUE((*arr)->matches("[1, 2, 3, 4]"));
  EXPECT_FALSE((*arr)->matches("[1]"));
  EXPECT_FALSE((*arr)->matches("[1, 2, 3, 4, 5]"));
}

TEST(JsonSchema, NumbersEndAfterSixteenDigits) {
  auto g = json_schema_grammar(Json::parse(R"({"type": "object", "properties": {"n": {"type": "integer"},
      "x": {"type": "number"}}, "required": ["n", "x"], "additionalProperties": false})"));
  ASSERT_TRUE(g.is_ok());
  const std::string d16(16, '3');
  EXPECT_TRUE((*g)->matches(R"({"n": )" + d16 + R"(, "x": -)" + d16 + "." + d16 + "e-12}"));
  EXPECT_FALSE((*g)->matches(R"({"n": 3)" + d16 + R"(, "x": 1})"));
  EXPECT_FALSE((*g)->matches(R"({"n": 1, "x": 1.)" + d16 + "3}"));
  // After 16 digits only the value's end may follow.
  Grammar::State s = (*g)->start();
  for (char c : std::string(R"({"n": )") + d16) s = (*g)->advance(s, uint8_t(c));
  ASSERT_FALSE(s.dead());
  const ByteSet next = (*g)->next_bytes(s);
  for (char c = '0'; c <= '9'; ++c) EXPECT_FALSE(next.test(uint8_t(c))) << c;
  EXPECT_TRUE(next.test(uint8_t(',')));
}

TEST(JsonSchema, RecursionThatWritesSomethingIsAllowed) {
  // A tree: the recursion goes through an optional member and an array item.
  auto g = json_schema_grammar(Json::parse(R"({"$ref": "#/$defs/t", "$defs": {"t": {"type": "object",
      "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/t"}}},
      "required": ["v"]}}})"));
  ASSERT_TRUE(g.is_ok()) << g.status().to_string();
  EXPECT_TRUE((*g)->matches(R"({"v": 1, "kids": [{"v": 2}, {"v": 3, "kids": []}]})"));
  EXPECT_FALSE((*g)->matches(R"({"kids": []})"));
  // The same reference twice side by side is no cycle.
  EXPECT_TRUE(check_json_schema(Json::parse(R"({"type": "object", "properties": {"a": {"$ref": "#/$defs/s"},
      "b": {"$ref": "#/$defs/s"}}, "$defs": {"s": {"type": "string"}}})")).is_ok());
}

TEST(JsonSchema, OutsideTheSubsetIsAnErrorNamingIt) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type": "string", "pattern": "^a"})", "'pattern' at the schema's root"},
      {R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}})", "'minimum' at 'properties.n'"},
      {R"({"oneOf": [{"type": "string"}]})", "'oneOf'"},
      {R"({"type": "uuid"})", "'uuid'"},
      {R"({"type": "object", "properties": {"a": {}}, "required": ["b"]})", "\"b\", which is not one of its properties"},
      {R"({"$ref": "http://x/y"})", "only references to"},
      {R"({"$ref": "#/$defs/missing"})", "only references to"},
      // Cycles that write nothing between the references, and recursions no finite value ends.
      {R"({"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/a"}}})", "cycle (#/$defs/a → #/$defs/a)"},
      {R"({"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/a"}]}}})",
       "cycle (#/$defs/a → #/$defs/b → #/$defs/a)"},
      {R"({"type": "object", "properties": {"x": {"$ref": "#/definitions/n"}},
          "definitions": {"n": {"type": "object", "properties": {"n": {"$ref": "#/definitions/n"}}, "required": ["n"]}}})",
       "no finite JSON value matches '#/definitions/n'"},
      {R"({"$ref": "#/$defs/l", "$defs": {"l": {"type": "array", "items": {"$ref": "#/$defs/l"}, "minItems": 1}}})",
       "no finite JSON value matches '#/$defs/l'"},
      {R"({"type": "array", "maxItems": 100})", "'maxItems'"},
      {R"({"type": "array", "minItems": 3, "maxItems": 2})", "less than 'minItems'"},
      {R"({"enum": []})", "'enum'"},
      {R"(false)", "no value matches"},
      {R"(3)", "must be an object"},
  };
  for (const auto& [text, want] : cases) {
    const Status s = check_json_schema(Json::parse(text));
    ASSERT_FALSE(s.is_ok()) << text;
    EXPECT_NE(s.message().find(want), std::string::npos) << text << " -> " << s.message();
  }
  // An enum past the limit, and a grammar past the rule limit, are refused.
  Json big = Json{{"enum", Json::array()}};
  for (size_t i = 0; i <= kMaxEnumValues; ++i) big["enum"].push_back(int(i));
  EXPECT_NE(check_json_schema(big).message().find("at most"), std::string::npos);
  Json values = Json::array();
  for (size_t i = 0; i < kMaxEnumValues; ++i) values.push_back("value " + std::to_string(i));
  Json wide = Json{{"type", "object"}, {"properties", Json::object()}};
  for (size_t i = 0; i <= kMaxSchemaRules / kMaxEnumValues; ++i) wide["properties"][std::string("p").append(std::to_string(i))] = Json{{"enum", values}};
  EXPECT_NE(check_json_schema(wide).message().find("rules"), std::string::npos) << check_json_schema(wide).message();
  Json many = Json{{"type", "object"}, {"properties", Json::object()}};
  for (size_t i = 0; i <= kMaxSchemaRules / 16; ++i) many["properties"][std::string("p").append(std::to_string(i))] = Json{{"type", "boolean"}};
  EXPECT_NE(check_json_schema(many).message().find("subschemas"), std::string::npos);
  // Nesting past the limit is refused, not recursed into.
  Json deep = Json::object();
  for (int i = 0; i < kMaxSchemaDepth + 5; ++i) deep = Json{{"type", "array"}, {"items", deep}};
  EXPECT_FALSE(check_json_schema(deep).is_ok());
}

TEST(ToolCalls, GrammarOfCalls) {
  const ToolCallFormat f{"<tool_call>\n", "\n</tool_call>", "\n"};
  std::vector<ToolSpec> tools{{"get_weather", Json::parse(kSchemas[0])}, {"noop", nullptr}};
  auto one = tool_call_grammar(f, tools, false);
  ASSERT_TRUE(one.is_ok());
  const std::string call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"c\"}}\n</tool_call>";
  EXPECT_TRUE((*one)->matches(call));
  EXPECT_TRUE((*one)->matches("<tool_call>\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE((*one)->matches("<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE((*one)->matches(call + "\n" + call));
  auto many = tool_call_grammar(f, tools, true);
  ASSERT_TRUE(many.is_ok());
  EXPECT_TRUE((*many)->matches(call + "\n" + call));
  std::vector<ToolSpec> bad{{"t", Json::parse(R"({"type": "string", "format": "date"})")}};
  auto e = tool_call_grammar(f, bad, false);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("tool 't'"), std::string::npos);
}

}  // namespace
}  // namespace hypic::grammar
