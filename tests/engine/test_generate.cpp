// StopMatcher (hold-back of partial stop strings) and generate() end to end on the tiny
// qwen3_5_dense checkpoint against the transformers goldens.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/generate.h"

namespace hypic {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------
// StopMatcher

// Pushes `pieces` one by one; returns everything emitted (push results, then flush).
std::string run_stops(const std::vector<std::string>& stops, const std::vector<std::string>& pieces,
                      bool* stopped = nullptr) {
  StopMatcher m(stops);
  std::string out;
  for (const auto& p : pieces) out += m.push(p);
  if (stopped) *stopped = m.stopped();
  out += m.flush();
  return out;
}

TEST(StopMatcher, NoStopsPassesEverythingThrough) {
  StopMatcher m({});
  EXPECT_EQ(m.push("hello"), "hello");
  EXPECT_EQ(m.push(" world"), " world");
  EXPECT_EQ(m.flush(), "");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, EmptyStopStringIsIgnored) {
  StopMatcher m({""});
  EXPECT_EQ(m.push("abc"), "abc");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, HoldsBackAPartialMatchAcrossPushes) {
  StopMatcher m({"world"});
  EXPECT_EQ(m.push("Hello wo"), "Hello ");  // "wo" might start "world"
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.push("r"), "");                // "wor" still might
  EXPECT_EQ(m.push("ld and more"), "");      // match: nothing of it (or after it) is emitted
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.flush(), "");
  EXPECT_EQ(m.push("later"), "");            // stays stopped
}

TEST(StopMatcher, ReleasesHeldTextWhenTheMatchFails) {
  StopMatcher m({"world"});
  EXPECT_EQ(m.push("a wor"), "a ");
  EXPECT_EQ(m.push("m"), "worm");
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.push("w"), "");
  EXPECT_EQ(m.flush(), "w");  // end of stream: the held text is output
}

TEST(StopMatcher, FlushReturnsHeldTextOnlyWhenNotStopped) {
  StopMatcher a({"STOP"});
  EXPECT_EQ(a.push("abc ST"), "abc ");
  EXPECT_EQ(a.flush(), "ST");
  EXPECT_EQ(a.flush(), "");  // nothing left
  StopMatcher b({"STOP"});
  EXPECT_EQ(b.push("abc STOP ST"), "abc ");
  EXPECT_EQ(b.flush(), "");
}

TEST(StopMatcher, MatchInsideOnePushCutsThere) {
  EXPECT_EQ(run_stops({"</s>"}, {"answer</s>ignored"}), "answer");
  EXPECT_EQ(run_stops({"x"}, {"x"}), "");
}

TEST(StopMatcher, CharacterByCharacter) {
  const std::string text = "the cat sat on the mat";
  std::vector<std::string> chars;
  for (char c : text) chars.push_back(std::string(1, c));
  bool stopped = false;
  EXPECT_EQ(run_stops({"on the"}, chars, &stopped), "the cat sat ");
  EXPECT_TRUE(stopped);
  EXPECT_EQ(run_stops({"dog"}, chars, &stopped), text);
  EXPECT_FALSE(stopped);
}

TEST(StopMatcher, EarliestOfSeveralStops) {
  // both complete in one push: the one that starts first wins
  EXPECT_EQ(run_stops({"cd", "ab"}, {"xxabcd"}), "xx");
  EXPECT_EQ(run_stops({"ab", "cd"}, {"xxabcd"}), "xx");
  // one stop is a prefix of the other
  EXPECT_EQ(run_stops({"abc", "ab"}, {"xab"}), "x");
  EXPECT_EQ(run_stops({"ab", "abc"}, {"xa", "bc"}), "x");
}

TEST(StopMatcher, OverlappingStopsAndSelfOverlap) {
  // "aab" after "aaa": the first 'a' can no longer start a match, the last two can
  StopMatcher m({"aab"});
  EXPECT_EQ(m.push("a"), "");
  EXPECT_EQ(m.push("a"), "");
  EXPECT_EQ(m.push("a"), "a");
  EXPECT_EQ(m.push("b"), "");
  EXPECT_TRUE(m.stopped());
  // the longest held suffix over all stops: "xy" (of "xyz") beats "y" (of "yq")
  StopMatcher n({"xyz", "yq"});
  EXPECT_EQ(n.push("axy"), "a");
  EXPECT_EQ(n.push("q"), "x");  // "yq" completes; "x" was before it
  EXPECT_TRUE(n.stopped());
  // a longer stop still pending when a shorter one inside it completes
  EXPECT_EQ(run_stops({"abcd", "bc"}, {"ab", "c", "d"}), "a");
  EXPECT_EQ(run_stops({"abcd", "bce"}, {"abc", "e"}), "a");
}

TEST(StopMatcher, MultiByteUtf8IsNeverSplit) {
  // "é" = C3 A9; a stop starting with it holds whole characters only
  StopMatcher m({"\xC3\xA9t\xC3\xA9"});
  EXPECT_EQ(m.push("caf\xC3\xA9"), "caf");
  EXPECT_EQ(m.push("s"), "\xC3\xA9s");
  EXPECT_FALSE(m.stopped());
}

// ---------------------------------------------------------------------------------------
// generate() on the tiny dense Qwen3.5 checkpoint

std::string model_dir(const std::string& name) {
  return std::string(HYPIC_SOURCE_DIR) + "/tests/models/" + name;
}

struct Golden {
  std::vector<int32_t> prompt, greedy;
  std::string greedy_text;
};

Golden load_golden(const std::string& dir) {
  std::ifstream f(dir + "/golden.json");
  const auto j = nlohmann::json::parse(f);
  return {j.at("prompt_ids").get<std::vector<int32_t>>(),
          j.at("greedy_ids").get<std::vector<int32_t>>(), j.at("greedy_text").get<std::string>()};
}

class GenerateTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = model_dir("qwen3_5_dense");
    auto m = Model::load(dir, {DType::kF32, false});
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    model_ = std::move(m).value().release();
    auto t = Tokenizer::load(dir + "/tokenizer.json");
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    tok_ = new Tokenizer(std::move(t).value());
    golden_ = new Golden(load_golden(dir));
  }
  static void TearDownTestSuite() {
    delete model_;
    delete tok_;
    delete golden_;
    model_ = nullptr;
    tok_ = nullptr;
    golden_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(model_, nullptr);
    ASSERT_NE(tok_, nullptr);
  }
  static GenerateOptions greedy(int max_tokens) {
    GenerateOptions o;
    o.max_tokens = max_tokens;
    o.stop_at_eos = false;
    return o;
  }

  static Model* model_;
  static Tokenizer* tok_;
  static Golden* golden_;
};
Model* GenerateTest::model_ = nullptr;
Tokenizer* GenerateTest::tok_ = nullptr;
Golden* GenerateTest::golden_ = nullptr;

TEST_F(GenerateTest, GreedyReproducesTransformers) {
  const Golden& g = *golden_;
  ASSERT_EQ(g.greedy.size(), 16u);
  std::string streamed;
  int calls = 0;
  auto r = generate(*model_, *tok_, g.prompt, greedy(16), [&](const std::string& s) {
    EXPECT_FALSE(s.empty());
    streamed += s;
    ++calls;
    return true;
  });
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->tokens, g.greedy);
  EXPECT_EQ(r->finish_reason, "length");
  EXPECT_EQ(r->prompt_tokens, int64_t(g.prompt.size()));
  EXPECT_EQ(r->text, tok_->decode(g.greedy));
  EXPECT_EQ(r->text, g.greedy_text);
  EXPECT_EQ(streamed, r->text);
  EXPECT_GT(calls, 1);  // streamed in pieces, not all at the end
  EXPECT_GT(r->ttft_ms, 0.0);
  EXPECT_GE(r->prefill_ms, 0.0);
  EXPECT_LE(r->prefill_ms, r->ttft_ms);
  EXPECT_GT(r->decode_ms, 0.0);
}

TEST_F(GenerateTest, SameResultWithoutCallbackAndWhenRepeated) {
  auto a = generate(*model_, *tok_, golden_->prompt, greedy(16));
  auto b = generate(*model_, *tok_, golden_->prompt, greedy(16));
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(a->tokens, golden_->greedy);
  EXPECT_EQ(b->tokens, golden_->greedy);
  EXPECT_EQ(a->text, b->text);
}

TEST_F(GenerateTest, FewerTokensArePrefixOfGreedy) {
  auto r = generate(*model_, *tok_, golden_->prompt, greedy(5));
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->tokens, std::vector<int32_t>(golden_->greedy.begin(), golden_->greedy.begin() + 5));
  EXPECT_EQ(r->finish_reason, "length");
}

TEST_F(GenerateTest, MaxTokensZeroGeneratesNothing) {
  int calls = 0;
  auto r = generate(*model_, *tok_, golden_->prompt, greedy(0), [&](const std::string&) {
    ++calls;
    return true;
  });
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_TRUE(r->tokens.empty());
  EXPECT_EQ(r->text, "");
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(r->finish_reason, "length");
  EXPECT_EQ(r->prompt_tokens, int64_t(golden_->prompt.size()));
}

TEST_F(GenerateTest, StopStringCutsTheOutput) {
  // greedy_text = "ouriz\uFFFD his6el\uFFFD again again again again are..."
  const std::string& full = golden_->greedy_text;
  const std::string stop = " again";
  const size_t at = full.find(stop);
  ASSERT_NE(at, std::string::npos) << full;
  GenerateOptions o = greedy(16);
  o.stop = {stop};
  std::string streamed;
  auto r = generate(*model_, *tok_, golden_->prompt, o, [&](const std::string& s) {
    streamed += s;
    return true;
  });
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->text, full.substr(0, at));
  EXPECT_EQ(r->finish_reason, "stop");
  EXPECT_EQ(streamed, r->text);
  // generation ended at the token that completed the stop string
  ASSERT_LT(r->tokens.size(), golden_->greedy.size());
  EXPECT_EQ(r->tokens, std::vector<int32_t>(golden_->greedy.begin(),
                                            golden_->greedy.begin() + long(r->tokens.size())));
  const std::string upto = tok_->decode(r->tokens);
  EXPECT_NE(upto.find(stop), std::string::npos);
  std::vector<int32_t> shorter(r->tokens.begin(), r->tokens.end() - 1);
  EXPECT_EQ(tok_->decode(shorter).find(stop), std::string::npos);

  // several stops: the earliest in the text wins, whatever the order given
  o.stop = {" are", "6", " again"};
  auto r2 = generate(*model_, *tok_, golden_->prompt, o);
  ASSERT_TRUE(r2.is_ok());
  EXPECT_EQ(r2->text, full.substr(0, full.find("6")));
  EXPECT_EQ(r2->finish_reason, "stop");

  // a stop string that never occurs changes nothing
  o.stop = {"never occurs"};
  auto r3 = generate(*model_, *tok_, golden_->prompt, o);
  ASSERT_TRUE(r3.is_ok());
  EXPECT_EQ(r3->text, full);
  EXPECT_EQ(r3->tokens, golden_->greedy);
  EXPECT_EQ(r3->finish_reason, "length");
}

TEST_F(GenerateTest, EosIdsComeFromConfigAndTokenizer) {
  const auto ids = eos_ids(model_->config(), *tok_);
  EXPECT_NE(std::find(ids.begin(), ids.end(), 511), ids.end());  // config eos, <|im_end|>
  EXPECT_NE(std::find(ids.begin(), ids.end(), 509), ids.end());  // <|endoftext|>
  // The greedy continuation contains no EOS, so stop_at_eos changes nothing here.
  GenerateOptions o = greedy(16);
  o.stop_at_eos = true;
  auto r = generate(*model_, *tok_, golden_->prompt, o);
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->tokens, golden_->greedy);
}

TEST_F(GenerateTest, CallbackReturningFalseCancels) {
  int calls = 0;
  auto r = generate(*model_, *tok_, golden_->prompt, greedy(16), [&](const std::string&) {
    ++calls;
    return false;
  });
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(calls, 1);  // not called again after it said stop
  EXPECT_NE(r.status().message().find("cancel"), std::string::npos);

  // cancel after the third piece
  calls = 0;
  auto r2 = generate(*model_, *tok_, golden_->prompt, greedy(16), [&](const std::string&) {
    return ++calls < 3;
  });
  ASSERT_FALSE(r2.is_ok());
  EXPECT_EQ(r2.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(calls, 3);
}

TEST_F(GenerateTest, SeededSamplingIsReproducible) {
  GenerateOptions o = greedy(12);
  o.sampling = {1.0f, 0, 1.0f, 1234};
  auto a = generate(*model_, *tok_, golden_->prompt, o);
  auto b = generate(*model_, *tok_, golden_->prompt, o);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->tokens.size(), 12u);
  // top_k = 1 is greedy at any temperature
  o.sampling = {3.0f, 1, 1.0f, 99};
  auto c = generate(*model_, *tok_, golden_->prompt, o);
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(c->tokens, std::vector<int32_t>(golden_->greedy.begin(), golden_->greedy.begin() + 12));
}

TEST_F(GenerateTest, EmptyPromptIsAClearError) {
  int calls = 0;
  auto r = generate(*model_, *tok_, {}, greedy(4), [&](const std::string&) { return ++calls, true; });
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("empty"), std::string::npos) << r.status().message();
  // says what to do
  EXPECT_NE(r.status().message().find("at least one token"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(calls, 0);
}

TEST_F(GenerateTest, NegativeMaxTokensIsAClearError) {
  auto r = generate(*model_, *tok_, golden_->prompt, greedy(-1));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("max_tokens"), std::string::npos);
}

TEST_F(GenerateTest, TooLongPromptIsAClearError) {
  const int64_t ctx = model_->config().max_position_embeddings;
  ASSERT_EQ(ctx, 4096);
  for (int64_t n : {ctx + 1, ctx}) {  // ctx: no position left for the answer
    std::vector<int32_t> prompt(size_t(n), 65);
    int calls = 0;
    auto r = generate(*model_, *tok_, prompt, greedy(4), [&](const std::string&) { return ++calls, true; });
    ASSERT_FALSE(r.is_ok()) << n;
    EXPECT_EQ(r.status().code(), StatusCode::kOutOfRange);
    const std::string& msg = r.status().message();
    EXPECT_NE(msg.find(std::to_string(n)), std::string::npos) << msg;    // how long it is
    EXPECT_NE(msg.find(std::to_string(ctx)), std::string::npos) << msg;  // what fits
    EXPECT_NE(msg.find("shorten"), std::string::npos) << msg;            // what to do
    EXPECT_EQ(calls, 0);
  }
}

TEST_F(GenerateTest, OutOfRangeTokenIdIsAnErrorNotACrash) {
  for (int32_t bad : {512, -1, 1 << 30}) {
    std::vector<int32_t> prompt = {1, 2, bad, 3};
    auto r = generate(*model_, *tok_, prompt, greedy(2));
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.status().message().find(std::to_string(bad)), std::string::npos)
        << r.status().message();
  }
}

TEST_F(GenerateTest, ErrorsLeaveTheModelUsable) {
  (void)generate(*model_, *tok_, {}, greedy(4));
  (void)generate(*model_, *tok_, std::vector<int32_t>(5000, 1), greedy(4));
  (void)generate(*model_, *tok_, {1, 512}, greedy(4));
  auto r = generate(*model_, *tok_, golden_->prompt, greedy(16));
  ASSERT_TRUE(r.is_ok());
  EXPECT_EQ(r->tokens, golden_->greedy);
}

// A temporary copy of qwen3_5_dense with `edit` applied to its config.json.
class ModelCopy {
 public:
  template <typename F>
  explicit ModelCopy(F edit) {
    std::string tmpl = (fs::path(::testing::TempDir()) / "hypic_gen_XXXXXX").string();
    EXPECT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    const fs::path src = model_dir("qwen3_5_dense");
    for (const char* f : {"model.safetensors", "tokenizer.json"}) fs::copy_file(src / f, dir_ / f);
    nlohmann::json cfg = nlohmann::json::parse(std::ifstream(src / "config.json"));
    edit(cfg);
    std::ofstream(dir_ / "config.json") << cfg.dump(2);
  }
  ~ModelCopy() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string dir() const { return dir_.string(); }

 private:
  fs::path dir_;
};

TEST(GenerateModelCopy, StopsWithLengthWhenTheContextIsFull) {
  const int64_t ctx = 230;
  ModelCopy copy([&](nlohmann::json& c) { c["text_config"]["max_position_embeddings"] = ctx; });
  auto m = Model::load(copy.dir(), {DType::kF32, false});
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  auto tok = Tokenizer::load(copy.dir() + "/tokenizer.json");
  ASSERT_TRUE(tok.is_ok());
  const Golden g = load_golden(model_dir("qwen3_5_dense"));
  GenerateOptions o;
  o.stop_at_eos = false;
  o.max_tokens = 2000000000;  // must not size the KV cache (that would need ~4 TB here)
  auto r = generate(**m, *tok, g.prompt, o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->finish_reason, "length");
  // positions 222..229 take 8 fed-back tokens; a 9th is sampled from position 229's logits
  const size_t n = size_t(ctx - int64_t(g.prompt.size()) + 1);
  EXPECT_EQ(r->tokens.size(), n);
  EXPECT_EQ(r->tokens, std::vector<int32_t>(g.greedy.begin(), g.greedy.begin() + long(n)));
  EXPECT_EQ(r->text, tok->decode(r->tokens));
}

TEST(GenerateModelCopy, StopsAtEosFromTheConfig) {
  const Golden g = load_golden(model_dir("qwen3_5_dense"));
  const int32_t eos = g.greedy[2];  // declare the third greedy token an end-of-sequence id
  ModelCopy copy([&](nlohmann::json& c) { c["text_config"]["eos_token_id"] = {511, eos}; });
  auto m = Model::load(copy.dir(), {DType::kF32, false});
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  auto tok = Tokenizer::load(copy.dir() + "/tokenizer.json");
  ASSERT_TRUE(tok.is_ok());
  GenerateOptions o;
  o.max_tokens = 16;
  std::string streamed;
  auto r = generate(**m, *tok, g.prompt, o, [&](const std::string& s) {
    streamed += s;
    return true;
  });
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->finish_reason, "stop");
  EXPECT_EQ(r->tokens, std::vector<int32_t>(g.greedy.begin(), g.greedy.begin() + 3));  // EOS kept
  const std::string before = tok->decode(std::vector<int32_t>(g.greedy.begin(), g.greedy.begin() + 2));
  EXPECT_EQ(r->text, before);  // the EOS token's text is not output
  EXPECT_EQ(streamed, r->text);
  // ignoring EOS runs to max_tokens
  o.stop_at_eos = false;
  auto r2 = generate(**m, *tok, g.prompt, o);
  ASSERT_TRUE(r2.is_ok());
  EXPECT_EQ(r2->tokens, g.greedy);
}

}  // namespace
}  // namespace hypic

namespace hypic {
namespace {

// log_softmax in double and a full sort: the reference for logprobs_at.
TEST_F(GenerateTest, LogprobsMatchAPlainLogSoftmax) {
  const int64_t V = 3000;
  std::mt19937 g(7);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> logits(V);
  for (float& x : logits) x = d(g);
  logits[17] = logits[2900] = 12.0f;  // a tie at the top: the lower id first
  double mx = -1e30, sum = 0;
  for (float x : logits) mx = std::max(mx, double(x));
  for (float x : logits) sum += std::exp(double(x) - mx);
  std::vector<int32_t> order(V);
  for (int64_t i = 0; i < V; ++i) order[i] = int32_t(i);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  for (int k : {0, 1, 5, kMaxTopLogprobs}) {
    const PositionLogprobs p = logprobs_at(logits.data(), V, 123, k, *tok_);
    EXPECT_EQ(p.chosen.id, 123);
    EXPECT_NEAR(p.chosen.logprob, double(logits[123]) - mx - std::log(sum), 1e-5);
    EXPECT_EQ(p.chosen.bytes, std::string(tok_->token_bytes(123)));
    ASSERT_EQ(int(p.top.size()), k);
    for (int i = 0; i < k; ++i) {
      EXPECT_EQ(p.top[i].id, order[i]) << i;
      EXPECT_NEAR(p.top[i].logprob, double(logits[order[i]]) - mx - std::log(sum), 1e-5);
    }
  }
}

// Each generated token's logprob is the log_softmax of a direct forward of the prompt and the
// tokens before it; greedy picks the top alternative; the final EOS has none.
TEST_F(GenerateTest, LogprobsOfGeneratedTokensMatchADirectForward) {
  GenerateOptions o = greedy(6);
  o.logprobs = 3;
  auto r = generate(*model_, *tok_, golden_->prompt, o);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->logprobs.size(), r->tokens.size());
  std::vector<int32_t> seq = golden_->prompt;
  for (size_t i = 0; i < r->tokens.size(); ++i) {
    const PositionLogprobs& p = r->logprobs[i];
    EXPECT_EQ(p.chosen.id, r->tokens[i]);
    ASSERT_EQ(p.top.size(), 3u);
    EXPECT_EQ(p.top[0].id, p.chosen.id) << "greedy takes the most likely token";
    EXPECT_GE(p.top[0].logprob, p.top[1].logprob);
    EXPECT_GE(p.top[1].logprob, p.top[2].logprob);
    SeqState st = model_->new_state(int64_t(seq.size()) + 1);
    std::vector<float> logits;
    ASSERT_TRUE(model_->forward(st, seq, LogitsFor::kLast, &logits).is_ok());
    const PositionLogprobs ref = logprobs_at(logits.data(), int64_t(logits.size()), r->tokens[i], 3, *tok_);
    EXPECT_NEAR(p.chosen.logprob, ref.chosen.logprob, 1e-3) << i;
    seq.push_back(r->tokens[i]);
  }
  // With EOS on: a sequence that ends on EOS has one logprob fewer than tokens.
  o.stop_at_eos = true;
  o.max_tokens = 64;
  auto e = generate(*model_, *tok_, golden_->prompt, o);
  ASSERT_TRUE(e.is_ok());
  const bool eos_end = e->finish_reason == "stop";
  EXPECT_EQ(e->logprobs.size() + (eos_end ? 1 : 0), e->tokens.size());
  // Without the option: nothing recorded.
  auto none = generate(*model_, *tok_, golden_->prompt, greedy(3));
  ASSERT_TRUE(none.is_ok());
  EXPECT_TRUE(none->logprobs.empty());
}

}  // namespace
}  // namespace hypic
