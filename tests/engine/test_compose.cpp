// The PIC request path (SPEC §4): modes, cold/warm invariance, composition exactness where
// it must be exact, and the ordering naive ≫ hypic in deviation from full.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "common/testutil.h"
#include "engine/compose.h"
#include "engine/engine_util.h"

namespace hypic {
namespace {

using test::doc;
using test::model;
using test::model_dir;
using test::store;

PromptParts parts(std::vector<std::vector<int32_t>> segs, bool with_prefix = true) {
  PromptParts p;
  if (with_prefix) p.prefix = doc(900, 12);
  p.segments = std::move(segs);
  p.suffix = doc(901, 9);
  return p;
}

std::vector<float> run(const Model& m, const Composer& c, const PromptParts& p, PicMode mode,
                       int seam, ComposeStats* stats = nullptr, const std::string& salt = "") {
  SeqState st = m.new_state(p.total_tokens() + 1);
  std::vector<float> logits;
  ComposeStats s;
  ComposeOptions o;
  o.mode = mode;
  o.seam = seam;
  o.salt = salt;
  Status status = c.prefill(make_request(m, p, o.seam, o.salt), o, &st, &logits, &s);
  EXPECT_TRUE(status.is_ok()) << status.to_string();
  EXPECT_EQ(st.pos, p.total_tokens());
  if (stats) *stats = s;
  return logits;
}

constexpr double kTol = 2.5e-4;  // as the golden tests: fp32 across different op orders

TEST(Compose, ColdAndWarmAreBitIdentical) {
  const Model& m = model();
  Composer c(m, store(), nullptr);  // the segment store alone
  const auto p = parts({doc(1, 150), doc(2, 90), doc(3, 200)});
  for (int seam : {0, 2, 8}) {
    ComposeStats cold, warm;
    const auto a = run(m, c, p, PicMode::kHypic, seam, &cold);
    const auto b = run(m, c, p, PicMode::kHypic, seam, &warm);
    EXPECT_EQ(cold.segments_missed, 3);
    EXPECT_EQ(warm.segments_hit, 3);
    EXPECT_EQ(warm.reused_tokens, 150 + 90 + 200 - 3 * seam);
    EXPECT_EQ(a, b) << "seam " << seam;
  }
}

// With a prefix cache, the composed head (prefix, segments, seams) and each message after it
// are checkpoints: the same request again restores it whole, bit for bit, and computes the
// suffix only; other segments or another order compose afresh.
TEST(Compose, ComposedHeadIsACheckpoint) {
  const Model& m = model();
  Composer c(m, store(), std::make_shared<PrefixCache>(64 << 20));
  Composer plain(m, store(), nullptr);
  const auto p = parts({doc(4, 150), doc(5, 90), doc(6, 200)});
  for (int seam : {0, 8}) {
    ComposeStats cold, warm, other;
    const auto a = run(m, c, p, PicMode::kHypic, seam, &cold);
    const auto b = run(m, c, p, PicMode::kHypic, seam, &warm);
    EXPECT_EQ(warm.segments_hit, 3);
    EXPECT_EQ(warm.reused_tokens, 12 + 150 + 90 + 200);
    EXPECT_EQ(warm.recomputed_tokens, 9);
    EXPECT_EQ(warm.seam_tokens, 0);
    EXPECT_EQ(a, b) << "seam " << seam;
    EXPECT_LT(test::rel_err(a, run(m, plain, p, PicMode::kHypic, seam)), kTol);  // the suffix apart: op order only
    const auto q = parts({doc(6, 200), doc(4, 150), doc(5, 90)});
    run(m, c, q, PicMode::kHypic, seam, &other);
    EXPECT_EQ(other.segments_hit, 3);
    EXPECT_EQ(other.reused_tokens, 150 + 90 + 200 - 3 * seam);
    // Naive composes differently: its own checkpoint.
    ComposeStats naive;
    run(m, c, p, PicMode::kNaive, seam, &naive);
    EXPECT_EQ(naive.reused_tokens, 150 + 90 + 200 - 3 * seam);
  }
}

// A segment at the very start sees no prefix: its seam is computed exactly as standalone,
// so composing its body must reproduce full recompute to fp32 rounding — for seam widths
// below the conv history too (conv warm-up) — on every architecture.
TEST(Compose, FirstSegmentComposesToFullRecompute) {
  for (const char* name : {"qwen3_5_dense", "qwen3_next_moe", "qwen3_5_moe"}) {
    const Model& m = model(name);
    Composer c(m, store(), nullptr);
    const auto p = parts({doc(4, 230)}, /*with_prefix=*/false);
    const auto full = run(m, c, p, PicMode::kFull, 0);
    for (int seam : {0, 1, 3, 8}) {
      const auto hy = run(m, c, p, PicMode::kHypic, seam);
      EXPECT_LT(test::rel_err(hy, full), kTol) << name << " seam " << seam;
    }
  }
}

TEST(Compose, SeamCoveringEverySegmentEqualsFull) {
  const Model& m = model();
  Composer c(m, store(), nullptr);
  const auto p = parts({doc(5, 40), doc(6, 33)});
  ComposeStats s;
  const auto hy = run(m, c, p, PicMode::kHypic, 64, &s);
  EXPECT_EQ(s.segments_hit + s.segments_missed, 0);  // nothing cacheable: all recomputed
  EXPECT_EQ(hy, run(m, c, p, PicMode::kFull, 0));
}

TEST(Compose, ReorderedSegmentsHitAndEqualAColdRunInThatOrder) {
  const Model& m = model();
  Composer warm(m, store(), nullptr);
  auto segs = std::vector<std::vector<int32_t>>{doc(7, 120), doc(8, 80), doc(9, 100), doc(10, 70)};
  run(m, warm, parts(segs), PicMode::kHypic, 8);
  std::mt19937 g(3);
  for (int trial = 0; trial < 3; ++trial) {
    std::shuffle(segs.begin(), segs.end(), g);
    ComposeStats s;
    const auto w = run(m, warm, parts(segs), PicMode::kHypic, 8, &s);
    EXPECT_EQ(s.segments_hit, 4);
    EXPECT_EQ(s.segments_missed, 0);
    Composer cold(m, store(), nullptr);
    EXPECT_EQ(w, run(m, cold, parts(segs), PicMode::kHypic, 8));
  }
}

TEST(Compose, NaiveDeviatesFarMoreThanHypic) {
  for (const char* name : {"qwen3_5_dense", "qwen3_next_moe"}) {
    const Model& m = model(name);
    Composer c(m, store(), nullptr);
    const auto p = parts({doc(11, 200), doc(12, 150), doc(13, 180)});
    const auto full = run(m, c, p, PicMode::kFull, 0);
    const double hy = test::rel_err(run(m, c, p, PicMode::kHypic, 8), full);
    const double nv = test::rel_err(run(m, c, p, PicMode::kNaive, 8), full);
    std::printf("[%s] logits rel. deviation from full: hypic %.4f, naive %.4f\n", name, hy, nv);
    EXPECT_LT(hy, nv);
    EXPECT_GT(nv, 2 * hy);
  }
}

TEST(Compose, PrefixModeMatchesFullAndHitsOnRepeat) {
  const Model& m = model();
  auto pc = std::make_shared<PrefixCache>(64 << 20);
  Composer c(m, nullptr, pc);
  const auto p = parts({doc(14, 100), doc(15, 70)});
  ComposeStats s1, s2, s3;
  const auto a = run(m, c, p, PicMode::kPrefix, 0, &s1);
  EXPECT_EQ(s1.segments_missed, 2);
  EXPECT_LT(test::rel_err(a, run(m, c, p, PicMode::kFull, 0)), kTol);
  const auto b = run(m, c, p, PicMode::kPrefix, 0, &s2);
  EXPECT_EQ(s2.segments_hit, 2);
  EXPECT_EQ(s2.recomputed_tokens, int64_t(p.suffix.size()));
  EXPECT_EQ(a, b);
  // Swapped order: only the shared prefix part is reused.
  const auto q = parts({p.segments[1], p.segments[0]});
  run(m, c, q, PicMode::kPrefix, 0, &s3);
  EXPECT_EQ(s3.segments_hit, 0);
  EXPECT_EQ(s3.reused_tokens, int64_t(q.prefix.size()));
}

// A conversation that grows by turns (an agent's history): prefix mode restores every earlier
// message from its checkpoint, the last one included (checkpointed before the generation
// prompt), and computes only the reply and the new message.
TEST(Compose, PrefixModeRestoresEarlierMessages) {
  const Model& m = model();
  Composer c(m, nullptr, std::make_shared<PrefixCache>(64 << 20));
  const std::vector<std::vector<int32_t>> turns = {doc(30, 40), doc(31, 25), doc(32, 30), doc(33, 20), doc(34, 12)};
  const std::vector<int32_t> gen = doc(35, 3);
  auto conversation = [&](size_t n) {  // turns[0, n - 1) in the prefix, the last one in the suffix
    PromptParts p;
    for (size_t i = 0; i + 1 < n; ++i) {
      if (i > 0) p.prefix_breaks.push_back(p.prefix.size());
      p.prefix.insert(p.prefix.end(), turns[i].begin(), turns[i].end());
    }
    p.suffix = turns[n - 1];
    p.suffix_breaks = {p.suffix.size()};
    p.suffix.insert(p.suffix.end(), gen.begin(), gen.end());
    return p;
  };
  ComposeStats s1, s2, s3;
  run(m, c, conversation(3), PicMode::kPrefix, 0, &s1);
  EXPECT_EQ(s1.reused_tokens, 0);
  EXPECT_EQ(s1.cached_new_tokens, 40 + 25 + 30);
  const PromptParts longer = conversation(5);
  const auto a = run(m, c, longer, PicMode::kPrefix, 0, &s2);
  EXPECT_EQ(s2.reused_tokens, 40 + 25 + 30);
  EXPECT_EQ(s2.recomputed_tokens, 20 + 12 + 3);
  EXPECT_LT(test::rel_err(a, run(m, c, longer, PicMode::kFull, 0)), kTol);
  // An earlier message changed (as a template that drops old reasoning changes it): only the
  // messages before it are restored.
  PromptParts changed = longer;
  changed.prefix[40 + 3] ^= 1;
  run(m, c, changed, PicMode::kPrefix, 0, &s3);
  EXPECT_EQ(s3.reused_tokens, 40);
}

TEST(Compose, SaltIsolatesTenants) {
  const Model& m = model();
  Composer c(m, store(), nullptr);
  const auto p = parts({doc(16, 120)});
  ComposeStats a, b, a2;
  run(m, c, p, PicMode::kHypic, 8, &a, "tenant-a");
  run(m, c, p, PicMode::kHypic, 8, &b, "tenant-b");
  run(m, c, p, PicMode::kHypic, 8, &a2, "tenant-a");
  EXPECT_EQ(a.segments_missed, 1);
  EXPECT_EQ(b.segments_missed, 1);
  EXPECT_EQ(a2.segments_hit, 1);
}

// The prefix cache too: nothing cached under one salt (not even the shared system prefix) is
// restored under another.
TEST(Compose, SaltIsolatesTenantsInPrefixMode) {
  const Model& m = model();
  Composer c(m, nullptr, std::make_shared<PrefixCache>(64 << 20));
  const auto p = parts({doc(17, 90)});
  ComposeStats a, b, a2;
  const auto la = run(m, c, p, PicMode::kPrefix, 0, &a, "tenant-a");
  const auto lb = run(m, c, p, PicMode::kPrefix, 0, &b, "tenant-b");
  run(m, c, p, PicMode::kPrefix, 0, &a2, "tenant-a");
  EXPECT_EQ(a.segments_missed, 1);
  EXPECT_EQ(b.segments_missed, 1);
  EXPECT_EQ(b.reused_tokens, 0);
  EXPECT_EQ(a2.segments_hit, 1);
  EXPECT_EQ(la, lb);
}

TEST(Compose, CorruptDiskEntryIsRecomputedWithTheSameResult) {
  const Model& m = model();
  const std::string dir = testing::TempDir() + "/hypic_compose_disk";
  std::filesystem::remove_all(dir);
  const auto p = parts({doc(17, 150), doc(18, 110)});
  std::vector<float> first;
  {
    // A budget too small for any entry: every entry goes to disk only.
    Composer c(m, store(0, dir), nullptr);
    first = run(m, c, p, PicMode::kHypic, 8);
  }
  size_t corrupted = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    std::fstream io(f.path(), std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(-100, std::ios::end);
    io.put('\x5a');
    ++corrupted;
  }
  ASSERT_GT(corrupted, 0u);
  auto s = store(256, dir);
  Composer c(m, s, nullptr);
  ComposeStats st;
  EXPECT_EQ(run(m, c, p, PicMode::kHypic, 8, &st), first);
  EXPECT_EQ(st.segments_missed, 2);
  EXPECT_GE(s->stats().corrupt_dropped, 1u);
}

// The suffix trace (--debug-deviation) has one entry per layer; a first segment composes
// exactly, so the suffix's hidden states match full at every layer.
// A prefill cancelled at its k-th layer check (a client that left, a drain deadline) ends
// with kCancelled wherever it is — while building the first entry, the second, or in the
// composition pass — and stores nothing partial: a later prefill equals an untouched cold one.
TEST(Compose, CancelledPrefillStopsAndStoresNothingPartial) {
  const Model& m = model();
  const auto p = parts({doc(11, 150), doc(12, 90)});
  const int layers = m.config().num_hidden_layers;
  Composer ref(m, store(), nullptr);
  const auto want = run(m, ref, p, PicMode::kHypic, 4);
  for (int k : {1, layers + 2, 2 * layers + 1}) {  // first build, second build, composition
    auto st_store = store();
    Composer c(m, st_store, nullptr);
    int checks = 0;
    ComposeOptions o;
    o.seam = 4;
    o.cancelled = [&] { return ++checks >= k; };
    SeqState st = m.new_state(p.total_tokens() + 1);
    std::vector<float> logits;
    ComposeStats s;
    const Status status = c.prefill(make_request(m, p, o.seam, o.salt), o, &st, &logits, &s);
    EXPECT_EQ(status.code(), StatusCode::kCancelled) << "k " << k << ": " << status.to_string();
    EXPECT_EQ(checks, k);  // stopped at the check that said so
    const int complete = k <= layers ? 0 : k <= 2 * layers ? 1 : 2;  // entries finished before the stop
    EXPECT_EQ(int(st_store->stats().mem_entries), complete) << "k " << k;
    EXPECT_EQ(run(m, c, p, PicMode::kHypic, 4), want) << "k " << k;
  }
}

TEST(Compose, SuffixTraceHasOneEntryPerLayer) {
  const Model& m = model();
  Composer c(m, store(), nullptr);
  const auto p = parts({doc(22, 120)}, /*with_prefix=*/false);
  std::vector<std::vector<float>> tf, th;
  ComposeOptions o;
  o.mode = PicMode::kFull;
  o.trace_suffix = &tf;
  SeqState s1 = m.new_state(), s2 = m.new_state();
  std::vector<float> l1, l2;
  ComposeStats st;
  ASSERT_TRUE(c.prefill(make_request(m, p, o.seam, o.salt), o, &s1, &l1, &st).is_ok());
  o.mode = PicMode::kHypic;
  o.trace_suffix = &th;
  ASSERT_TRUE(c.prefill(make_request(m, p, o.seam, o.salt), o, &s2, &l2, &st).is_ok());
  ASSERT_EQ(tf.size(), size_t(m.config().num_hidden_layers));
  ASSERT_EQ(th.size(), tf.size());
  const size_t n = p.suffix.size() * size_t(m.config().hidden_size);
  ASSERT_EQ(th[0].size(), n);  // hypic's last piece is exactly the suffix
  for (size_t l = 0; l < tf.size(); ++l)
    EXPECT_LT(test::rel_err(th[l].data(), tf[l].data() + tf[l].size() - n, n), kTol) << l;
}

TEST(Compose, BadRequestsAreRejectedCleanly) {
  const Model& m = model();
  Composer c(m, store(), nullptr);
  SeqState st = m.new_state();
  std::vector<float> logits;
  ComposeStats s;
  PromptParts no_suffix;
  no_suffix.segments = {doc(19, 50)};
  const ComposeOptions none;
  EXPECT_FALSE(c.prefill(make_request(m, no_suffix, none.seam, none.salt), none, &st, &logits, &s).is_ok());
  ComposeOptions bad;
  bad.seam = -1;
  EXPECT_FALSE(c.prefill(make_request(m, parts({doc(20, 50)}), bad.seam, bad.salt), bad, &st, &logits, &s).is_ok());
  PromptParts huge = parts({doc(21, 5000)});
  EXPECT_EQ(c.prefill(make_request(m, huge, none.seam, none.salt), none, &st, &logits, &s).code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ(st.pos, 0);  // nothing was run
}

}  // namespace
}  // namespace hypic
