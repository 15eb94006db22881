// MLA's two attention paths over the compressed latent cache agree: expanded (keys and values
// per head from the latent, ordinary attention: the prefill path) and absorbed (queries
// through W_UK attend the latent rows directly, outputs through W_UV: the decode path), on
// prefill, single-token decode and batched decode, for Kimi-Linear (NoPE) and Ling-3.0
// (interleaved RoPE on the rope part, head gate).
#include <gtest/gtest.h>

#include <random>

#include "common/testutil.h"
#include "model/mixers/mla.h"
#include "model/model.h"

namespace hypic {
namespace {

std::string model_dir(const std::string& name) {
  return std::string(HYPIC_SOURCE_DIR) + "/tests/models/" + name;
}

std::vector<int32_t> tokens(uint32_t seed, int n) {
  std::mt19937 g(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = int32_t(g() % 500);
  return t;
}

// Restores the process-wide path on scope exit.
struct PathGuard {
  MlaPath before = mla_path();
  ~PathGuard() { set_mla_path(before); }
};

class MlaPaths : public ::testing::TestWithParam<std::string> {};

TEST_P(MlaPaths, ExpandedAndAbsorbedAgree) {
  PathGuard guard;
  auto m = Model::load(model_dir(GetParam()), {DType::kF32, false});
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  const Model& model = **m;
  const auto prompt = tokens(1, 150), more = tokens(2, 40);
  struct Out {
    std::vector<float> prefill, step, batch;
  };
  auto run = [&](MlaPath path) {
    set_mla_path(path);
    Out o;
    SeqState a = model.new_state(), b = model.new_state();
    EXPECT_TRUE(model.forward(a, prompt, LogitsFor::kAll, &o.prefill).is_ok());
    EXPECT_TRUE(model.forward(a, more, LogitsFor::kNone, nullptr).is_ok());  // a continued prefill
    EXPECT_TRUE(model.forward(a, {7}, LogitsFor::kLast, &o.step).is_ok());
    EXPECT_TRUE(model.forward(b, tokens(3, 23), LogitsFor::kNone, nullptr).is_ok());
    EXPECT_TRUE(model.decode_batch({&a, &b}, {11, 12}, &o.batch).is_ok());
    return o;
  };
  const Out ex = run(MlaPath::kExpanded), ab = run(MlaPath::kAbsorbed), au = run(MlaPath::kAuto);
  const double e_prefill = test::rel_err(ex.prefill, ab.prefill);
  const double e_step = test::rel_err(ex.step, ab.step), e_batch = test::rel_err(ex.batch, ab.batch);
  std::printf("[%s] expanded vs absorbed: prefill %.3g, step %.3g, batch %.3g\n",
              GetParam().c_str(), e_prefill, e_step, e_batch);
  EXPECT_LT(e_prefill, 1e-5);
  EXPECT_LT(e_step, 1e-5);
  EXPECT_LT(e_batch, 1e-5);
  // auto: prefill expanded (then single tokens and decode batches absorbed, over states the
  // expanded prefill built: close to both).
  EXPECT_EQ(au.prefill, ex.prefill);
  EXPECT_LT(test::rel_err(au.batch, ab.batch), 1e-5);
  EXPECT_NE(au.batch, ex.batch);
}

INSTANTIATE_TEST_SUITE_P(Models, MlaPaths,
                         ::testing::Values("kimi_linear_moe", "kimi_linear_odd", "ling3_hybrid",
                                           "ling3_hybrid_unsafe", "ling3_lora_limits"));

}  // namespace
}  // namespace hypic
