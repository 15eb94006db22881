// Unit tests: API, incremental decoding, load errors, threads, throughput.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/base64.h"
#include "core/timer.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer_test_util.h"
#include "tokenizer/unicode.h"

namespace hypic {
namespace {

using json = nlohmann::json;
using testing::qwen_tokenizer;

bool valid_utf8(const std::string& s) { return unicode::valid_utf8_prefix(s) == s.size(); }

// Id of the token that stands for exactly these raw bytes.
int32_t byte_token(const Tokenizer& tok, std::string_view bytes) {
  return tok.token_id(bpe::bytes_to_bytelevel(bytes));
}

TEST(Tokenizer, Basics) {
  const Tokenizer& tok = qwen_tokenizer();
  EXPECT_GT(tok.vocab_size(), 4000);
  int32_t im_end = tok.token_id("<|im_end|>");
  ASSERT_GE(im_end, 0);
  EXPECT_TRUE(tok.is_special(im_end));
  EXPECT_EQ(tok.token_str(im_end), "<|im_end|>");
  EXPECT_EQ(tok.token_bytes(im_end), "<|im_end|>");
  int32_t think = tok.token_id("<think>");
  ASSERT_GE(think, 0);
  EXPECT_FALSE(tok.is_special(think));  // added, not special (as in Qwen3)
  int32_t space = tok.token_id("Ġ");
  ASSERT_GE(space, 0);
  EXPECT_EQ(tok.token_bytes(space), " ");
  EXPECT_FALSE(tok.is_special(space));
  EXPECT_EQ(tok.token_id("no such token"), -1);
  EXPECT_EQ(tok.token_str(-1), "");
  EXPECT_EQ(tok.token_str(1 << 30), "");
  EXPECT_FALSE(tok.is_special(-5));
  EXPECT_EQ(tok.encode(""), std::vector<int32_t>{});
  EXPECT_EQ(tok.decode(std::vector<int32_t>{}), "");
  EXPECT_EQ(tok.encode("<|im_end|>"), std::vector<int32_t>{im_end});
  EXPECT_NE(tok.encode("<|im_end|>", false), std::vector<int32_t>{im_end});
  EXPECT_NE(tok.summary().find("Split(qwen2)"), std::string::npos) << tok.summary();
}

TEST(Tokenizer, EncodeAppendAndDecodeOverloads) {
  const Tokenizer& tok = qwen_tokenizer();
  std::vector<int32_t> ids = tok.encode("Hello");
  tok.encode_append(", world<|im_end|>", ids);
  EXPECT_EQ(ids, tok.encode("Hello, world<|im_end|>"));
  EXPECT_EQ(tok.decode(ids), "Hello, world<|im_end|>");
  EXPECT_EQ(tok.decode(std::span<const int32_t>(ids).first(ids.size() - 1)), "Hello, world");
  EXPECT_EQ(tok.decode({tok.token_id("<|im_start|>")}, true), "");
}

TEST(Tokenizer, CopiesShareStateAndStayUsable) {
  Tokenizer a = qwen_tokenizer();
  Tokenizer b = a;
  Tokenizer c = std::move(a);
  EXPECT_EQ(b.encode("hello world, Grüße"), c.encode("hello world, Grüße"));
}

TEST(Tokenizer, RoundTripIsNfcOfInput) {
  // Without two of the test's added tokens, for which it is not an identity: "<mask>"
  // (lstrip/rstrip swallow spaces) and "café" (the ByteLevel decoder maps its "é" to the
  // byte 0xE9, as HF does).
  json j = json::parse(testing::read_file(testing::tok_data("tokenizer.json")));
  json kept = json::array();
  for (const json& t : j["added_tokens"])
    if (t["content"] != "<mask>" && t["content"] != "café") kept.push_back(t);
  j["added_tokens"] = kept;
  auto loaded = Tokenizer::from_json(j.dump());
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  const Tokenizer& tok = loaded.value();
  const std::string& text = testing::multilingual_text();
  std::string nfc;
  unicode::append_nfc(text, nfc);
  EXPECT_NE(nfc, text);  // the text has decomposed accents
  EXPECT_TRUE(tok.decode(tok.encode(text)) == nfc);
  // Long runs: one pre-token of 200k bytes, 100k spaces, 50k digits.
  for (const std::string& s : {std::string(200000, 'a'), std::string(100000, ' '),
                               std::string(50000, '7'), std::string(30000, '\n')}) {
    Timer t;
    auto ids = tok.encode(s);
    EXPECT_TRUE(tok.decode(ids) == s);
    EXPECT_LT(t.seconds(), 5.0) << "long run of '" << s[0] << "'";
  }
}

TEST(Tokenizer, InvalidUtf8DoesNotCrash) {
  const Tokenizer& tok = qwen_tokenizer();
  std::string junk;
  uint32_t x = 12345;
  for (int i = 0; i < 20000; ++i) {
    x = x * 1103515245u + 12345u;
    junk.push_back(char(x >> 16));
  }
  auto ids = tok.encode(junk);
  std::string back = tok.decode(ids);
  EXPECT_TRUE(valid_utf8(back));
  std::string repaired;
  unicode::append_lossy(junk, repaired);
  std::string repaired_nfc;
  unicode::append_nfc(repaired, repaired_nfc);
  EXPECT_TRUE(back == repaired_nfc);
  EXPECT_EQ(tok.decode(tok.encode("a\xff" "b")), "a\xEF\xBF\xBD" "b");
}

TEST(IncrementalDecoder, SplitMultiByteCharacters) {
  const Tokenizer& tok = qwen_tokenizer();
  IncrementalDecoder dec(tok);
  // "中" = E4 B8 AD, fed one byte token at a time.
  EXPECT_EQ(dec.push(byte_token(tok, "\xE4")), "");
  EXPECT_EQ(dec.pending_bytes(), 1u);
  EXPECT_EQ(dec.push(byte_token(tok, "\xB8")), "");
  EXPECT_EQ(dec.push(byte_token(tok, "\xAD")), "中");
  EXPECT_EQ(dec.pending_bytes(), 0u);
  // A 4-byte emoji split 1 + 3.
  EXPECT_EQ(dec.push(byte_token(tok, "\xF0")), "");
  EXPECT_EQ(dec.push(byte_token(tok, "\x9F")), "");
  EXPECT_EQ(dec.push(byte_token(tok, "\x98")), "");
  EXPECT_EQ(dec.push(byte_token(tok, "\x80")), "😀");
  // A byte that can never be valid comes out as U+FFFD at once.
  EXPECT_EQ(dec.push(byte_token(tok, "\xFF")), "\xEF\xBF\xBD");
  // An incomplete character broken by ASCII: U+FFFD, then the ASCII.
  EXPECT_EQ(dec.push(byte_token(tok, "\xE4")), "");
  EXPECT_EQ(dec.push(byte_token(tok, "A")), "\xEF\xBF\xBD" "A");
  // flush() turns what is left into U+FFFD.
  EXPECT_EQ(dec.push(byte_token(tok, "\xE4")), "");
  EXPECT_EQ(dec.push(byte_token(tok, "\xB8")), "");
  EXPECT_EQ(dec.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(dec.pending_bytes(), 0u);
  EXPECT_EQ(dec.flush(), "");
}

TEST(IncrementalDecoder, StreamEqualsFullDecode) {
  const Tokenizer& tok = qwen_tokenizer();
  for (bool skip : {false, true}) {
    auto ids = tok.encode(testing::multilingual_text());
    IncrementalDecoder dec(tok, skip);
    std::string streamed;
    for (int32_t id : ids) {
      std::string piece = dec.push(id);
      EXPECT_TRUE(valid_utf8(piece));
      streamed += piece;
    }
    streamed += dec.flush();
    EXPECT_TRUE(streamed == tok.decode(ids, skip)) << "skip_special " << skip;
  }
  // Random ids (any byte soup) too.
  uint32_t x = 7;
  std::vector<int32_t> ids;
  for (int i = 0; i < 3000; ++i) {
    x = x * 1103515245u + 12345u;
    ids.push_back(int32_t((x >> 8) % uint32_t(tok.vocab_size() + 2)));
  }
  IncrementalDecoder dec(tok);
  std::string streamed = dec.push(ids) + dec.flush();
  EXPECT_TRUE(streamed == tok.decode(ids));
}

// ---- load errors ----

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("hypic_tok_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string write(const std::string& name, const std::string& content) const {
    std::string p = (path_ / name).string();
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }
  std::string dir() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

json base_json() { return json::parse(testing::read_file(testing::tok_data("tokenizer.json"))); }

Status load_error(const json& j) {
  auto r = Tokenizer::from_json(j.dump(), "test.json");
  EXPECT_FALSE(r.is_ok());
  return r.status();
}

bool mentions(const Status& s, const std::string& what) {
  return s.message().find(what) != std::string::npos;
}

TEST(TokenizerLoad, MissingFileAndDirectory) {
  auto r = Tokenizer::load("/nonexistent/dir/tokenizer.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(mentions(r.status(), "/nonexistent/dir/tokenizer.json")) << r.status().to_string();
  TempDir tmp;
  auto d = Tokenizer::load(tmp.dir());  // a model directory without tokenizer files
  ASSERT_FALSE(d.is_ok());
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(mentions(d.status(), "tokenizer.json") && mentions(d.status(), "tiktoken.model"))
      << d.status().to_string();
  EXPECT_TRUE(mentions(d.status(), "directory")) << d.status().to_string();
}

TEST(TokenizerLoad, CorruptFiles) {
  TempDir tmp;
  std::string text = testing::read_file(testing::tok_data("tokenizer.json"));
  for (const std::string& bad : {text.substr(0, text.size() / 2), std::string(),
                                 std::string("\x89PNG\r\n"), std::string("[1, 2, 3]")}) {
    std::string p = tmp.write("bad.json", bad);
    auto r = Tokenizer::load(p);
    ASSERT_FALSE(r.is_ok());
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt) << r.status().to_string();
    EXPECT_TRUE(mentions(r.status(), p)) << r.status().to_string();
  }
  json j = base_json();
  j["model"]["vocab"]["Ġthe"] = "seven";
  EXPECT_EQ(load_error(j).code(), StatusCode::kCorrupt);
  j = base_json();
  j["model"]["merges"][5] = json::array({"Ġ", "no-such-token"});
  Status s = load_error(j);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_TRUE(mentions(s, "no-such-token") && mentions(s, "merges[5]")) << s.to_string();
  j = base_json();
  j["model"]["merges"][0] = "a b c";
  EXPECT_EQ(load_error(j).code(), StatusCode::kCorrupt);
  j = base_json();
  j["model"]["vocab"] = json::array();
  EXPECT_EQ(load_error(j).code(), StatusCode::kCorrupt);
  j = base_json();
  j["added_tokens"][0].erase("id");
  EXPECT_EQ(load_error(j).code(), StatusCode::kCorrupt);
  j = base_json();
  j["normalizer"] = 42;  // wrong JSON type somewhere deep
  EXPECT_FALSE(Tokenizer::from_json(j.dump()).is_ok());
}

// A family that lives outside src/ brings its split as a matcher (pretok::register_pattern):
// a tokenizer.json whose Split regex is that matcher's then loads and splits with it.
size_t every_char(std::string_view s, size_t i) {
  size_t n = 1;
  while (i + n < s.size() && (uint8_t(s[i + n]) & 0xC0) == 0x80) ++n;
  return i + n;
}
const pretok::Splitter kEveryChar{"test-every-char", "(?s:.)", every_char};

TEST(TokenizerLoad, RegisteredSplitPatternIsRecognised) {
  json j = base_json();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = kEveryChar.regex;
  EXPECT_EQ(load_error(j).code(), StatusCode::kUnsupported);  // unknown before
  ASSERT_TRUE(pretok::register_pattern(&kEveryChar).is_ok());
  EXPECT_FALSE(pretok::register_pattern(&kEveryChar).is_ok());  // a name is taken once
  auto t = Tokenizer::from_json(j.dump(), "test.json");
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(t->encode("hello", false).size(), 5u);  // a piece per character: no merge crosses
  auto whole = Tokenizer::from_json(base_json().dump(), "test.json");
  ASSERT_TRUE(whole.is_ok());
  EXPECT_LT(whole->encode("hello", false).size(), 5u);
}

TEST(TokenizerLoad, UnsupportedComponentsAreNamed) {
  json j = base_json();
  j["normalizer"] = {{"type", "NFKC"}};
  Status s = load_error(j);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_TRUE(mentions(s, "NFKC") && mentions(s, "test.json")) << s.to_string();

  j = base_json();
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\p{L}+|\\s+";
  s = load_error(j);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_TRUE(mentions(s, "Split regex")) << s.to_string();
  for (pretok::Pattern p : pretok::all_patterns()) {  // the message lists what is implemented
    EXPECT_TRUE(mentions(s, pretok::pattern_name(p))) << s.to_string();
    EXPECT_EQ(pretok::recognize(pretok::pattern_regex(p)), p) << pretok::pattern_name(p);
  }

  j = base_json();
  j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
  EXPECT_EQ(load_error(j).code(), StatusCode::kUnsupported);

  j = base_json();
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  EXPECT_TRUE(mentions(load_error(j), "Whitespace"));

  j = base_json();
  j["model"]["type"] = "WordPiece";
  s = load_error(j);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_TRUE(mentions(s, "WordPiece")) << s.to_string();

  j = base_json();
  j["model"]["dropout"] = 0.1;
  EXPECT_EQ(load_error(j).code(), StatusCode::kUnsupported);

  j = base_json();
  j["decoder"] = nullptr;
  EXPECT_EQ(load_error(j).code(), StatusCode::kUnsupported);
}

TEST(TokenizerLoad, LegacyStringMergesAndIgnoreMerges) {
  json j = base_json();
  json merges = json::array();
  for (const json& m : j["model"]["merges"])
    merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
  j["model"]["merges"] = merges;
  auto r = Tokenizer::from_json(j.dump());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const std::string& text = testing::multilingual_text();
  EXPECT_EQ(r->encode(text), qwen_tokenizer().encode(text));

  // ignore_merges: a pre-token found whole in the vocab is one token even when the merges
  // would not build it. Give "Ġxyzzy" an id but no merges.
  j = base_json();
  int32_t id = int32_t(j["added_tokens"].back()["id"].get<int>() + 1);
  j["model"]["vocab"]["Ġxyzzy"] = id;
  j["model"]["ignore_merges"] = false;
  auto plain = Tokenizer::from_json(j.dump());
  j["model"]["ignore_merges"] = true;
  auto ignoring = Tokenizer::from_json(j.dump());
  ASSERT_TRUE(plain.is_ok() && ignoring.is_ok());
  EXPECT_EQ(ignoring->encode(" xyzzy"), std::vector<int32_t>{id});
  EXPECT_GT(plain->encode(" xyzzy").size(), 1u);
}

// ---- concurrency and speed ----

// ---- tiktoken format ----

// A rank file: the 256 bytes (rank = byte), then `extra` tokens in order.
std::string rank_file(const std::vector<std::string>& extra) {
  std::string out;
  int rank = 0;
  auto line = [&](const std::string& bytes) {
    out += base64_encode(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()) + " " +
           std::to_string(rank++) + "\n";
  };
  for (int b = 0; b < 256; ++b) line(std::string(1, char(b)));
  for (const std::string& t : extra) line(t);
  return out;
}

json qwen2_config() {
  json c;
  c["hypic_tiktoken"] = {{"pattern", pretok::pattern_regex(pretok::Pattern::kQwen2)}, {"normalizer", nullptr}};
  c["added_tokens_decoder"] = {{"259", {{"content", "<|end|>"}, {"special", true}}},
                               {"260", {{"content", "<tag>"}, {"special", false}}}};
  return c;
}

Status tiktoken_error(const std::string& ranks, const json& config) {
  auto r = Tokenizer::from_tiktoken(ranks, config.dump(), "test.tiktoken", "test_config.json");
  EXPECT_FALSE(r.is_ok());
  return r.status();
}

TEST(TiktokenLoad, MergesByLowestRankLeftmostFirst) {
  auto r = Tokenizer::from_tiktoken(rank_file({"ab", "bc", "abc"}), qwen2_config().dump());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const Tokenizer& tok = r.value();
  EXPECT_EQ(tok.vocab_size(), 261);
  // "abcab": ab(256) at 0 first, then ab at 3, then abc(258): tiktoken's order.
  EXPECT_EQ(tok.encode("abcab"), (std::vector<int32_t>{258, 256}));
  EXPECT_EQ(tok.encode("abc"), (std::vector<int32_t>{258}));  // a piece that is a token
  EXPECT_EQ(tok.encode("x abc"), (std::vector<int32_t>{'x', ' ', 258}));  // pieces "x", " abc"
  EXPECT_EQ(tok.encode("xbc"), (std::vector<int32_t>{'x', 257}));
  // Specials: matched when parsed; a non-special added token always.
  EXPECT_EQ(tok.encode("a<|end|>b"), (std::vector<int32_t>{'a', 259, 'b'}));
  EXPECT_EQ(tok.encode("<tag>", false), (std::vector<int32_t>{260}));
  EXPECT_GT(tok.encode("<|end|>", false).size(), 1u);
  EXPECT_TRUE(tok.is_special(259));
  EXPECT_FALSE(tok.is_special(260));
  EXPECT_EQ(tok.decode(std::vector<int32_t>{258, 259, 256}), "abc<|end|>ab");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{258, 259, 256}, true), "abcab");
  EXPECT_EQ(tok.decode(std::vector<int32_t>{0xE4, 0xB8}), "\xEF\xBF\xBD");  // cut character
  EXPECT_EQ(tok.token_id("abc"), 258);
  EXPECT_EQ(tok.token_str(' '), "\xC4\xA0");  // byte-level form, as tokenization_kimi.py
  EXPECT_NE(tok.summary().find("tiktoken"), std::string::npos) << tok.summary();
}

TEST(TiktokenLoad, KimiProfileFillsTheReservedRange) {
  json c;
  c["tokenizer_class"] = "TikTokenTokenizer";
  c["auto_map"] = {{"AutoTokenizer", {"tokenization_kimi.TikTokenTokenizer", nullptr}}};
  c["added_tokens_decoder"] = {{"256", {{"content", "[BOS]"}, {"special", true}}},
                               {"269", {{"content", "<|tool_call_begin|>"}, {"special", false}}}};
  auto r = Tokenizer::from_tiktoken(rank_file({}), c.dump());
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  const Tokenizer& tok = r.value();
  EXPECT_EQ(tok.vocab_size(), 256 + 258);  // range(n, n + 256 + 2)
  EXPECT_EQ(tok.token_id("<|reserved_token_300|>"), 300);
  EXPECT_TRUE(tok.is_special(300));
  EXPECT_EQ(tok.encode("[BOS]<|reserved_token_513|>"), (std::vector<int32_t>{256, 513}));
  EXPECT_NE(tok.summary().find("Split(kimi)"), std::string::npos) << tok.summary();
  EXPECT_NE(tok.summary().find("no normalizer"), std::string::npos) << tok.summary();
  // A re-upload's remote-code reference "repo--tokenization_kimi.TikTokenTokenizer".
  c["auto_map"]["AutoTokenizer"] = {"moonshotai/Kimi-Linear-48B-A3B-Instruct--tokenization_kimi.TikTokenTokenizer"};
  EXPECT_TRUE(Tokenizer::from_tiktoken(rank_file({}), c.dump()).is_ok());
}

TEST(TiktokenLoad, DamagedRankFilesAreNamedByLine) {
  const std::string good = rank_file({"ab"});
  struct Case {
    std::string ranks, what;
  };
  std::string dup_rank = good + "YWJj 256\n";            // "abc" with rank 256 again
  std::string dup_token = good + "YWI= 257\n";           // "ab" again
  std::string gap = good + "YWJj 258\n";                 // rank 257 missing
  std::string bad_b64 = good;
  bad_b64.replace(bad_b64.find("QQ=="), 4, "Q!==");      // byte 'A'
  std::string no_rank = good + "YWJj\n";
  std::string big = good + "YWJj 999999999\n";
  std::string no_a = good;
  no_a.erase(no_a.find("QQ== 65\n"), 8);                 // byte 0x41 missing (and rank 65)
  for (const Case& c : {Case{dup_rank, "appears twice"}, Case{dup_token, "has ranks"},
                        Case{gap, "rank 257 is missing"}, Case{bad_b64, "not valid base64"},
                        Case{no_rank, "line 258"}, Case{big, "999999999"},
                        Case{no_a, "rank 65 is missing"}, Case{"", "no tokens"},
                        Case{"\x89PNG\r\n", "line 1"}}) {
    Status s = tiktoken_error(c.ranks, qwen2_config());
    EXPECT_EQ(s.code(), StatusCode::kCorrupt) << s.to_string();
    EXPECT_TRUE(mentions(s, c.what) && mentions(s, "test.tiktoken")) << c.what << ": " << s.to_string();
  }
  // All 256 bytes are needed (here 0x41's line is replaced by another token).
  std::string replaced = good;
  replaced.replace(replaced.find("QQ== 65"), 7, "YWJj 65");
  Status s = tiktoken_error(replaced, qwen2_config());
  EXPECT_TRUE(mentions(s, "0x41")) << s.to_string();
}

TEST(TiktokenLoad, ConfigProblemsAreNamed) {
  const std::string ranks = rank_file({"ab"});
  json c = qwen2_config();
  c["added_tokens_decoder"]["100"] = {{"content", "<x>"}};
  Status s = tiktoken_error(ranks, c);
  EXPECT_EQ(s.code(), StatusCode::kCorrupt);
  EXPECT_TRUE(mentions(s, "id 100 is a rank") && mentions(s, "test_config.json")) << s.to_string();
  c = qwen2_config();
  c["added_tokens_decoder"]["300"] = {{"content", "<|end|>"}};
  EXPECT_TRUE(mentions(tiktoken_error(ranks, c), "two ids"));
  c = qwen2_config();
  c["hypic_tiktoken"]["pattern"] = "\\s+";
  s = tiktoken_error(ranks, c);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_TRUE(mentions(s, "implemented patterns") && mentions(s, "kimi")) << s.to_string();
  c = qwen2_config();
  c["hypic_tiktoken"]["normalizer"] = "NFKC";
  EXPECT_TRUE(mentions(tiktoken_error(ranks, c), "NFKC"));
  c = qwen2_config();
  c.erase("hypic_tiktoken");
  c["tokenizer_class"] = "OtherTokenizer";
  s = tiktoken_error(ranks, c);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_TRUE(mentions(s, "hypic_tiktoken") && mentions(s, "OtherTokenizer")) << s.to_string();
  EXPECT_EQ(Tokenizer::from_tiktoken(ranks, "{not json").status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(Tokenizer::from_tiktoken(ranks, "[1]").status().code(), StatusCode::kCorrupt);
}

TEST(TiktokenLoad, ModelDirectoryAndFiles) {
  TempDir tmp;
  const std::string ranks = tmp.write("tiktoken.model", rank_file({"ab"}));
  // The rank file without its config.
  auto r = Tokenizer::load(ranks);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(mentions(r.status(), "tokenizer_config.json")) << r.status().to_string();
  r = Tokenizer::load(tmp.dir());
  ASSERT_FALSE(r.is_ok());
  EXPECT_TRUE(mentions(r.status(), "tokenizer_config.json")) << r.status().to_string();
  tmp.write("tokenizer_config.json", qwen2_config().dump());
  for (const std::string& path : {ranks, tmp.dir()}) {
    auto ok = Tokenizer::load(path);
    ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
    EXPECT_EQ(ok.value().encode("ab"), std::vector<int32_t>{256});
  }
  // tokenizer.json wins when a directory has both.
  tmp.write("tokenizer.json", testing::read_file(testing::tok_data("tokenizer.json")));
  auto both = Tokenizer::load(tmp.dir());
  ASSERT_TRUE(both.is_ok()) << both.status().to_string();
  EXPECT_EQ(both.value().vocab_size(), qwen_tokenizer().vocab_size());
}

TEST(Tokenizer, ConcurrentEncodeDecode) {
  const Tokenizer& tok = qwen_tokenizer();
  auto lines = testing::text_lines();
  std::vector<std::vector<int32_t>> want;
  std::vector<std::string> want_text;
  for (const auto& l : lines) {
    want.push_back(tok.encode(l));
    want_text.push_back(tok.decode(want.back()));
  }
  tok.clear_cache();
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 30; ++rep) {
        for (size_t i = 0; i < lines.size(); ++i) {
          size_t k = (i * 7 + size_t(t) * 13 + size_t(rep)) % lines.size();
          if (tok.encode(lines[k]) != want[k]) ++mismatches;
          if (tok.decode(want[k]) != want_text[k]) ++mismatches;
          if (t == 0 && rep % 10 == 9 && i == 0) tok.clear_cache();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// Prints throughput; never fails on a slow machine.
TEST(Tokenizer, Throughput) {
  const Tokenizer& tok = qwen_tokenizer();
  const std::string& sample = testing::multilingual_text();
  auto measure = [&](const char* name, const std::string& text) {
    tok.clear_cache();
    Timer t;
    size_t n = tok.encode(text).size();
    double cold = t.seconds();
    t.reset();
    n = tok.encode(text).size();
    double warm = t.seconds();
    auto ids = tok.encode(text);
    t.reset();
    std::string back = tok.decode(ids);
    double dec = t.seconds();
    double mb = double(text.size()) / 1e6;
    std::printf("[ throughput ] %-12s %5.1f MB, %8zu ids: encode %6.1f MB/s (cold cache) "
                "%6.1f MB/s (warm), decode %7.1f MB/s\n",
                name, mb, n, mb / cold, mb / warm, mb / dec);
  };
  std::string multi;
  while (multi.size() < (4u << 20)) multi += sample;
  measure("multilingual", multi);
  std::string english;
  const std::string para =
      "The quick brown fox jumps over the lazy dog while the engineers measure how fast a "
      "byte-level tokenizer can split, merge and look up ordinary English prose. ";
  while (english.size() < (4u << 20)) english += para;
  measure("english", english);
  // Mostly unique words: nearly every pre-token misses the cache and runs BPE.
  std::string unique;
  uint32_t x = 99;
  while (unique.size() < (2u << 20)) {
    unique.push_back(' ');
    x = x * 1103515245u + 12345u;
    for (uint32_t k = 0, n = 4 + (x >> 28); k < n; ++k) {
      x = x * 1103515245u + 12345u;
      unique.push_back(char('a' + (x >> 16) % 26));
    }
  }
  measure("unique words", unique);
  std::string chinese;
  for (const auto& l : testing::text_lines())
    if (l.rfind("中文", 0) == 0 || l.rfind("人人", 0) == 0) chinese += l + "\n";
  std::string zh;
  while (zh.size() < (2u << 20)) zh += chinese;
  measure("chinese", zh);
}

}  // namespace
}  // namespace hypic
