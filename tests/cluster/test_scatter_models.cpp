// Segment parallelism on the newer families: a scatter worker builds Ring-linear, MiniMax,
// Kimi-Linear and Ling-3.0 entries (Lightning's log-scalar T and s0, KDA's dense T, s0 and
// conv tail, attention K/V, MLA's latent rows),
// streams them layer by layer over gRPC, and the combine side composes them — cold, warm and
// overlapping the call — to exactly the logits of a single instance.
#include <gtest/gtest.h>

#include "cluster/scatter.h"
#include "cluster/worker.h"
#include "cluster_util.h"

namespace hypic::cluster {
namespace {

using test::dist_doc;

const Model& lightning_model(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Model>> cache;
  auto& m = cache[name];
  if (!m)
    m = std::move(Model::load(std::string(HYPIC_SOURCE_DIR) + "/tests/models/" + name,
                              {DType::kF32, false}))
            .value();
  return *m;
}

std::vector<float> compose(const Model& m, const std::shared_ptr<SegmentStore>& store,
                           const PromptParts& p, const ComposeOptions& o, ComposeStats* stats) {
  Composer c(m, store, nullptr);
  SeqState st = m.new_state(p.total_tokens() + 1);
  std::vector<float> logits;
  const Status s = c.prefill(make_request(m, p, o.seam, o.salt), o, &st, &logits, stats);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return logits;
}

class ScatterModels : public ::testing::TestWithParam<std::string> {};

TEST_P(ScatterModels, WorkerEntriesComposeToTheSingleInstanceLogits) {
  const Model& m = lightning_model(GetParam());
  auto w = WorkerServer::start(m, {});
  ASSERT_TRUE(w.is_ok()) << w.status().to_string();
  PromptParts p;
  p.prefix = dist_doc(900, 21);
  for (int i = 0; i < 4; ++i) p.segments.push_back(dist_doc(40 + uint32_t(i), 60 + 35 * i));
  p.suffix = dist_doc(901, 9);
  const ComposeOptions o = test::dist_opts(4);
  ComposeStats ref_stats;
  const auto want = compose(m, test::dist_store(), p, o, &ref_stats);

  ScatterOptions so;
  so.workers = {(*w)->address()};
  so.local_lanes = 1;
  auto store = test::dist_store();
  Scatter s(m, store, so);
  ScatterStats st;
  auto pins = s.prefill_segments(make_request(m, p, o.seam, o.salt), o, nullptr, &st);
  ASSERT_TRUE(pins.is_ok()) << pins.status().to_string();
  EXPECT_EQ(st.segments, 4);
  EXPECT_GT(st.built_remote, 0);
  EXPECT_EQ(st.corrupt + st.worker_failures, 0);
  ComposeStats cs;
  EXPECT_EQ(compose(m, store, p, o, &cs), want);
  EXPECT_EQ(cs.segments_hit, 4);

  // Composition overlapping the call, layer by layer as the entries arrive.
  auto store2 = test::dist_store();
  Scatter s2(m, store2, so);
  ScatterStats st2;
  const TokenizedRequest req = make_request(m, p, o.seam, o.salt);
  std::unique_ptr<ScatterCall> call = s2.start(req, o, nullptr, &st2);
  ComposeOptions ao = o;
  ao.arriving = &call->arriving();
  ComposeStats cs2;
  const auto overlapped = compose(m, store2, p, ao, &cs2);
  ASSERT_TRUE(call->wait().is_ok());
  EXPECT_EQ(overlapped, want);
}

INSTANTIATE_TEST_SUITE_P(Models, ScatterModels,
                         ::testing::Values("ring_linear_moe", "minimax_moe", "kimi_linear_moe",
                                           "ling3_hybrid"));

}  // namespace
}  // namespace hypic::cluster
