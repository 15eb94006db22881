// A model family that src/ does not know, in this one file: a Lightning-attention token mixer
// (the kernel library's Family::kLightning), an architecture "hypic_test_lightning" (Qwen3.5
// dense with Lightning instead of Gated DeltaNet in the linear layers: its config keys, layer
// pattern and tensor names), its chat format (a ChatTemplate of its own, with its end token)
// and its checkpoint layout, which serves both the random test checkpoint and a
// `bench make-model` shape. Registered at start-up (register_architecture,
// register_chat_template, register_synthetic_shape), it runs forward, decode, entries,
// composition, prompt layout and synthetic checkpoints through the unchanged engine. (In
// tests/cli/: the one test layer that may use the engine and the synthetic library together.)
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include <unistd.h>

#include "checkpoint/safetensors.h"
#include "common/testutil.h"
#include "engine/compose.h"
#include "engine/engine_util.h"
#include "engine/prompt.h"
#include "engine/tokenized_request.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/la_lightning.h"
#include "kernels/linear_attn.h"
#include "model/arch.h"
#include "model/arch/loaders.h"
#include "model/arch/qwen_common.h"
#include "model/mixer.h"
#include "model/pass.h"
#include "model/weight_reader.h"
#include "synthetic/synthetic_layout.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace hypic {
namespace {

namespace fs = std::filesystem;

// ---- the mixer: o = scale·Sᵀq with S_t = λ_h·S_{t−1} + k_t v_tᵀ; q, k, v = silu(W x) -------

class LightningType final : public TokenMixerType {
 public:
  const char* name() const override { return "Lightning (test)"; }
  const char* id() const override { return "test_lightning"; }
  LayerKind state() const override { return LayerKind::kLinear; }
  Status validate(const ModelConfig& c) const override {
    if (c.linear.value_heads <= 0 || c.linear.key_head_dim <= 0 ||
        c.linear.key_head_dim != c.linear.value_head_dim)
      return invalid_argument("lightning needs linear_num_value_heads > 0 and equal key/value "
                              "head dims");
    return Status::ok();
  }
  int64_t params(const ModelConfig& c) const override {
    const int64_t vd = c.linear.value_heads * c.linear.value_head_dim;
    return 4 * vd * c.hidden_size + c.linear.value_head_dim;
  }
  std::string describe(const ModelConfig& c) const override {
    return "lightning: " + std::to_string(c.linear.value_heads) + " heads x " +
           std::to_string(c.linear.value_head_dim);
  }
};

const LightningType kLightningType;

struct LightningWeights {
  Tensor qkv;       // [3·nv·d, H]
  Tensor norm_w;    // [d] F32
  Tensor out_proj;  // [H, nv·d]
};

class Lightning final : public TokenMixer {
 public:
  Lightning(const ModelConfig& c, LightningWeights w, int layer)
      : w_(std::move(w)), nv_(int(c.linear.value_heads)),
        d_(int(c.linear.value_head_dim)), eps_(float(c.rms_norm_eps)),
        decay_(kernels::lightning_log_decay(nv_, layer, int(c.num_hidden_layers), 0)),
        la_(kernels::make_linear_attention(kernels::Family::kLightning, {nv_, nv_, d_, d_})) {}

  const TokenMixerType& type() const override { return kLightningType; }
  int64_t history_tokens() const override { return 0; }
  LayerState new_state(int64_t) const override {
    LayerState s;
    s.fixed = {{"state", Tensor::zeros_f32({nv_, d_, d_})}};  // no conv
    return s;
  }
  double flops(int64_t L, int64_t) const override {
    return 2.0 * L * double(w_.qkv.numel() + w_.out_proj.numel()) + 4.0 * L * nv_ * d_ * d_;
  }
  // Entry layer: T (log-scalar), s0 [nv, d, d].
  Status check_entry(const SegmentEntry&, const SegmentEntry::Layer& l) const override {
    HYPIC_RETURN_IF_ERROR(check_entry_tensors(l, type(), {{"s0", {nv_, d_, d_}}}));
    if (!l.T || l.T->form != la_->transition_form() || l.T->nv != nv_ || l.T->dk != d_)
      return invalid_argument("its transition is not this model's");
    return Status::ok();
  }

  Status forward(const float* x, int64_t R, float* h, Model::Pass& pass) const override {
    const int64_t vd = int64_t(nv_) * d_;
    std::vector<float> proj(size_t(R * 3 * vd)), q(size_t(R * vd)), k(q.size()), v(q.size()),
        o(q.size());
    kernels::linear(x, R, w_.qkv, proj.data());
    for (int64_t t = 0; t < R; ++t)
      for (int64_t j = 0; j < vd; ++j) {
        q[size_t(t * vd + j)] = kernels::silu(proj[size_t(t * 3 * vd + j)]);
        k[size_t(t * vd + j)] = kernels::silu(proj[size_t(t * 3 * vd + vd + j)]);
        v[size_t(t * vd + j)] = kernels::silu(proj[size_t(t * 3 * vd + 2 * vd + j)]);
      }
    auto inputs = [&](int64_t r0, int64_t n) {
      kernels::LaInputs in;
      in.L = int(n);
      in.q = q.data() + r0 * vd;
      in.k = k.data() + r0 * vd;
      in.v = v.data() + r0 * vd;
      in.lightning_log_decay = decay_.data();
      in.scale = 1.0f / std::sqrt(float(d_));
      return in;
    };
    if (pass.batch) {
      std::vector<float*> states;
      for (const Model::Pass::Piece& p : pass.pieces)
        states.push_back(p.seq->layers[size_t(pass.layer)].fixed[0].t.f32());
      la_->step(inputs(0, R), states.data(), o.data());
    } else {
      for (const Model::Pass::Piece& p : pass.pieces) {
        Tensor& S = p.seq->layers[size_t(pass.layer)].fixed[0].t;
        if (p.entry) {
          if (p.gate) HYPIC_RETURN_IF_ERROR(p.gate->wait(pass.layer));
          const SegmentEntry::Layer& e = p.entry->layers[size_t(pass.layer)];
          const float* s0 = e.find("s0")->f32();
          if (pass.rule == ComposeRule::kTransition) {
            kernels::transition_compose(*e.T, d_, s0, S.f32());
          } else {
            for (int64_t i = 0; i < S.numel(); ++i) S.f32()[i] += s0[i];
          }
          continue;
        }
        la_->prefill(inputs(p.row0, p.rows), S.f32(), o.data() + p.row0 * vd);
      }
    }
    if (pass.capture) {
      SegmentEntry::Layer& e = pass.capture->layers[size_t(pass.layer)];
      Tensor s0 = Tensor::zeros_f32({nv_, d_, d_});
      la_->build_transition(inputs(pass.seam, R - pass.seam), &e.T.emplace(), s0.f32());
      e.put("s0", std::move(s0));
    }
    kernels::rmsnorm(o.data(), w_.norm_w.f32(), o.data(), R * nv_, d_, eps_, false);
    kernels::linear(o.data(), R, w_.out_proj, h, /*accumulate=*/true);
    return Status::ok();
  }

 private:
  LightningWeights w_;
  int nv_, d_;
  float eps_;
  std::vector<float> decay_;
  std::unique_ptr<kernels::LinearAttention> la_;
};

// ---- the architecture: Qwen3.5's config keys and tensors, Lightning linear layers ----------

class TestLightningArch final : public Architecture {
 public:
  const char* name() const override { return "TestLightning"; }
  std::vector<std::string> model_types() const override { return {"hypic_test_lightning"}; }
  bool has_class(const std::string& cls) const override {
    return cls == "HypicTestLightningForCausalLM";
  }
  const char* chat_template(const ModelConfig&) const override { return "hypic-test-chat"; }
  Status parse_config(const nlohmann::json& root, const std::string& source,
                      ModelConfig* c) const override {
    QwenFamily fam;
    fam.defaults = {512, 64, 96, 4, 4, 2, 0, 0};
    fam.read_mlp = [](Fields& f, const QwenDefaults& d, ModelConfig* m) {
      m->intermediate_size = f.i64("intermediate_size", d.intermediate);
    };
    fam.is_moe = [](const ModelConfig&, int) { return false; };
    HYPIC_RETURN_IF_ERROR(parse_qwen_config(root, source, fam, c));
    for (LayerSpec& l : c->layers)
      if (l.token->state() == LayerKind::kLinear) l.token = &kLightningType;
    return Status::ok();
  }
  Status load_layer(const WeightReader& rd, const ModelConfig& c, int layer,
                    const std::string& p, DecoderLayer* out) const override {
    HYPIC_RETURN_IF_ERROR(load_layer_norms(rd, c, p, out));
    if (c.layer(layer).token == &kLightningType) {
      const int64_t H = c.hidden_size, d = c.linear.value_head_dim;
      const int64_t vd = c.linear.value_heads * d;
      LightningWeights w;
      HYPIC_ASSIGN_OR_RETURN(w.qkv, rd.mat(p + "linear_attn.qkv_proj.weight", {3 * vd, H}));
      HYPIC_ASSIGN_OR_RETURN(w.norm_w, rd.vec(p + "linear_attn.norm.weight", {d}));
      HYPIC_ASSIGN_OR_RETURN(w.out_proj, rd.mat(p + "linear_attn.out_proj.weight", {H, vd}));
      out->token = std::make_shared<Lightning>(c, std::move(w), layer);
    } else {
      HYPIC_RETURN_IF_ERROR(load_qwen_token_mixer(rd, c, layer, p, false, out));
    }
    return load_qwen_channel_mixer(rd, c, layer, p, out);
  }
};

const TestLightningArch kArch;

// ---- its chat format: ChatML's markers in another layout, "<|im_start|>role says:\n" -------

class TestChat final : public ChatTemplate {
 public:
  std::string_view name() const override { return "hypic-test-chat"; }
  std::string turn_open(std::string_view role) const override {
    return "<|im_start|>" + std::string(role) + " says:\n";
  }
  std::string turn_close(std::string_view) const override { return "<|im_end|>\n\n"; }
  std::string generation_prompt() const override { return "<|im_start|>assistant says:\n"; }
  std::vector<std::string> end_tokens() const override { return {"<|im_end|>"}; }
};

const TestChat kChat;

// ---- a random checkpoint in the real format ------------------------------------------------

constexpr int kLayers = 4, kHidden = 64, kHeads = 2, kHeadDim = 16, kVocab = 512;

nlohmann::json config_json() {
  return {{"model_type", "hypic_test_lightning"},
          {"architectures", {"HypicTestLightningForCausalLM"}},
          {"vocab_size", kVocab}, {"hidden_size", kHidden}, {"num_hidden_layers", kLayers},
          {"layer_types", {"linear_attention", "linear_attention", "full_attention",
                           "linear_attention"}},
          {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 16},
          {"linear_num_key_heads", kHeads}, {"linear_num_value_heads", kHeads},
          {"linear_key_head_dim", kHeadDim}, {"linear_value_head_dim", kHeadDim},
          {"intermediate_size", 96}, {"max_position_embeddings", 4096},
          {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 10000.0},
                               {"partial_rotary_factor", 0.25}}},
          {"tie_word_embeddings", true}, {"rms_norm_eps", 1e-6}};
}

// The family's checkpoint layout: per decoder layer its tensors (name, shape, spread, mean),
// then the globals (embedding, final norm; the head is tied).
struct Spec {
  std::string name;
  Shape shape;
  float scale, mean = 0.0f;
};

std::vector<Spec> layer_specs(int i) {
  const int64_t H = kHidden, vd = kHeads * kHeadDim;
  const std::string p = "model.layers." + std::to_string(i) + ".";
  std::vector<Spec> s = {{p + "input_layernorm.weight", {H}, 0.02f},
                         {p + "post_attention_layernorm.weight", {H}, 0.02f}};
  if (i == 2) {
    s.insert(s.end(), {{p + "self_attn.q_proj.weight", {4 * 2 * 16, H}, 0.1f},
                       {p + "self_attn.k_proj.weight", {2 * 16, H}, 0.1f},
                       {p + "self_attn.v_proj.weight", {2 * 16, H}, 0.1f},
                       {p + "self_attn.q_norm.weight", {16}, 0.02f},
                       {p + "self_attn.k_norm.weight", {16}, 0.02f},
                       {p + "self_attn.o_proj.weight", {H, 4 * 16}, 0.1f}});
  } else {
    s.insert(s.end(), {{p + "linear_attn.qkv_proj.weight", {3 * vd, H}, 0.1f},
                       {p + "linear_attn.norm.weight", {kHeadDim}, 0.02f, 1.0f},
                       {p + "linear_attn.out_proj.weight", {H, vd}, 0.1f}});
  }
  s.insert(s.end(), {{p + "mlp.gate_proj.weight", {96, H}, 0.1f},
                     {p + "mlp.up_proj.weight", {96, H}, 0.1f},
                     {p + "mlp.down_proj.weight", {H, 96}, 0.1f}});
  return s;
}

std::vector<Spec> global_specs() {
  return {{"model.embed_tokens.weight", {kVocab, kHidden}, 0.5f}, {"model.norm.weight", {kHidden}, 0.02f}};
}

// Its `bench make-model` shape: the same layout at opt.layers layers (attention at layer 2).
Result<synthetic::Layout> synthetic_layout(const SyntheticOptions& opt) {
  synthetic::Layout L;
  L.config = config_json();
  L.config["num_hidden_layers"] = opt.layers;
  nlohmann::json types = nlohmann::json::array();
  for (int i = 0; i < opt.layers; ++i) types.push_back(i == 2 ? "full_attention" : "linear_attention");
  L.config["layer_types"] = types;
  auto tensor = [](const Spec& s) { return synthetic::TensorSpec{s.name, s.shape, s.mean, s.scale}; };
  for (const Spec& s : global_specs()) L.globals.push_back(tensor(s));
  for (int i = 0; i < opt.layers; ++i) {
    L.layers.emplace_back();
    for (const Spec& s : layer_specs(i)) L.layers.back().push_back(tensor(s));
  }
  return L;
}

std::string test_dir(const std::string& tag) {
  static int n = 0;
  const fs::path dir = fs::temp_directory_path() / ("hypic_test_lightning_" + tag + std::to_string(::getpid()) +
                                                    "_" + std::to_string(n++));
  fs::create_directories(dir);
  return dir.string();
}

std::string write_checkpoint(const nlohmann::json& cfg, int extra_layers = 0) {
  const fs::path dir = test_dir("ck");
  std::ofstream(dir / "config.json") << cfg.dump(2);
  std::vector<std::pair<std::string, Tensor>> t;
  uint32_t seed = 1;
  auto add = [&](const Spec& s) {
    Tensor x = Tensor::zeros_f32(s.shape);
    const auto r = test::randn(size_t(x.numel()), seed++, s.scale);
    for (int64_t i = 0; i < x.numel(); ++i) x.f32()[i] = s.mean + r[size_t(i)];
    t.emplace_back(s.name, x);
  };
  for (const Spec& s : global_specs()) add(s);
  for (int i = 0; i < kLayers + extra_layers; ++i)
    for (const Spec& s : layer_specs(i)) add(s);
  EXPECT_TRUE(write_safetensors((dir / "model.safetensors").string(), t).is_ok());
  // The tokenizer of the Qwen3.5 test checkpoint (vocabulary 512, ChatML's special tokens).
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(std::string(HYPIC_SOURCE_DIR) + "/tests/models/qwen3_5_dense/" + f, dir / f);
  return dir.string();
}

class ArchExtension : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(register_architecture(&kArch).is_ok());
    ASSERT_TRUE(register_chat_template(&kChat).is_ok());
    ASSERT_TRUE(register_synthetic_shape("hypic-test-lightning", synthetic_layout).is_ok());
    dir_ = write_checkpoint(config_json());
    auto m = Model::load(dir_, {DType::kF32, false});
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    model_ = std::move(m).value().release();
  }
  static void TearDownTestSuite() {
    delete model_;
    fs::remove_all(dir_);
  }
  static const Model& m() { return *model_; }
  static inline std::string dir_;
  static inline const Model* model_ = nullptr;
};

std::vector<int32_t> doc(uint32_t seed, int n) { return test::doc(seed, n, kVocab); }

std::vector<float> prefill(const Model& m, const Composer& c, const PromptParts& p, PicMode mode,
                           int seam, ComposeStats* stats = nullptr) {
  SeqState st = m.new_state(p.total_tokens() + 1);
  std::vector<float> logits;
  ComposeStats s;
  ComposeOptions o;
  o.mode = mode;
  o.seam = seam;
  const Status status = c.prefill(make_request(m, p, o.seam, o.salt), o, &st, &logits, &s);
  EXPECT_TRUE(status.is_ok()) << status.to_string();
  if (stats) *stats = s;
  return logits;
}

// Its chat format: the engine lays a PIC prompt out in the family's template (found by the
// name its architecture gives), special markers as special tokens, and generation stops on
// the template's end token.
TEST_F(ArchExtension, ChatFormatRegisteredFromTestsAlone) {
  const ChatTemplate& chat = model_chat_template(m().config());
  EXPECT_EQ(chat.name(), "hypic-test-chat");
  EXPECT_FALSE(register_chat_template(&kChat).is_ok());  // a name is taken once
  auto tok = Tokenizer::load(dir_ + "/tokenizer.json");
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  const PromptParts p = chat_parts(chat, *tok, "Be brief.", {"First document.", "Second one."}, "Which?");
  const std::string text = "<|im_start|>system says:\nBe brief.<|im_end|>\n\n<|im_start|>user says:\n";
  EXPECT_EQ(p.prefix, tok->encode(text, /*parse_special=*/true));
  EXPECT_EQ(p.segments.size(), 2u);
  EXPECT_EQ(p.suffix, tok->encode("Which?<|im_end|>\n\n<|im_start|>assistant says:\n", true));
  EXPECT_EQ(p.prefix.front(), tok->token_id("<|im_start|>"));
}

// Its `bench make-model` shape: listed, written at a chosen depth in the real format (config,
// shards, index), and loaded by its architecture.
TEST_F(ArchExtension, SyntheticShapeRegisteredFromTestsAlone) {
  const auto shapes = synthetic_shapes();
  EXPECT_NE(std::find(shapes.begin(), shapes.end(), "hypic-test-lightning"), shapes.end());
  const std::string dir = test_dir("synth") + "/m";
  SyntheticOptions o;
  o.layers = 3;
  ASSERT_TRUE(write_synthetic_checkpoint("hypic-test-lightning", o, dir).is_ok());
  auto loaded = Model::load(dir, {DType::kBF16, false});
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  EXPECT_EQ((*loaded)->config().layer_pattern(), "LLF");
  EXPECT_TRUE((*loaded)->self_test().is_ok());
  fs::remove_all(fs::path(dir).parent_path());
}

TEST_F(ArchExtension, RegistersFromTestsAloneAndLoads) {
  EXPECT_EQ(find_architecture("hypic_test_lightning"), &kArch);
  const ModelConfig& c = m().config();
  EXPECT_STREQ(c.arch_name(), "TestLightning");
  EXPECT_EQ(c.layer_pattern(), "LLFL");
  EXPECT_NE(c.summary().find("3 Lightning (test) (L) + 1 full attention (F)"), std::string::npos)
      << c.summary();
  EXPECT_NE(c.summary().find("lightning: 2 heads x 16"), std::string::npos);
  EXPECT_EQ(m().min_segment_tokens(0), 1);  // no conv: no history beyond the seam
  // The same model_type cannot be taken twice.
  EXPECT_FALSE(register_architecture(&kArch).is_ok());
}

// Chunked prefill from the kernel library against the one-token step path, and a split
// prompt against a whole one (the state carries across calls).
TEST_F(ArchExtension, ForwardAgreesWithTokenByToken) {
  const auto toks = doc(1, 70);
  SeqState whole = m().new_state(8);
  std::vector<float> all, last;
  ASSERT_TRUE(m().forward(whole, toks, LogitsFor::kAll, &all).is_ok());
  SeqState step = m().new_state(8);
  std::vector<float> lg;
  for (size_t i = 0; i < toks.size(); ++i) {
    ASSERT_TRUE(m().forward(step, {toks[i]}, LogitsFor::kLast, &lg).is_ok());
    const std::vector<float> row(all.begin() + int64_t(i) * kVocab,
                                 all.begin() + int64_t(i + 1) * kVocab);
    EXPECT_LT(test::rel_err(lg, row), 1e-4) << "token " << i;
  }
  SeqState split = m().new_state(8);
  ASSERT_TRUE(m().forward(split, {toks.begin(), toks.begin() + 33}, LogitsFor::kNone, nullptr).is_ok());
  ASSERT_TRUE(m().forward(split, {toks.begin() + 33, toks.end()}, LogitsFor::kLast, &last).is_ok());
  const std::vector<float> final_row(all.end() - kVocab, all.end());
  EXPECT_LT(test::rel_err(last, final_row), 1e-4);
}

TEST_F(ArchExtension, DecodeBatchEqualsSingleSequenceSteps) {
  SeqState a = m().new_state(8), b = m().new_state(8);
  ASSERT_TRUE(m().forward(a, doc(2, 20), LogitsFor::kNone, nullptr).is_ok());
  ASSERT_TRUE(m().forward(b, doc(3, 35), LogitsFor::kNone, nullptr).is_ok());
  SeqState a1 = a.copy(), b1 = b.copy();
  std::vector<float> batch, la, lb;
  ASSERT_TRUE(m().decode_batch({&a, &b}, {5, 7}, &batch).is_ok());
  ASSERT_TRUE(m().forward(a1, {5}, LogitsFor::kLast, &la).is_ok());
  ASSERT_TRUE(m().forward(b1, {7}, LogitsFor::kLast, &lb).is_ok());
  EXPECT_LT(test::rel_err(std::vector<float>(batch.begin(), batch.begin() + kVocab), la), 1e-5);
  EXPECT_LT(test::rel_err(std::vector<float>(batch.begin() + kVocab, batch.end()), lb), 1e-5);
}

TEST_F(ArchExtension, ComposesColdEqualsWarmAndFirstSegmentEqualsFull) {
  Composer c(m(), test::store(64), nullptr);
  PromptParts p;
  p.prefix = doc(10, 12);
  p.segments = {doc(11, 90), doc(12, 60)};
  p.suffix = doc(13, 9);
  for (int seam : {0, 4}) {
    ComposeStats cold, warm;
    const auto a = prefill(m(), c, p, PicMode::kHypic, seam, &cold);
    const auto b = prefill(m(), c, p, PicMode::kHypic, seam, &warm);
    EXPECT_EQ(cold.segments_missed, 2);
    EXPECT_EQ(warm.segments_hit, 2);
    EXPECT_EQ(a, b) << "seam " << seam;
  }
  // A segment at the very start sees no prefix: composing its body is a full recompute.
  PromptParts first;
  first.segments = {doc(14, 120)};
  first.suffix = doc(15, 9);
  const auto full = prefill(m(), c, first, PicMode::kFull, 0);
  for (int seam : {0, 3}) EXPECT_LT(test::rel_err(prefill(m(), c, first, PicMode::kHypic, seam), full), 2.5e-4);
  // naive (S + S_body) is a different, worse composition
  EXPECT_GT(test::rel_err(prefill(m(), c, p, PicMode::kNaive, 4),
                          prefill(m(), c, p, PicMode::kFull, 0)),
            test::rel_err(prefill(m(), c, p, PicMode::kHypic, 4),
                          prefill(m(), c, p, PicMode::kFull, 0)));
}

// Entries of the new mixer travel through the generic formats: layer by layer (the wire)
// and serialised (the disk tier), then compose exactly as the original.
TEST_F(ArchExtension, EntriesSurviveLayerTransferAndSerialisation) {
  const auto seg = doc(20, 50);
  auto e = m().build_entry(seg, 4);
  ASSERT_TRUE(e.is_ok()) << e.status().to_string();
  e->key = "k";
  SegmentEntry moved = m().empty_entry(seg, 4, "k");
  for (int l = 0; l < kLayers; ++l)
    ASSERT_TRUE(m().set_entry_layer(&moved, l, m().entry_layer(*e, l)).is_ok()) << l;
  auto bytes = serialize_entry(*e);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
  auto back = deserialize_entry(*bytes);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  auto compose = [&](const SegmentEntry& entry) {
    ForwardPlan plan;
    plan.tokens = doc(21, 10);
    plan.tokens.insert(plan.tokens.end(), seg.begin(), seg.begin() + 4);
    plan.pieces = {{14, nullptr}, {0, &entry}};
    SeqState st = m().new_state(8);
    std::vector<float> lg;
    EXPECT_TRUE(m().forward_plan(st, plan, LogitsFor::kLast, &lg).is_ok());
    std::vector<float> next;
    EXPECT_TRUE(m().forward(st, {9}, LogitsFor::kLast, &next).is_ok());
    return next;
  };
  const auto want = compose(*e);
  EXPECT_EQ(compose(moved), want);
  EXPECT_EQ(compose(*back), want);
  // A part of another layer kind is refused, naming the layer.
  Status wrong = m().set_entry_layer(&moved, 2, m().entry_layer(*e, 0));
  EXPECT_FALSE(wrong.is_ok());
  EXPECT_NE(wrong.message().find("layer 2"), std::string::npos) << wrong.message();
}

TEST_F(ArchExtension, CheckpointWithUnusedLayersIsRefused) {
  const std::string d = write_checkpoint(config_json(), /*extra_layers=*/1);
  auto r = Model::load(d, {DType::kF32, false});
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("decoder layer 4"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("num_hidden_layers is 4"), std::string::npos);
  fs::remove_all(d);
}

TEST_F(ArchExtension, ArchitecturesMustMatchModelType) {
  nlohmann::json j = config_json();
  j["architectures"] = {"Qwen3NextForCausalLM"};
  auto r = ModelConfig::from_json(j.dump());
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("a Qwen3-Next model"), std::string::npos)
      << r.status().message();
  j["architectures"] = {"SomethingElseForCausalLM"};
  r = ModelConfig::from_json(j.dump());
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("SomethingElseForCausalLM"), std::string::npos);
}

TEST_F(ArchExtension, UnknownMixerInLayerTypesIsAnError) {
  nlohmann::json j = config_json();
  j["layer_types"][1] = "lightning_attention";
  auto r = ModelConfig::from_json(j.dump());
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("layer_types[1]"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace hypic
