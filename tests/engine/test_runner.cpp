// The request runner (engine/runner.h): the same logits, states and counts as driving the
// Composer directly in every mode, cold and warm; keys computed once (make_request) and
// taken from the request by the composition and the builder; a SegmentBuilder's arriving
// entries composed layer by layer; a cancel ending with kCancelled and nothing partial stored.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>

#include "common/testutil.h"
#include "engine/engine_util.h"
#include "engine/runner.h"

namespace hypic {
namespace {

using test::doc;
using test::model;
using test::store;

const Tokenizer& tokenizer() {
  static const Tokenizer t =
      std::move(Tokenizer::load(std::string(HYPIC_SOURCE_DIR) + "/tests/models/qwen3_5_dense/tokenizer.json"))
          .value();
  return t;
}

std::shared_ptr<PrefixCache> prefix_cache() { return std::make_shared<PrefixCache>(64 << 20); }

// Three documents and one too short for a body under seam 4 (the tiny model's history is 3).
PromptParts parts() {
  PromptParts p;
  p.prefix = doc(900, 12);
  p.segments = {doc(1, 110), doc(2, 4), doc(3, 80), doc(4, 95)};
  p.suffix = doc(901, 9);
  return p;
}

RunOptions run_options(PicMode mode, int seam = 4, const std::string& salt = "") {
  RunOptions o;
  o.compose.mode = mode;
  o.compose.seam = seam;
  o.compose.salt = salt;
  return o;
}

void expect_same_counts(const ComposeStats& a, const ComposeStats& b) {
  EXPECT_EQ(a.segments_hit, b.segments_hit);
  EXPECT_EQ(a.segments_missed, b.segments_missed);
  EXPECT_EQ(a.prompt_tokens, b.prompt_tokens);
  EXPECT_EQ(a.reused_tokens, b.reused_tokens);
  EXPECT_EQ(a.recomputed_tokens, b.recomputed_tokens);
  EXPECT_EQ(a.seam_tokens, b.seam_tokens);
}

// A builder in the test: each missed entry is built whole at start(), then handed to the
// composition one layer at a time, each layer only when the pass asks for it (so the pass
// composes entries that are still arriving). wait() stores them.
class FakeBuilder final : public SegmentBuilder {
 public:
  FakeBuilder(const Model& m, std::shared_ptr<SegmentStore> s) : model_(m), store_(std::move(s)) {}

  struct Seen {
    const TokenizedRequest* request = nullptr;
    std::vector<std::string> keys;  // of the entries it built, in request order
    int layers_released = 0;        // over all entries
    bool waited = false;
  };
  std::shared_ptr<Seen> seen = std::make_shared<Seen>();

  std::unique_ptr<BuildCall> start(const TokenizedRequest& req, const ComposeOptions& opt,
                                   const std::vector<std::string>*) override {
    auto call = std::make_unique<Call>(model_, store_, seen);
    seen->request = &req;
    std::set<std::string> planned;
    for (const SegmentRef& s : req.segments) {
      if (s.key.empty() || !planned.insert(s.key).second) continue;
      if (SegmentStore::Pin p = store_->lookup(s.key)) {
        call->hits.push_back(std::move(p));
        continue;
      }
      auto a = std::make_unique<Arrival>();
      a->call = call.get();
      a->full = std::move(model_.build_entry(s.tokens, opt.seam)).value();
      a->full.key = s.key;
      a->entry = model_.empty_entry(s.tokens, opt.seam, s.key);
      call->map[s.key] = {&a->entry, a.get()};
      call->arrivals.push_back(std::move(a));
      seen->keys.push_back(s.key);
    }
    return call;
  }

 private:
  struct Call;
  struct Arrival final : EntryGate {
    Call* call = nullptr;
    SegmentEntry full;
    mutable SegmentEntry entry;  // what the composition reads: layers [0, ready) placed
    mutable int ready = 0;       // guarded by call->mu
    Status wait(int layer) const override {
      std::lock_guard<std::mutex> l(call->mu);
      for (; ready <= layer; ++ready) {
        SegmentEntry part = call->model.entry_layer(full, ready);
        HYPIC_RETURN_IF_ERROR(call->model.set_entry_layer(&entry, ready, std::move(part)));
        call->seen->layers_released += 1;
      }
      return Status::ok();
    }
  };
  struct Call final : BuildCall {
    Call(const Model& m, std::shared_ptr<SegmentStore> s, std::shared_ptr<Seen> v)
        : model(m), store(std::move(s)), seen(std::move(v)) {}
    const ArrivingEntries& arriving() const override { return map; }
    Result<std::vector<SegmentStore::Pin>> wait() override {
      seen->waited = true;
      std::vector<SegmentStore::Pin> pins = std::move(hits);
      for (const auto& a : arrivals) pins.push_back(store->insert(a->full.key, SegmentEntry(a->full), 0));
      return pins;
    }
    BuildFigures figures() const override { return {0, int(arrivals.size()), 0, 0}; }

    const Model& model;
    std::shared_ptr<SegmentStore> store;
    std::shared_ptr<Seen> seen;
    std::mutex mu;
    ArrivingEntries map;
    std::vector<std::unique_ptr<Arrival>> arrivals;
    std::vector<SegmentStore::Pin> hits;
  };
  const Model& model_;
  std::shared_ptr<SegmentStore> store_;
};

TEST(Runner, EqualsComposerBitForBitInEveryMode) {
  const Model& m = model();
  for (PicMode mode : {PicMode::kFull, PicMode::kPrefix, PicMode::kHypic, PicMode::kNaive}) {
    const RunOptions ro = run_options(mode);
    const TokenizedRequest req = make_request(m, parts(), ro.compose.seam, ro.compose.salt);
    Composer composer(m, store(), prefix_cache());
    const Runner runner(m, store(), prefix_cache());
    for (const char* pass : {"cold", "warm"}) {
      SeqState want_state = m.new_state(req.total_tokens() + 1);
      std::vector<float> want;
      ComposeStats want_stats;
      ASSERT_TRUE(composer.prefill(req, ro.compose, &want_state, &want, &want_stats).is_ok());
      auto got = runner.prefill(req, ro);
      ASSERT_TRUE(got.is_ok()) << got.status().to_string();
      SCOPED_TRACE(std::string(pic_mode_name(mode)) + " " + pass);
      EXPECT_EQ(got->logits, want);
      EXPECT_EQ(got->state.pos, want_state.pos);
      for (size_t l = 0; l < want_state.layers.size(); ++l)
        for (size_t j = 0; j < want_state.layers[l].fixed.size(); ++j) {
          const Tensor &g = got->state.layers[l].fixed[j].t, &w = want_state.layers[l].fixed[j].t;
          EXPECT_TRUE(std::equal(g.f32(), g.f32() + w.numel(), w.f32()))
              << "layer " << l << " " << want_state.layers[l].fixed[j].name;
        }
      expect_same_counts(got->figures.compose, want_stats);
      EXPECT_EQ(got->figures.mode, mode);
      EXPECT_FALSE(got->figures.build.has_value());
    }
  }
}

TEST(Runner, KeysAreComputedOnceAndTakenFromTheRequest) {
  const Model& m = model();
  const TokenizedRequest req = make_request(m, parts(), 4, "tenant");
  ASSERT_EQ(req.segments.size(), 4u);
  for (const SegmentRef& s : req.segments) {
    if (int64_t(s.tokens.size()) < m.min_segment_tokens(4)) {
      EXPECT_TRUE(s.key.empty());
    } else {
      EXPECT_EQ(s.key, segment_key(m.fingerprint(), m.compute_type(), 4, "tenant", s.tokens));
    }
  }
  EXPECT_TRUE(make_request(m, parts(), -1, "").segments[0].key.empty());
  // The composition stores each entry under the request's key, never one it derives itself.
  TokenizedRequest renamed = req;
  renamed.segments[0].key = "key-from-the-request";
  auto s = store();
  const Runner runner(m, s, nullptr);
  ASSERT_TRUE(runner.prefill(renamed, run_options(PicMode::kHypic, 4, "tenant")).is_ok());
  EXPECT_NE(s->lookup("key-from-the-request"), nullptr);
  EXPECT_EQ(s->lookup(req.segments[0].key), nullptr);
  EXPECT_NE(s->lookup(req.segments[2].key), nullptr);
}

TEST(Runner, ComposesABuildersArrivingEntriesLayerByLayer) {
  const Model& m = model();
  PromptParts p = parts();
  p.segments.push_back(p.segments[0]);  // a duplicate is built once
  RunOptions ro = run_options(PicMode::kHypic);
  const TokenizedRequest req = make_request(m, p, ro.compose.seam, ro.compose.salt);
  Composer composer(m, store(), nullptr);
  SeqState want_state = m.new_state(req.total_tokens() + 1);
  std::vector<float> want;
  ComposeStats want_stats;
  ASSERT_TRUE(composer.prefill(req, ro.compose, &want_state, &want, &want_stats).is_ok());

  auto s = store();
  FakeBuilder builder(m, s);
  const Runner runner(m, s, nullptr, &builder);
  // Not asked for: the builder stays idle.
  ASSERT_TRUE(runner.prefill(req, ro).is_ok());
  EXPECT_EQ(builder.seen->request, nullptr);

  auto s2 = store();
  FakeBuilder builder2(m, s2);
  const Runner runner2(m, s2, nullptr, &builder2);
  ro.parallel = true;
  auto got = runner2.prefill(req, ro);
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_EQ(got->logits, want);
  EXPECT_EQ(builder2.seen->request, &req);
  const std::vector<std::string> keys{req.segments[0].key, req.segments[2].key, req.segments[3].key};
  EXPECT_EQ(builder2.seen->keys, keys);
  EXPECT_EQ(builder2.seen->layers_released, 3 * m.config().num_hidden_layers);
  EXPECT_TRUE(builder2.seen->waited);
  ASSERT_TRUE(got->figures.build.has_value());
  EXPECT_EQ(got->figures.build->built_local, 3);
  EXPECT_EQ(got->figures.compose.segments_missed, 4);  // the duplicate arrives too
  for (const std::string& k : keys) EXPECT_NE(s2->lookup(k), nullptr);

  // Warm: every entry is a hit; the builder builds nothing.
  auto warm = runner2.prefill(req, ro);
  ASSERT_TRUE(warm.is_ok());
  EXPECT_EQ(warm->logits, want);
  EXPECT_EQ(warm->figures.compose.segments_hit, 4);
  EXPECT_EQ(warm->figures.build->built_local, 0);

  // Modes that compose no entry never start it.
  FakeBuilder builder3(m, store());
  const Runner runner3(m, store(), prefix_cache(), &builder3);
  for (PicMode mode : {PicMode::kFull, PicMode::kPrefix}) {
    RunOptions o = run_options(mode);
    o.parallel = true;
    auto r = runner3.prefill(req, o);
    ASSERT_TRUE(r.is_ok());
    EXPECT_FALSE(r->figures.build.has_value());
  }
  EXPECT_EQ(builder3.seen->request, nullptr);
}

// A prefill cancelled at its k-th layer check — in the first build, the second, the
// composition; or composing a builder's arriving entries — ends with kCancelled, stores
// nothing partial, and a later run equals a cold one.
TEST(Runner, ACancelReturnsCancelledAndStoresNothingPartial) {
  const Model& m = model();
  PromptParts p;
  p.segments = {doc(11, 150), doc(12, 90)};
  p.suffix = doc(901, 9);
  const TokenizedRequest req = make_request(m, p, 4, "");
  const Runner ref(m, store(), nullptr);
  const auto want = ref.prefill(req, run_options(PicMode::kHypic)).value().logits;
  const int layers = m.config().num_hidden_layers;
  for (int k : {1, layers + 2, 2 * layers + 1}) {
    auto s = store();
    const Runner runner(m, s, nullptr);
    int checks = 0;
    RunOptions ro = run_options(PicMode::kHypic);
    ro.compose.cancelled = [&] { return ++checks >= k; };
    auto r = runner.prefill(req, ro);
    EXPECT_EQ(r.status().code(), StatusCode::kCancelled) << "k " << k;
    const int complete = k <= layers ? 0 : k <= 2 * layers ? 1 : 2;
    EXPECT_EQ(int(s->stats().mem_entries), complete) << "k " << k;
    EXPECT_EQ(runner.prefill(req, run_options(PicMode::kHypic)).value().logits, want) << "k " << k;
  }
  auto s = store();
  FakeBuilder builder(m, s);
  const Runner runner(m, s, nullptr, &builder);
  RunOptions ro = run_options(PicMode::kHypic);
  ro.parallel = true;
  int checks = 0;
  ro.compose.cancelled = [&] { return ++checks >= 3; };
  auto r = runner.prefill(req, ro);
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
  EXPECT_FALSE(builder.seen->waited);  // the call was dropped, not waited for
  EXPECT_EQ(s->stats().mem_entries, 0u);
}

// Echo with logprobs: the whole prompt computed, every position scored, and the last
// position's logits those of a plain forward (decoding continues from them).
TEST(Runner, PrefillScoredScoresEveryPositionOfAFullForward) {
  const Model& m = model();
  const Runner r(m, store(), prefix_cache());
  const std::vector<int32_t> prompt = parts().concatenated();
  std::vector<PositionLogprobs> scored;
  auto p = r.prefill_scored(prompt, run_options(PicMode::kHypic), tokenizer(), 2, &scored);
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  ASSERT_EQ(scored.size(), prompt.size());
  EXPECT_TRUE(std::isnan(scored[0].chosen.logprob));  // the first token has no context
  EXPECT_EQ(scored[1].chosen.id, prompt[1]);
  EXPECT_EQ(scored[1].top.size(), 2u);
  EXPECT_EQ(p->figures.mode, PicMode::kFull);
  EXPECT_EQ(p->figures.compose.recomputed_tokens, int64_t(prompt.size()));
  EXPECT_EQ(p->state.pos, int64_t(prompt.size()));
  SeqState st = m.new_state(int64_t(prompt.size()));
  std::vector<float> lg;
  ASSERT_TRUE(m.forward(st, prompt, LogitsFor::kLast, &lg).is_ok());
  EXPECT_LT(test::rel_err(p->logits, lg), 1e-5);
}

TEST(Runner, GenerateDecodesFromThePrefilledSequence) {
  const Model& m = model();
  const RunOptions ro = run_options(PicMode::kHypic);
  const TokenizedRequest req = make_request(m, parts(), ro.compose.seam, ro.compose.salt);
  GenerateOptions go;
  go.max_tokens = 5;
  go.stop_at_eos = false;
  Composer composer(m, store(), nullptr);
  SeqState st = m.new_state(req.total_tokens() + go.max_tokens + 1);
  std::vector<float> logits;
  ComposeStats cs;
  ASSERT_TRUE(composer.prefill(req, ro.compose, &st, &logits, &cs).is_ok());
  GenerateResult want;
  ASSERT_TRUE(decode(m, tokenizer(), st, std::move(logits), go, {}, Timer(), &want).is_ok());

  const Runner runner(m, store(), nullptr);
  auto got = runner.generate(req, ro, tokenizer(), go);
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_EQ(got->generation.tokens, want.tokens);
  EXPECT_EQ(got->generation.text, want.text);
  EXPECT_EQ(got->generation.prompt_tokens, req.total_tokens());
  EXPECT_EQ(got->figures.completion_tokens, int64_t(want.tokens.size()));
  EXPECT_EQ(got->figures.ttft_ms, got->generation.ttft_ms);
  expect_same_counts(got->figures.compose, cs);
}

TEST(Runner, EntryForRegistrationIsKeyedOnceAndShortSegmentsHaveNone) {
  const Model& m = model();
  auto s = store();
  const Runner runner(m, s, nullptr);
  ComposeOptions co;
  co.seam = 4;
  co.salt = "tenant";
  auto none = runner.entry_for(doc(2, 4), co);
  ASSERT_TRUE(none.is_ok());
  EXPECT_EQ(*none, nullptr);
  auto pin = runner.entry_for(doc(1, 110), co);
  ASSERT_TRUE(pin.is_ok());
  ASSERT_NE(*pin, nullptr);
  EXPECT_EQ((*pin)->key, segment_key(m.fingerprint(), m.compute_type(), 4, "tenant", doc(1, 110)));
  auto again = runner.entry_for(doc(1, 110), co);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(again->get(), pin->get());  // found, not rebuilt
  co.seam = -1;
  EXPECT_FALSE(runner.entry_for(doc(1, 110), co).is_ok());
}

}  // namespace
}  // namespace hypic
