// Model::decode_batch against per-sequence forward() on the tiny golden checkpoints (f32).
//
// Tolerance. Both sides run the same algorithms on the same fp32 data; a row can differ only
// where a GEMM's blocking (and so its summation order) depends on the number of rows, so
// the bound of test_golden.cpp (same arithmetic chain, 8 layers, reductions ≤ 256) is a
// generous upper limit here. B = 1 must be bit-identical.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/testutil.h"
#include "model/model.h"

namespace hypic {
namespace {

constexpr double kLogitTol = 2.5e-4;

std::string model_dir(const std::string& name) {
  return std::string(HYPIC_SOURCE_DIR) + "/tests/models/" + name;
}

std::vector<int32_t> golden_prompt(const std::string& name) {
  std::ifstream f(model_dir(name) + "/golden.json");
  return nlohmann::json::parse(f).at("prompt_ids").get<std::vector<int32_t>>();
}

int32_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return int32_t(best);
}

bool same_bytes(const Tensor& a, const Tensor& b, size_t bytes) {
  return a.nbytes() >= bytes && b.nbytes() >= bytes && std::memcmp(a.raw(), b.raw(), bytes) == 0;
}

// Bit-exact equality of everything a decode reads: position, recurrent states, KV [0, pos).
bool same_state(const SeqState& a, const SeqState& b) {
  if (a.pos != b.pos || a.layers.size() != b.layers.size()) return false;
  for (size_t i = 0; i < a.layers.size(); ++i) {
    const LayerState &x = a.layers[i], &y = b.layers[i];
    if (x.fixed.size() != y.fixed.size() || x.rows.size() != y.rows.size()) return false;
    for (size_t j = 0; j < x.fixed.size(); ++j)
      if (!same_bytes(x.fixed[j].t, y.fixed[j].t, x.fixed[j].t.nbytes())) return false;
    for (size_t j = 0; j < x.rows.size(); ++j) {
      const size_t row = x.rows[j].t.nbytes() / size_t(x.rows[j].t.dim(0));
      if (!same_bytes(x.rows[j].t, y.rows[j].t, row * size_t(a.pos))) return false;
    }
  }
  return true;
}

class DecodeBatchTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto m = Model::load(model_dir(GetParam()), {DType::kF32, false});
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    model_ = std::move(m).value();
    V_ = model_->config().vocab_size;
    golden_ = golden_prompt(GetParam());
    ASSERT_GE(golden_.size(), 200u);
  }
  // Prompt i: a slice of the golden prompt (different lengths and contents).
  std::vector<int32_t> prompt(size_t off, size_t len) const {
    return {golden_.begin() + long(off), golden_.begin() + long(off + len)};
  }
  SeqState prefill(const std::vector<int32_t>& p, std::vector<float>* logits) const {
    SeqState s = model_->new_state(8);  // small: decode_batch must grow the KV room itself
    EXPECT_TRUE(model_->forward(s, p, LogitsFor::kLast, logits).is_ok());
    return s;
  }

  std::unique_ptr<Model> model_;
  int64_t V_ = 0;
  std::vector<int32_t> golden_;
};

TEST_P(DecodeBatchTest, SingleSequenceIsBitIdenticalToForward) {
  std::vector<float> first;
  SeqState ref = prefill(prompt(0, 70), &first);
  SeqState bat = ref.copy();
  int32_t tok = argmax(first.data(), V_);
  for (int step = 0; step < 6; ++step) {
    std::vector<float> a, b;
    ASSERT_TRUE(model_->forward(ref, {tok}, LogitsFor::kLast, &a).is_ok());
    ASSERT_TRUE(model_->decode_batch({&bat}, {tok}, &b).is_ok());
    ASSERT_EQ(b.size(), size_t(V_));
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << "step " << step;
    EXPECT_TRUE(same_state(ref, bat)) << "step " << step;
    tok = argmax(a.data(), V_);
  }
}

// Several prefilled sequences of different lengths, decoded together for 8 steps, each fed
// its own greedy token; every row matches that sequence decoded alone.
TEST_P(DecodeBatchTest, RowsMatchPerSequenceForward) {
  const std::vector<std::pair<size_t, size_t>> slices = {
      {0, 3}, {10, 17}, {40, 64}, {5, 65}, {90, 130}};
  const size_t B = slices.size();
  std::vector<SeqState> ref, bat;
  std::vector<int32_t> next;
  for (auto [off, len] : slices) {
    std::vector<float> l;
    ref.push_back(prefill(prompt(off, len), &l));
    bat.push_back(ref.back().copy());
    next.push_back(argmax(l.data(), V_));
  }
  double worst = 0;
  int exact = 0;
  for (int step = 0; step < 8; ++step) {
    std::vector<SeqState*> states;
    for (auto& s : bat) states.push_back(&s);
    std::vector<float> got;
    ASSERT_TRUE(model_->decode_batch(states, next, &got).is_ok());
    ASSERT_EQ(got.size(), B * size_t(V_));
    for (size_t b = 0; b < B; ++b) {
      std::vector<float> want;
      ASSERT_TRUE(model_->forward(ref[b], {next[b]}, LogitsFor::kLast, &want).is_ok());
      const float* row = got.data() + b * size_t(V_);
      const double e = test::rel_err(row, want.data(), size_t(V_));
      worst = std::max(worst, e);
      exact += std::memcmp(row, want.data(), want.size() * 4) == 0;
      EXPECT_LT(e, kLogitTol) << "step " << step << " seq " << b;
      EXPECT_EQ(bat[b].pos, ref[b].pos);
      next[b] = argmax(want.data(), V_);
    }
  }
  std::printf("[%s] decode_batch B=%zu vs forward: worst row rel err %.3g, %d/%zu rows exact\n",
              GetParam().c_str(), B, worst, exact, 8 * B);
}

// Sequences join and leave between steps, so each step mixes positions and batch sizes.
TEST_P(DecodeBatchTest, SequencesJoiningAndLeaving) {
  struct Seq {
    size_t off, len;
    int first, last;  // active in steps [first, last)
  };
  const std::vector<Seq> plan = {
      {0, 20, 0, 8}, {30, 7, 0, 3}, {50, 100, 2, 6}, {1, 1, 3, 9}, {60, 66, 5, 9}};
  std::vector<SeqState> ref, bat;
  std::vector<int32_t> next;
  for (const Seq& s : plan) {
    std::vector<float> l;
    ref.push_back(prefill(prompt(s.off, s.len), &l));
    bat.push_back(ref.back().copy());
    next.push_back(argmax(l.data(), V_));
  }
  for (int step = 0; step < 9; ++step) {
    std::vector<SeqState*> states;
    std::vector<int32_t> toks;
    std::vector<size_t> who;
    // Reverse order on odd steps: a sequence's row number changes from step to step.
    for (size_t j = 0; j < plan.size(); ++j) {
      const size_t i = step % 2 ? plan.size() - 1 - j : j;
      if (step < plan[i].first || step >= plan[i].last) continue;
      states.push_back(&bat[i]);
      toks.push_back(next[i]);
      who.push_back(i);
    }
    ASSERT_FALSE(states.empty());
    std::vector<float> got;
    ASSERT_TRUE(model_->decode_batch(states, toks, &got).is_ok());
    ASSERT_EQ(got.size(), who.size() * size_t(V_));
    for (size_t r = 0; r < who.size(); ++r) {
      const size_t i = who[r];
      std::vector<float> want;
      ASSERT_TRUE(model_->forward(ref[i], {next[i]}, LogitsFor::kLast, &want).is_ok());
      EXPECT_LT(test::rel_err(got.data() + r * size_t(V_), want.data(), size_t(V_)), kLogitTol)
          << "step " << step << " seq " << i;
      next[i] = argmax(want.data(), V_);
    }
  }
  for (size_t i = 0; i < plan.size(); ++i) {
    EXPECT_EQ(bat[i].pos, int64_t(plan[i].len) + plan[i].last - plan[i].first);
    EXPECT_EQ(bat[i].pos, ref[i].pos);
  }
}

// Every invalid call returns a clear error and leaves all states as they were.
TEST_P(DecodeBatchTest, ErrorsModifyNothing) {
  std::vector<float> l;
  SeqState a = prefill(prompt(0, 12), &l), b = prefill(prompt(20, 30), &l);
  const SeqState a0 = a.copy(), b0 = b.copy();
  const int64_t ctx = model_->config().max_position_embeddings;
  SeqState full = model_->new_state(4);
  full.pos = ctx;
  SeqState foreign = model_->new_state(4);
  foreign.layers.pop_back();
  auto expect_error = [&](const std::vector<SeqState*>& states,
                          const std::vector<int32_t>& toks, StatusCode code,
                          const std::string& says, std::vector<float>* out) {
    const Status s = model_->decode_batch(states, toks, out);
    ASSERT_FALSE(s.is_ok()) << says;
    EXPECT_EQ(s.code(), code) << s.to_string();
    EXPECT_NE(s.message().find(says), std::string::npos) << s.message();
    EXPECT_TRUE(same_state(a, a0)) << says;
    EXPECT_TRUE(same_state(b, b0)) << says;
  };
  expect_error({}, {}, StatusCode::kInvalidArgument, "at least one", &l);
  expect_error({&a, &b}, {1}, StatusCode::kInvalidArgument, "one token per state", &l);
  expect_error({&a}, {1}, StatusCode::kInvalidArgument, "null", nullptr);
  expect_error({&a, &b, &a}, {1, 2, 3}, StatusCode::kInvalidArgument, "twice", &l);
  expect_error({&a, nullptr}, {1, 2}, StatusCode::kInvalidArgument, "sequence 1", &l);
  expect_error({&a, &foreign}, {1, 2}, StatusCode::kInvalidArgument, "another model", &l);
  // Same layer count, a tensor of another shape; rows of unequal capacity.
  SeqState reshaped = model_->new_state(4);
  Tensor& t0 = reshaped.layers[0].fixed.back().t;
  t0 = t0.reshape({1, t0.numel()});
  expect_error({&a, &reshaped}, {1, 2}, StatusCode::kInvalidArgument, "layer 0", &l);
  SeqState ragged = model_->new_state(4);
  for (LayerState& ls : ragged.layers)
    if (!ls.rows.empty()) {
      ls.rows.back().t = Tensor::zeros_f32([&] { Shape s = ls.rows.back().t.shape(); s[0] = 8; return s; }());
      break;
    }
  expect_error({&a, &ragged}, {1, 2}, StatusCode::kInvalidArgument, "another model", &l);
  // forward() checks the state the same way.
  for (SeqState* s : {&foreign, &reshaped, &ragged}) {
    const Status f = model_->forward(*s, {1, 2}, LogitsFor::kLast, &l);
    EXPECT_EQ(f.code(), StatusCode::kInvalidArgument) << f.to_string();
    EXPECT_NE(f.message().find("another model"), std::string::npos) << f.message();
  }
  for (int32_t bad : {int32_t(V_), -1, 1 << 30})
    expect_error({&a, &b}, {1, bad}, StatusCode::kOutOfRange, std::to_string(bad), &l);
  expect_error({&a, &full, &b}, {1, 2, 3}, StatusCode::kOutOfRange, std::to_string(ctx), &l);
  SeqState negative = model_->new_state(4);
  negative.pos = -1;
  expect_error({&negative, &a}, {1, 2}, StatusCode::kInvalidArgument, "negative", &l);
  // A state one short of the context still takes its last token.
  SeqState last = model_->new_state(4);
  last.pos = ctx - 1;
  EXPECT_TRUE(model_->decode_batch({&last}, {1}, &l).is_ok());
  EXPECT_EQ(last.pos, ctx);
  // After all that, the states decode normally.
  std::vector<float> got, want;
  SeqState ra = a.copy();
  ASSERT_TRUE(model_->decode_batch({&a, &b}, {7, 8}, &got).is_ok());
  ASSERT_TRUE(model_->forward(ra, {7}, LogitsFor::kLast, &want).is_ok());
  EXPECT_LT(test::rel_err(got.data(), want.data(), size_t(V_)), kLogitTol);
}

INSTANTIATE_TEST_SUITE_P(Archs, DecodeBatchTest,
                         ::testing::Values("qwen3_next_moe", "qwen3_5_dense", "qwen3_5_moe",
                                           "ring_linear_moe", "ring_linear_odd", "minimax_moe",
                                           "minimax_rotary", "kimi_linear_moe", "kimi_linear_odd",
                                           "ling3_hybrid", "ling3_hybrid_unsafe", "ling3_lora_limits"));

}  // namespace
}  // namespace hypic
