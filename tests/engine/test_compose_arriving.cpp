// Composition from entries that arrive layer by layer (ComposeOptions::arriving, EntryGate),
// as segment parallelism delivers them: the pass reads layer l of an arriving entry only once
// its gate has released it, runs every earlier layer before later layers exist, and gives
// exactly the logits of composing complete entries. Also the layer-part helpers of Model.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "engine/compose.h"
#include "engine/engine_util.h"

namespace hypic {
namespace {

using test::doc;
using test::model;
using test::store;

ComposeOptions opts() {
  ComposeOptions o;
  o.mode = PicMode::kHypic;
  o.seam = 4;
  return o;
}

// Releases layers on the test thread's command and records how far the pass has asked.
class StepGate final : public EntryGate {
 public:
  Status wait(int layer) const override {
    std::unique_lock<std::mutex> l(mu_);
    asked_ = std::max(asked_, layer);
    cv_.notify_all();
    cv_.wait(l, [&] { return released_ > layer || stopped_; });
    if (released_ > layer) return Status::ok();
    return Status(StatusCode::kCancelled, "test gate stopped");
  }
  // Waits (bounded) until the pass asks for `layer`; false on timeout.
  bool wait_asked(int layer) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(30), [&] { return asked_ >= layer; });
  }
  void release(int layers) {
    std::lock_guard<std::mutex> l(mu_);
    released_ = layers;
    cv_.notify_all();
  }
  void stop() {
    std::lock_guard<std::mutex> l(mu_);
    stopped_ = true;
    cv_.notify_all();
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable int asked_ = -1;
  int released_ = 0;
  bool stopped_ = false;
};

// One segment arriving through `gate`: its empty entry and the compose options naming it.
struct OneArriving {
  OneArriving(const Model& m, const std::vector<int32_t>& seg, const EntryGate* gate)
      : key(segment_key(m.fingerprint(), m.compute_type(), opts().seam, opts().salt, seg)),
        entry(m.empty_entry(seg, opts().seam, key)),
        map{{key, {&entry, gate}}},
        options(opts()) {
    options.arriving = &map;
  }
  OneArriving(const OneArriving&) = delete;  // map points at entry
  std::string key;
  SegmentEntry entry;
  ArrivingEntries map;
  ComposeOptions options;
};

// Composer::prefill with fresh state and store.
Status prefill(const Model& m, const PromptParts& p, const ComposeOptions& o,
               std::vector<float>* logits, ComposeStats* cs, int64_t* pos = nullptr) {
  Composer c(m, store(), nullptr);
  SeqState st = m.new_state(p.total_tokens() + 1);
  const Status s = c.prefill(make_request(m, p, o.seam, o.salt), o, &st, logits, cs);
  if (pos) *pos = st.pos;
  return s;
}

TEST(ComposeArriving, LayerByLayerEqualsCompleteEntries) {
  const Model& m = model();
  PromptParts p;
  p.prefix = doc(900, 12);
  p.segments = {doc(1, 80), doc(2, 60), doc(3, 100)};
  p.suffix = doc(901, 9);
  const ComposeOptions o = opts();
  // Reference: every entry complete (built through the store).
  std::vector<float> want;
  ComposeStats cs;
  ASSERT_TRUE(prefill(m, p, o, &want, &cs).is_ok());
  // Segment 1 arrives layer by layer; the others come from a store as usual.
  StepGate gate;
  OneArriving one(m, p.segments[1], &gate);
  auto full = m.build_entry(p.segments[1], o.seam);
  ASSERT_TRUE(full.is_ok());
  full->key = one.key;
  std::vector<float> got;
  int64_t pos = 0;
  Status result;
  std::thread pass([&] { result = prefill(m, p, one.options, &got, &cs, &pos); });
  const int layers = m.config().num_hidden_layers;
  for (int l = 0; l < layers; ++l) {
    // The pass runs layers 0 … l−1 with only those layers of the entry in place.
    const bool reached = gate.wait_asked(l);
    const bool placed = reached && m.set_entry_layer(&one.entry, l, m.entry_layer(*full, l)).is_ok();
    if (!placed) {
      gate.stop();
      pass.join();
      FAIL() << (reached ? "could not place layer " : "the pass never reached layer ") << l;
    }
    gate.release(l + 1);
  }
  pass.join();
  ASSERT_TRUE(result.is_ok()) << result.to_string();
  EXPECT_EQ(cs.segments_missed, 3);  // the arriving one counts as a miss too
  EXPECT_EQ(pos, p.total_tokens());
  EXPECT_EQ(got, want);
}

TEST(ComposeArriving, AGateErrorEndsThePassWithIt) {
  const Model& m = model();
  PromptParts p;
  p.segments = {doc(4, 70)};
  p.suffix = doc(901, 9);
  StepGate gate;
  gate.stop();
  OneArriving one(m, p.segments[0], &gate);
  std::vector<float> logits;
  ComposeStats cs;
  const Status s = prefill(m, p, one.options, &logits, &cs);
  EXPECT_EQ(s.code(), StatusCode::kCancelled) << s.to_string();
  EXPECT_TRUE(logits.empty());
}

TEST(ComposeArriving, LayerPartsAreCheckedBeforeTheyArePlaced) {
  const Model& m = model();
  const auto toks = doc(5, 50), other = doc(6, 50);
  auto e = m.build_entry(toks, 4);
  ASSERT_TRUE(e.is_ok());
  e->key = std::string(1, 'k');  // (not = "k": GCC 12 -Wrestrict false positive)
  SegmentEntry dst = m.empty_entry(toks, 4, "k");
  const int attn_layer = [&] {
    for (int i = 0; i < m.config().num_hidden_layers; ++i)
      if (m.config().layer_kind(i) == LayerKind::kFull) return i;
    return -1;
  }();
  ASSERT_GE(attn_layer, 1);
  // A part of the wrong kind, of another segment, of another key, out of range.
  EXPECT_FALSE(m.set_entry_layer(&dst, 0, m.entry_layer(*e, attn_layer)).is_ok());
  SegmentEntry wrong_tokens = m.entry_layer(*e, 0);
  wrong_tokens.tokens = other;
  EXPECT_FALSE(m.set_entry_layer(&dst, 0, std::move(wrong_tokens)).is_ok());
  SegmentEntry wrong_key = m.entry_layer(*e, 0);
  wrong_key.key = std::string(1, 'x');
  EXPECT_FALSE(m.set_entry_layer(&dst, 0, std::move(wrong_key)).is_ok());
  EXPECT_FALSE(m.set_entry_layer(&dst, m.config().num_hidden_layers, m.entry_layer(*e, 0)).is_ok());
  // Shapes of another model (k/v of fewer body tokens).
  SegmentEntry short_kv = m.entry_layer(*e, attn_layer);
  short_kv.layers[0].put("k", short_kv.layers[0].find("k")->rows(0, 10));
  EXPECT_FALSE(m.set_entry_layer(&dst, attn_layer, std::move(short_kv)).is_ok());
  for (const auto& l : dst.layers)
    EXPECT_TRUE(l.tensors.empty() && !l.T) << "a rejected part was placed";
  // Every layer placed in turn rebuilds the entry, which serialises to the same bytes.
  for (int l = 0; l < m.config().num_hidden_layers; ++l)
    ASSERT_TRUE(m.set_entry_layer(&dst, l, m.entry_layer(*e, l)).is_ok()) << l;
  EXPECT_EQ(serialize_entry(dst).value(), serialize_entry(*e).value());
}

// Each mixer checks its layer of an entry (TokenMixer::check_entry) before anything reads it:
// set_entry_layer and forward_plan refuse what a file or the wire could hold but this model
// would not capture, naming the layer and what differs.
TEST(ComposeArriving, MixersRefuseEntryLayersOfOtherShapes) {
  const Model& m = model();
  const auto toks = doc(7, 50);
  auto e = m.build_entry(toks, 1);  // seam 1 < K−1: the linear layers keep a warm-up
  ASSERT_TRUE(e.is_ok());
  ASSERT_TRUE(m.check_entry(*e).is_ok());
  ASSERT_EQ(m.config().layer_kind(0), LayerKind::kLinear);
  ASSERT_NE(e->layers[0].find("warm_g"), nullptr);
  struct Case {
    const char* what;
    int layer;  // 0: Gated DeltaNet, 3: attention
    std::function<void(SegmentEntry::Layer&)> edit;
    const char* says;
  };
  const Case cases[] = {
      {"mixer id", 0, [](SegmentEntry::Layer& l) { l.mixer = "gated_attention"; }, "made by mixer"},
      {"no warm-up", 0, [](SegmentEntry::Layer& l) {
         std::erase_if(l.tensors, [](const NamedTensor& n) { return n.name == "warm_g"; }); },
       "'warm_g' is missing"},
      {"extra tensor", 0, [](SegmentEntry::Layer& l) { l.put("extra", Tensor::zeros_f32({1})); },
       "unexpected tensor 'extra'"},
      {"s0 shape", 0, [](SegmentEntry::Layer& l) {
         l.put("s0", l.find("s0")->reshape({1, l.find("s0")->numel()})); }, "'s0' is F32"},
      {"s0 dtype", 0, [](SegmentEntry::Layer& l) { l.put("s0", l.find("s0")->to(DType::kBF16)); },
       "'s0' is BF16"},
      {"no transition", 0, [](SegmentEntry::Layer& l) { l.T.reset(); }, "transition"},
      {"transition form", 0, [](SegmentEntry::Layer& l) {
         l.T = kernels::Transition::identity(kernels::TransitionForm::kLogScalar, l.T->nv, l.T->dk); },
       "transition"},
      {"k rows", 3, [](SegmentEntry::Layer& l) { l.put("k", l.find("k")->rows(0, 10)); }, "'k' is F32"},
      {"attention with a transition", 3, [](SegmentEntry::Layer& l) {
         l.T = kernels::Transition::identity(kernels::TransitionForm::kIdentity, 1, 1); },
       "no transition"},
  };
  for (const Case& c : cases) {
    SegmentEntry bad = *e;
    c.edit(bad.layers[size_t(c.layer)]);
    const Status s = m.check_entry(bad);
    ASSERT_FALSE(s.is_ok()) << c.what;
    EXPECT_NE(s.message().find("layer " + std::to_string(c.layer)), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(c.says), std::string::npos) << c.what << ": " << s.message();
    SegmentEntry dst = m.empty_entry(toks, 1, e->key);
    EXPECT_FALSE(m.set_entry_layer(&dst, c.layer, m.entry_layer(bad, c.layer)).is_ok()) << c.what;
    ForwardPlan plan;
    plan.tokens = {toks[0]};
    plan.pieces = {{1, nullptr}, {0, &bad}};
    SeqState st = m.new_state(64);
    const Status f = m.forward_plan(st, plan, LogitsFor::kLast, nullptr);
    EXPECT_EQ(f.code(), StatusCode::kInvalidArgument) << c.what;
    EXPECT_NE(f.message().find(c.says), std::string::npos) << f.message();
  }
}

}  // namespace
}  // namespace hypic
