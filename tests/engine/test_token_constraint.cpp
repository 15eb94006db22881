// Constrained decoding against a brute-force reference: the mask (a trie walk) equals checking
// every token's bytes against the grammar; every sampled token is allowed; greedy picks the
// masked argmax; decoding with a grammar ends in a sentence of it.
#include <gtest/gtest.h>

#include <random>

#include "engine/engine_util.h"
#include "engine/generate.h"
#include "grammar/json_schema.h"

namespace hypic {
namespace {

using Json = nlohmann::ordered_json;

const Tokenizer& tiny_tok() {
  static const Tokenizer t = std::move(Tokenizer::load(std::string(HYPIC_SOURCE_DIR) + "/models/hypic-tiny")).value();
  return t;
}

std::vector<int32_t> tiny_eos() { return {tiny_tok().token_id("<|im_end|>"), tiny_tok().token_id("<|endoftext|>")}; }

std::shared_ptr<const grammar::Grammar> weather_calls() {
  const Json params = Json::parse(R"({"type": "object", "properties": {"city": {"type": "string"},
      "unit": {"enum": ["celsius", "fahrenheit"]}, "days": {"type": "integer"}}, "required": ["city", "unit"],
      "additionalProperties": false})");
  return std::move(grammar::tool_call_grammar({"<tool_call>\n", "\n</tool_call>", "\n"},
                                              {{"get_weather", params}, {"get_time", nullptr}}, true)).value();
}

// The reference: every id checked on its own.
std::vector<uint8_t> brute_mask(TokenConstraint& c, int64_t V) {
  std::vector<uint8_t> m(static_cast<size_t>(V), 0);
  for (int64_t i = 0; i < V; ++i) m[size_t(i)] = c.allows(int32_t(i)) ? 1 : 0;
  return m;
}

std::vector<uint8_t> reference_mask(const grammar::Grammar& g, const grammar::Grammar::State& s, const Tokenizer& tok,
                                    const std::vector<int32_t>& eos, int64_t V) {
  std::vector<uint8_t> m(static_cast<size_t>(V), 0);
  for (int32_t i = 0; i < V; ++i) {
    if (std::find(eos.begin(), eos.end(), i) != eos.end()) m[size_t(i)] = grammar::Grammar::accepting(s);
    else if (tok.is_known(i) && !tok.is_special(i) && !tok.token_bytes(i).empty())
      m[size_t(i)] = !g.advance(s, tok.token_bytes(i)).dead();
  }
  return m;
}

TEST(TokenConstraint, MaskEqualsBruteForceAlongASentence) {
  const Tokenizer& tok = tiny_tok();
  const auto g = weather_calls();
  const std::string text =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Z\\u00fcrich \xc3\xa9t\xc3\xa9\", \"unit\": \"celsius\", "
      "\"days\": 12}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": [1, {\"a\": null}]}}\n</tool_call>";
  ASSERT_TRUE(g->matches(text));
  const std::vector<int32_t> ids = tok.encode(text, /*parse_special=*/false);
  const int64_t V = tok.vocab_size();
  TokenConstraint c(g, tok, tiny_eos());
  grammar::Grammar::State ref = g->start();
  std::vector<uint8_t> mask;
  for (size_t i = 0; i <= ids.size(); ++i) {
    c.allowed_mask(&mask, V);
    ASSERT_EQ(mask, reference_mask(*g, ref, tok, tiny_eos(), V)) << "at token " << i;
    ASSERT_EQ(mask, brute_mask(c, V)) << "at token " << i;
    if (i == ids.size()) break;
    ASSERT_TRUE(c.allows(ids[i])) << i;
    c.accept(ids[i]);
    ASSERT_TRUE(g->accept(&ref, tok.token_bytes(ids[i])));
  }
  EXPECT_TRUE(c.complete());
  EXPECT_TRUE(c.allows(tiny_eos()[0]));
  EXPECT_FALSE(c.finished());  // another call may follow
}

// Random logits, every sampling mode: each token allowed, the text a sentence at the end.
TEST(TokenConstraint, SamplingStaysInsideTheGrammar) {
  const Tokenizer& tok = tiny_tok();
  const int64_t V = tok.vocab_size();
  const std::vector<std::shared_ptr<const grammar::Grammar>> grammars = {
      weather_calls(), grammar::json_object_grammar(),
      std::move(grammar::json_schema_grammar(Json::parse(R"({"type": "array", "items": {"enum": ["a", "bb", 3]}, "maxItems": 3})"))).value()};
  SamplingParams modes[4];
  modes[1].temperature = 1.0f;
  modes[2].temperature = 0.8f;
  modes[2].top_p = 0.9f;
  modes[3].temperature = 1.2f;
  modes[3].top_k = 20;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> logits(static_cast<size_t>(V), 0.0f);
  int ended = 0;
  for (const auto& g : grammars)
    for (const SamplingParams& mp : modes)
      for (int run = 0; run < 1; ++run) {
        SamplingParams p = mp;
        p.seed = uint64_t(run);
        Sampler sampler(p);
        TokenConstraint c(g, tok, tiny_eos());
        std::string text;
        for (int step = 0; step < 150; ++step) {
          for (float& x : logits) x = nd(rng);
          // Make the end likely once allowed, so that runs finish.
          for (int32_t e : tiny_eos()) logits[size_t(e)] += 6.0f;
          const std::vector<uint8_t> ref = brute_mask(c, V);
          const int32_t id = c.sample(sampler, p, logits.data(), V);
          ASSERT_GE(id, 0);
          ASSERT_TRUE(ref[size_t(id)]) << "token " << id << " after " << text;
          if (p.temperature <= 0) {  // greedy: the masked argmax
            int32_t best = -1;
            for (int32_t i = 0; i < V; ++i)
              if (ref[size_t(i)] && (best < 0 || logits[size_t(i)] > logits[size_t(best)])) best = i;
            ASSERT_EQ(id, best);
          }
          if (id == tiny_eos()[0] || id == tiny_eos()[1]) {
            EXPECT_TRUE(g->matches(text)) << text;
            ++ended;
            break;
          }
          c.accept(id);
          text += tok.token_bytes(id);
        }
      }
  EXPECT_GT(ended, 4);
}

// Lazy (tool_choice auto): free text until the trigger, then one call, then free again.
TEST(TokenConstraint, LazyGrammarHoldsOnlyTheCallAfterItsTrigger) {
  const Tokenizer& tok = tiny_tok();
  const int64_t V = tok.vocab_size();
  const Json params = Json::parse(R"({"type": "object", "properties": {"unit": {"enum": ["c", "f"]}}, "required": ["unit"],
      "additionalProperties": false})");
  const auto g = std::move(grammar::tool_call_grammar({"\n", "\n</tool_call>", "\n"}, {{"get_weather", params}}, false)).value();
  TokenConstraint c(g, tok, tiny_eos(), "<tool_call>");
  std::vector<uint8_t> mask;
  c.allowed_mask(&mask, V);
  EXPECT_EQ(std::count(mask.begin(), mask.end(), uint8_t(1)), V);  // free text
  const std::vector<int32_t> ids = tok.encode("Let me check. <tool_call>", /*parse_special=*/false);
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_FALSE(c.active()) << i;
    ASSERT_TRUE(c.allows(ids[i]));
    c.accept(ids[i]);
  }
  ASSERT_TRUE(c.active());  // the trigger is whole: the call's grammar from here
  EXPECT_FALSE(c.allows(tiny_eos()[0]));
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> logits(static_cast<size_t>(V), 0.0f);
  SamplingParams p;
  p.temperature = 1.0f;
  Sampler sampler(p);
  std::string call;
  for (int step = 0; step < 200 && c.active(); ++step) {
    for (float& x : logits) x = nd(rng);
    const int32_t id = c.sample(sampler, p, logits.data(), V);
    ASSERT_GE(id, 0);
    ASSERT_EQ(brute_mask(c, V)[size_t(id)], 1);
    c.accept(id);
    call += tok.token_bytes(id);
  }
  EXPECT_FALSE(c.active());  // the call closed: free again
  EXPECT_TRUE(g->matches(call)) << call;
  EXPECT_TRUE(c.allows(tiny_eos()[0]));
}

// Gated (a reasoning model's reply): a trigger inside the reasoning block is text; after the
// block's close, the same trigger starts the call's grammar.
TEST(TokenConstraint, GatedTriggerCountsOnlyAfterTheGate) {
  const Tokenizer& tok = tiny_tok();
  const auto g = std::move(grammar::tool_call_grammar({"\n", "\n</tool_call>", "\n"}, {{"get_time", nullptr}}, false)).value();
  TokenConstraint c(g, tok, tiny_eos(), "<tool_call>", "\n</think>\n\n");
  auto feed = [&](const std::string& text) {
    for (int32_t id : tok.encode(text, /*parse_special=*/false)) {
      ASSERT_TRUE(c.allows(id));
      c.accept(id);
    }
  };
  feed("I could answer with <tool_call>\n{\"name\": \"get_time\"");
  EXPECT_FALSE(c.active()) << "a call while thinking is thought";
  feed(" but no.\n</thi");
  EXPECT_FALSE(c.active());
  feed("nk>\n\nSure. <tool_call>\n");
  EXPECT_TRUE(c.active()) << "after the block, the trigger holds the call to the grammar";
  EXPECT_FALSE(c.allows(tiny_eos()[0]));
  // Without the gate the first trigger starts the grammar at once.
  TokenConstraint plain(g, tok, tiny_eos(), "<tool_call>");
  for (int32_t id : tok.encode("I could answer with <tool_call>\n", /*parse_special=*/false)) plain.accept(id);
  EXPECT_TRUE(plain.active());
}

// Through DecodeCursor on a real (random-weight) model: a response that is valid JSON of
// the schema whenever it ended by itself.
TEST(TokenConstraint, GenerateWithASchema) {
  const Model& m = test::model();
  auto tok = Tokenizer::load(test::model_dir("qwen3_5_dense") + "/tokenizer.json");
  ASSERT_TRUE(tok.is_ok());
  const Json schema = Json::parse(R"({"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"enum": [1, 2]}},
      "required": ["ok", "n"], "additionalProperties": false})");
  GenerateOptions o;
  o.max_tokens = 64;
  o.grammar = std::move(grammar::json_schema_grammar(schema)).value();
  for (uint64_t seed = 0; seed < 4; ++seed) {
    o.sampling.temperature = seed == 0 ? 0.0f : 1.0f;
    o.sampling.seed = seed;
    auto r = generate(m, *tok, test::doc(uint32_t(seed), 12), o);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    EXPECT_EQ(r->finish_reason, "stop") << r->text;
    const Json v = Json::parse(r->text, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << r->text;
    EXPECT_TRUE(v["ok"].is_boolean()) << r->text;
    EXPECT_TRUE(v["n"] == 1 || v["n"] == 2) << r->text;
  }
}

}  // namespace
}  // namespace hypic
