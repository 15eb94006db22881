// DecodeBatch against generate() alone, on the tiny golden checkpoints (f32): a sequence's
// tokens, text, streamed pieces and finish reason must be exactly what it gets decoded by
// itself, whoever it shares the batch with and whenever it joins.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/batch_decode.h"

namespace hypic {
namespace {

std::string model_dir(const std::string& name) {
  return std::string(HYPIC_SOURCE_DIR) + "/tests/models/" + name;
}

// One request: prompt and options; `cancel_after` > 0 makes on_text return false on that
// call.
struct Req {
  std::vector<int32_t> prompt;
  GenerateOptions opt;
  int cancel_after = 0;
};

// What a request produced: the result, its status and what on_text received.
struct Outcome {
  GenerateResult result;
  Status status;
  std::string streamed;
  int calls = 0;
};

class BatchDecodeTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string dir = model_dir(GetParam());
    auto m = Model::load(dir, {DType::kF32, false});
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    model_ = std::move(m).value();
    auto t = Tokenizer::load(dir + "/tokenizer.json");
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    tok_ = std::make_unique<Tokenizer>(std::move(t).value());
    std::ifstream f(dir + "/golden.json");
    golden_ = nlohmann::json::parse(f).at("prompt_ids").get<std::vector<int32_t>>();
  }

  std::vector<int32_t> slice(size_t off, size_t len) const {
    return {golden_.begin() + long(off), golden_.begin() + long(off + len)};
  }
  static GenerateOptions opts(int max_tokens, std::vector<std::string> stop = {}) {
    GenerateOptions o;
    o.max_tokens = max_tokens;
    o.stop = std::move(stop);
    return o;
  }
  TextCallback callback(Outcome* o, int cancel_after) const {
    return [o, cancel_after](const std::string& s) {
      EXPECT_FALSE(s.empty());
      o->streamed += s;
      return ++o->calls != cancel_after;
    };
  }

  // The request decoded alone by generate(); when that fails (cancelled), the partial
  // result comes from its two halves, forward() and decode().
  Outcome alone(const Req& r) const {
    Outcome o;
    auto g = generate(*model_, *tok_, r.prompt, r.opt, callback(&o, r.cancel_after));
    o.status = g.status();
    if (g.is_ok()) {
      o.result = std::move(g).value();
      return o;
    }
    Outcome p;
    SeqState st = model_->new_state();
    std::vector<float> logits;
    EXPECT_TRUE(model_->forward(st, r.prompt, LogitsFor::kLast, &logits).is_ok());
    p.status = decode(*model_, *tok_, st, logits, r.opt, callback(&p, r.cancel_after), Timer(),
                      &p.result);
    EXPECT_EQ(p.status.code(), o.status.code());
    EXPECT_EQ(p.streamed, o.streamed);
    return p;
  }

  // Prefills r and adds it to the batch; its outcome is written to *o when it finishes.
  DecodeBatch::Id add(DecodeBatch& batch, const Req& r, Outcome* o) const {
    SeqState st = model_->new_state(int64_t(r.prompt.size()) + 1);
    std::vector<float> logits;
    EXPECT_TRUE(model_->forward(st, r.prompt, LogitsFor::kLast, &logits).is_ok());
    auto id = batch.add(std::move(st), std::move(logits), r.opt, callback(o, r.cancel_after),
                        Timer());
    EXPECT_TRUE(id.is_ok()) << id.status().to_string();
    pending_[id.value()] = o;
    return id.value();
  }
  // One step; hands out what finished.
  void step(DecodeBatch& batch) const {
    ASSERT_TRUE(batch.step().is_ok());
    for (auto& f : batch.take_finished()) {
      ASSERT_EQ(pending_.count(f.id), 1u) << "unknown or repeated id " << f.id;
      Outcome* o = pending_[f.id];
      o->result = std::move(f.result);
      o->status = std::move(f.status);
      pending_.erase(f.id);
    }
  }
  void drain(DecodeBatch& batch) const {
    for (int i = 0; i < 1000 && !batch.empty(); ++i) step(batch);
    step(batch);  // an empty batch steps to nothing
    EXPECT_TRUE(batch.empty());
    EXPECT_TRUE(pending_.empty());
  }

  // Greedy requests of different prompts, lengths, max_tokens and stop strings.
  std::vector<Req> mixed() const {
    return {{slice(0, 222), opts(16)},  {slice(10, 5), opts(7)},
            {slice(40, 64), opts(20, {" a"})},  {slice(3, 1), opts(1)},
            {slice(100, 90), opts(12, {"e", "th"})},  {slice(60, 30), opts(0)},
            {slice(7, 130), opts(24)}};
  }

  static void expect_same(const Outcome& batched, const Outcome& ref, const std::string& what) {
    EXPECT_EQ(batched.status.code(), ref.status.code())
        << what << ": " << batched.status.to_string();
    EXPECT_EQ(batched.result.tokens, ref.result.tokens) << what;
    EXPECT_EQ(batched.result.text, ref.result.text) << what;
    EXPECT_EQ(batched.result.finish_reason, ref.result.finish_reason) << what;
    EXPECT_EQ(batched.streamed, ref.streamed) << what;
    EXPECT_EQ(batched.calls, ref.calls) << what;
  }

  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tok_;
  std::vector<int32_t> golden_;
  mutable std::map<DecodeBatch::Id, Outcome*> pending_;
};

TEST_P(BatchDecodeTest, GreedyMatchesGenerateAlone) {
  const std::vector<Req> reqs = mixed();
  std::vector<Outcome> got(reqs.size());
  DecodeBatch batch(*model_, *tok_);
  for (size_t i = 0; i < reqs.size(); ++i) add(batch, reqs[i], &got[i]);
  EXPECT_EQ(batch.size(), reqs.size());
  drain(batch);
  int stopped = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const Outcome ref = alone(reqs[i]);
    ASSERT_TRUE(ref.status.is_ok()) << ref.status.to_string();
    expect_same(got[i], ref, "request " + std::to_string(i));
    EXPECT_EQ(got[i].result.prompt_tokens, int64_t(reqs[i].prompt.size()));
    stopped += ref.result.finish_reason == "stop";
  }
  EXPECT_GE(stopped, 1);  // the stop strings do cut somewhere (the test covers them)
  EXPECT_TRUE(got[5].result.tokens.empty());  // max_tokens 0
  EXPECT_GT(got[0].result.ttft_ms, 0.0);
  EXPECT_GT(got[0].result.decode_ms, 0.0);
}

// Requests join a running batch at different steps (so it mixes positions and sizes).
TEST_P(BatchDecodeTest, SequencesAddedMidway) {
  const std::vector<Req> reqs = mixed();
  std::vector<Outcome> got(reqs.size());
  DecodeBatch batch(*model_, *tok_);
  const std::vector<int> join_at = {0, 0, 2, 3, 3, 5, 9};  // step before which request i joins
  size_t next = 0;
  for (int s = 0; s < 1000 && (next < reqs.size() || !batch.empty()); ++s) {
    while (next < reqs.size() && join_at[next] <= s) add(batch, reqs[next], &got[next]), ++next;
    step(batch);
  }
  drain(batch);
  for (size_t i = 0; i < reqs.size(); ++i)
    expect_same(got[i], alone(reqs[i]), "request " + std::to_string(i));
}

// A callback returning false ends only its own sequence, as kCancelled like generate();
// remove() drops a sequence silently. The others are unaffected.
TEST_P(BatchDecodeTest, CancelAndRemove) {
  std::vector<Req> reqs = {{slice(0, 50), opts(16)}, {slice(20, 30), opts(16)},
                           {slice(70, 40), opts(16)}, {slice(5, 9), opts(16)}};
  reqs[1].cancel_after = 3;
  std::vector<Outcome> got(reqs.size());
  DecodeBatch batch(*model_, *tok_);
  std::vector<DecodeBatch::Id> ids;
  for (size_t i = 0; i < reqs.size(); ++i) ids.push_back(add(batch, reqs[i], &got[i]));
  for (int s = 0; s < 4; ++s) step(batch);
  const int calls_before = got[2].calls;
  EXPECT_TRUE(batch.remove(ids[2]));
  pending_.erase(ids[2]);
  EXPECT_FALSE(batch.remove(ids[2]));
  EXPECT_FALSE(batch.remove(12345));
  drain(batch);
  EXPECT_EQ(got[2].calls, calls_before);  // never called after remove()
  const Outcome ref1 = alone(reqs[1]);
  EXPECT_EQ(ref1.status.code(), StatusCode::kCancelled);
  EXPECT_EQ(ref1.calls, 3);
  expect_same(got[1], ref1, "cancelled");
  for (size_t i : {0u, 3u}) expect_same(got[i], alone(reqs[i]), "request " + std::to_string(i));
}

// Seeded sampling with temperature / top-k / top-p: each sequence's sampler sees the same
// logits in the same order as alone, so it draws the same tokens.
TEST_P(BatchDecodeTest, SeededSamplingMatchesAlone) {
  std::vector<Req> reqs = {{slice(0, 100), opts(20)}, {slice(30, 12), opts(15)},
                           {slice(50, 70), opts(18)}, {slice(0, 100), opts(20)}};
  reqs[0].opt.sampling = {1.0f, 0, 1.0f, 7};
  reqs[1].opt.sampling = {0.8f, 40, 0.95f, 8};
  reqs[2].opt.sampling = {1.3f, 0, 0.9f, 9};
  reqs[3].opt.sampling = {1.0f, 0, 1.0f, 10};  // same prompt as 0, another seed
  std::vector<Outcome> got(reqs.size());
  DecodeBatch batch(*model_, *tok_);
  for (size_t i = 0; i < reqs.size(); ++i) add(batch, reqs[i], &got[i]);
  drain(batch);
  for (size_t i = 0; i < reqs.size(); ++i)
    expect_same(got[i], alone(reqs[i]), "request " + std::to_string(i));
  EXPECT_NE(got[0].result.tokens, got[3].result.tokens);
}

// A sequence near the context limit ends there ("length"), like decode() alone.
TEST_P(BatchDecodeTest, ContextLimitEndsTheSequence) {
  const int64_t ctx = model_->config().max_position_embeddings;
  const GenerateOptions o = opts(10);
  SeqState st = model_->new_state(16);
  std::vector<float> logits;
  ASSERT_TRUE(model_->forward(st, slice(0, 9), LogitsFor::kLast, &logits).is_ok());
  st.pos = ctx - 2;  // room for two more tokens: three are sampled, two fed
  SeqState ref_st = st.copy();
  GenerateResult ref;
  ASSERT_TRUE(decode(*model_, *tok_, ref_st, logits, o, {}, Timer(), &ref).is_ok());
  EXPECT_EQ(ref.tokens.size(), 3u);
  EXPECT_EQ(ref.finish_reason, "length");

  DecodeBatch batch(*model_, *tok_);
  Outcome a, b;
  auto id = batch.add(std::move(st), logits, o, callback(&a, 0), Timer());
  ASSERT_TRUE(id.is_ok());
  pending_[*id] = &a;
  add(batch, {slice(0, 9), o}, &b);
  drain(batch);
  EXPECT_EQ(a.result.tokens, ref.tokens);
  EXPECT_EQ(a.result.text, ref.text);
  EXPECT_EQ(a.result.finish_reason, "length");
  expect_same(b, alone({slice(0, 9), o}), "normal");
}

TEST_P(BatchDecodeTest, AddRejectsBadInput) {
  DecodeBatch batch(*model_, *tok_);
  const int64_t V = model_->config().vocab_size;
  auto r = batch.add(model_->new_state(), std::vector<float>(size_t(V - 1)), opts(4), {}, Timer());
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(std::to_string(V)), std::string::npos);
  r = batch.add(model_->new_state(), std::vector<float>(size_t(V)), opts(-1), {}, Timer());
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("max_tokens"), std::string::npos);
  SeqState foreign = model_->new_state();
  foreign.layers.pop_back();
  r = batch.add(std::move(foreign), std::vector<float>(size_t(V)), opts(4), {}, Timer());
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("another model"), std::string::npos);
  EXPECT_TRUE(batch.empty());
}

INSTANTIATE_TEST_SUITE_P(Archs, BatchDecodeTest,
                         ::testing::Values("qwen3_5_dense", "qwen3_next_moe", "qwen3_5_moe"));

}  // namespace
}  // namespace hypic
