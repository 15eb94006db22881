// Logits of the C++ engine against reference implementations on tiny random checkpoints in
// the real format (fp32, CPU): Hugging Face transformers 5.23 for Qwen3-Next / Qwen3.5
// (tools/make_golden.py) and MiniMax (tools/make_golden_lightning.py; minimax_rotary with
// transformers' rotary embedding patched to the original partial rotation), and the plain
// PyTorch reference tools/ring_reference.py for Ring-linear, which transformers lacks.
//
// Tolerance. Both sides compute in fp32 with different summation orders and different
// (but equivalent) algorithms (chunked delta rule, streaming softmax). Each dot product of
// length K has a relative rounding error of about sqrt(K)·ε (ε = 2^-24, random-signed
// terms); a layer chains a handful of them (projections, conv, delta rule, norms, MLP) and
// the residual stream carries errors forward, so after n layers the relative error of the
// logits is about c·n·sqrt(K)·ε with K the widest reduction (≤ 256 here) and c the number of
// chained reductions per layer (≈ 8) times a conditioning factor for the triangular solve
// and softmax (≈ 4). With n = 8, K = 256: 8·8·4·16·6e-8 ≈ 2.5e-4. We allow that per row,
// measured as ‖ours − ref‖ / ‖ref‖.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "common/testutil.h"
#include "model/model.h"

namespace hypic {
namespace {

struct Golden {
  std::vector<int32_t> prompt, greedy;
  Tensor prompt_logits, decode_logits;  // [T, V], [16, V]
};

Golden load_golden(const std::string& dir) {
  Golden g;
  std::ifstream f(dir + "/golden.json");
  EXPECT_TRUE(f.good()) << dir;
  const auto j = nlohmann::json::parse(f);
  g.prompt = j.at("prompt_ids").get<std::vector<int32_t>>();
  g.greedy = j.at("greedy_ids").get<std::vector<int32_t>>();
  auto st = SafetensorsFile::open(dir + "/golden_logits.safetensors");
  EXPECT_TRUE(st.is_ok()) << st.status().to_string();
  g.prompt_logits = st->tensor("prompt_logits").value();
  g.decode_logits = st->tensor("decode_logits").value();
  return g;
}

std::string model_dir(const std::string& name) {
  return std::string(HYPIC_SOURCE_DIR) + "/tests/models/" + name;
}

double row_err(const float* a, const float* b, int64_t V) { return test::rel_err(a, b, size_t(V)); }

constexpr double kLogitTol = 2.5e-4;

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, PrefillLogitsMatchTransformers) {
  const Golden g = load_golden(model_dir(GetParam()));
  auto m = Model::load(model_dir(GetParam()), {DType::kF32, false});
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  const int64_t V = (*m)->config().vocab_size, T = int64_t(g.prompt.size());
  ASSERT_EQ(g.prompt_logits.dim(0), T);
  ASSERT_EQ(g.prompt_logits.dim(1), V);
  SeqState st = (*m)->new_state();
  std::vector<float> logits;
  ASSERT_TRUE((*m)->forward(st, g.prompt, LogitsFor::kAll, &logits).is_ok());
  double worst = 0;
  for (int64_t t = 0; t < T; ++t)
    worst = std::max(worst, row_err(logits.data() + t * V, g.prompt_logits.f32() + t * V, V));
  std::printf("[%s] prefill logits: worst row rel err %.3g over %lld positions\n",
              GetParam().c_str(), worst, (long long)T);
  EXPECT_LT(worst, kLogitTol);
}

TEST_P(GoldenTest, GreedyDecodeMatchesTransformers) {
  const Golden g = load_golden(model_dir(GetParam()));
  for (DType dt : {DType::kF32, DType::kBF16}) {
    auto m = Model::load(model_dir(GetParam()), {dt, false});
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    const int64_t V = (*m)->config().vocab_size;
    SeqState st = (*m)->new_state();
    std::vector<float> logits;
    ASSERT_TRUE((*m)->forward(st, g.prompt, LogitsFor::kLast, &logits).is_ok());
    std::vector<int32_t> out;
    double worst = 0;
    for (size_t i = 0; i < g.greedy.size(); ++i) {
      worst = std::max(worst, row_err(logits.data(), g.decode_logits.f32() + int64_t(i) * V, V));
      int32_t best = 0;
      for (int64_t v = 1; v < V; ++v)
        if (logits[size_t(v)] > logits[size_t(best)]) best = int32_t(v);
      out.push_back(best);
      ASSERT_TRUE((*m)->forward(st, {g.greedy[i]}, LogitsFor::kLast, &logits).is_ok());
    }
    std::printf("[%s %s] decode logits: worst rel err %.3g\n", GetParam().c_str(),
                dtype_name(dt), worst);
    EXPECT_EQ(out, g.greedy) << dtype_name(dt);
    if (dt == DType::kF32) {
      EXPECT_LT(worst, kLogitTol);
    }
  }
}

// Logits at position t from one prefill equal prefilling t tokens then decoding one.
TEST_P(GoldenTest, PrefillThenDecodeEqualsPrefill) {
  const Golden g = load_golden(model_dir(GetParam()));
  auto m = Model::load(model_dir(GetParam()), {DType::kF32, false});
  ASSERT_TRUE(m.is_ok());
  const int64_t V = (*m)->config().vocab_size;
  SeqState full = (*m)->new_state();
  std::vector<float> all, step;
  ASSERT_TRUE((*m)->forward(full, g.prompt, LogitsFor::kAll, &all).is_ok());
  for (int64_t t : {int64_t(1), int64_t(64), int64_t(65), int64_t(g.prompt.size()) - 1}) {
    SeqState st = (*m)->new_state();
    std::vector<int32_t> head(g.prompt.begin(), g.prompt.begin() + t);
    std::vector<float> tmp;
    ASSERT_TRUE((*m)->forward(st, head, LogitsFor::kNone, &tmp).is_ok());
    ASSERT_TRUE((*m)->forward(st, {g.prompt[size_t(t)]}, LogitsFor::kLast, &step).is_ok());
    EXPECT_LT(row_err(step.data(), all.data() + t * V, V), kLogitTol) << "t=" << t;
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, GoldenTest,
                         ::testing::Values("qwen3_next_moe", "qwen3_5_dense", "qwen3_5_moe",
                                           "ring_linear_moe", "ring_linear_odd", "minimax_moe",
                                           "minimax_rotary", "kimi_linear_moe", "kimi_linear_odd",
                                           "ling3_hybrid", "ling3_hybrid_unsafe", "ling3_lora_limits"));

}  // namespace
}  // namespace hypic
