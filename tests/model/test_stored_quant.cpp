// Matrices stored quantized (checkpoint/stored_quant.h): `hypic quantize` output loads back bit for
// bit as quantizing at load; damaged scales, an existing output, a q4 model that does not fit
// are refused with nothing written or loaded; block-scaled FP8 checkpoints load as their
// dequantized values.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <span>

#include "checkpoint/checkpoint.h"
#include "common/model_logits.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/stored_quant.h"
#include "core/quant.h"
#include "model/model.h"
#include "model/quantize_model.h"

namespace hypic {
namespace {

namespace fs = std::filesystem;
using test::prompt_logits;

std::string model_dir(const std::string& name) {
  return std::string(HYPIC_SOURCE_DIR) + "/tests/models/" + name;
}

std::string temp_dir(const std::string& tag) {
  std::string t = (fs::path(::testing::TempDir()) / ("hypic_sq_" + tag + "_XXXXXX")).string();
  EXPECT_NE(::mkdtemp(t.data()), nullptr);
  return t;
}

// Every tensor of a single-file or sharded directory, rewritten into one file of `out` by
// `edit` (which may drop or replace entries), with config.json and the tokenizer copied.
void rewrite(const std::string& src, const std::string& out,
             const std::function<void(std::vector<std::pair<std::string, RawTensor>>&)>& edit) {
  auto ck = Checkpoint::open(src);
  ASSERT_TRUE(ck.is_ok());
  std::vector<std::pair<std::string, RawTensor>> ts;
  for (const std::string& n : ck->names()) ts.emplace_back(n, ck->get_raw(n).value());
  edit(ts);
  fs::create_directories(out);
  ASSERT_TRUE(write_safetensors_raw(out + "/model.safetensors", ts).is_ok());
  for (const auto& f : fs::directory_iterator(src))
    if (f.path().extension() != ".safetensors" && f.path().filename() != "model.safetensors.index.json")
      fs::copy_file(f.path(), out + "/" + f.path().filename().string());
}

TEST(StoredQuant, SavedModelLoadsBitIdenticalToQuantizingAtLoad) {
  for (auto [name, t] : {std::pair{"qwen3_5_dense", DType::kQ4}, {"qwen3_5_dense", DType::kQ8},
                         {"minimax_rotary", DType::kQ8}, {"kimi_linear_moe", DType::kQ8}}) {
    const std::string out = temp_dir("save") + "/q";
    QuantizeOptions o;
    o.dtype = t;
    o.progress = false;
    ASSERT_TRUE(quantize_model(model_dir(name), out, o).is_ok()) << name;
    EXPECT_FALSE(fs::exists(out + ".partial"));
    const auto want = prompt_logits(model_dir(name), t), got = prompt_logits(out, t);
    ASSERT_FALSE(want.empty());
    EXPECT_EQ(got, want) << name << " " << dtype_name(t);
    // The codes are stored as such: the file is about a quarter / half of the bf16 matrices.
    auto ck = Checkpoint::open(out);
    ASSERT_TRUE(ck.is_ok());
    const SafetensorsEntry* e = ck->entry("model.language_model.layers.0.mlp.down_proj.weight");
    if (std::string(name) == "qwen3_5_dense") {
      ASSERT_NE(e, nullptr);
      EXPECT_EQ(e->dtype, t == DType::kQ8 ? "I8" : "U8");
    }
    // Loaded for bf16, the stored matrices are dequantized.
    const auto bf = prompt_logits(out, DType::kBF16);
    EXPECT_EQ(bf.size(), want.size());
  }
}

TEST(StoredQuant, RefusalsWriteNothing) {
  QuantizeOptions o;
  o.progress = false;
  const std::string base = temp_dir("refuse");
  // q4 on widths its groups do not divide: the loader's error, no output, no .partial.
  Status s = quantize_model(model_dir("minimax_rotary"), base + "/q4", o);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("multiple of 32"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(base + "/q4"));
  EXPECT_FALSE(fs::exists(base + "/q4.partial"));
  // An existing output directory is never overwritten.
  fs::create_directories(base + "/exists");
  s = quantize_model(model_dir("qwen3_5_dense"), base + "/exists", o);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("exists"), std::string::npos) << s.message();
  EXPECT_TRUE(fs::is_empty(base + "/exists"));
}

TEST(StoredQuant, MissingOrMisShapedScalesAreClearErrors) {
  const std::string base = temp_dir("damage");
  QuantizeOptions o;
  o.progress = false;
  ASSERT_TRUE(quantize_model(model_dir("qwen3_5_dense"), base + "/q", o).is_ok());
  const std::string victim = "model.language_model.layers.1.mlp.down_proj.weight";
  rewrite(base + "/q", base + "/no_scale", [&](auto& ts) {
    ASSERT_EQ(std::erase_if(ts, [&](const auto& p) { return p.first == victim + ".scale"; }), 1u);
  });
  auto m = Model::load(base + "/no_scale", {DType::kQ4, false});
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find(victim + ".scale"), std::string::npos) << m.status().to_string();
  EXPECT_NE(m.status().message().find("missing"), std::string::npos) << m.status().to_string();
  rewrite(base + "/q", base + "/bad_scale", [&](auto& ts) {
    for (auto& [n, r] : ts)
      if (n == victim + ".scale") r.shape = {r.shape[0] * r.shape[1]};
  });
  m = Model::load(base + "/bad_scale", {DType::kQ4, false});
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("has shape"), std::string::npos) << m.status().to_string();
}

TEST(StoredQuant, Fp8E4m3Values) {
  EXPECT_EQ(fp8_e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0xfe), -448.0f);
  EXPECT_EQ(fp8_e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8_e4m3_to_f32(0x08), std::ldexp(1.0f, -6));
  EXPECT_EQ(fp8_e4m3_to_f32(0x00), 0.0f);
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_f32(0x7f)));
}

// The nearest e4m3 code of v (ties: the even code), by search: the test's own encoder.
uint8_t to_e4m3(float v) {
  uint8_t best = 0;
  for (int c = 0; c < 256; ++c) {
    const float f = fp8_e4m3_to_f32(uint8_t(c));
    if (std::isnan(f)) continue;
    const float d = std::fabs(f - v), bd = std::fabs(fp8_e4m3_to_f32(best) - v);
    if (d < bd || (d == bd && (c & 1) == 0 && (best & 1) == 1)) best = uint8_t(c);
  }
  return best;
}

// Qwen-style FP8: every projection matrix as F8_E4M3 with 128 × 128 block scales
// (scale_inv = block max / 448). Loads as a checkpoint holding bf16(e4m3 · scale) does.
TEST(StoredQuant, BlockScaledFp8LoadsAsItsDequantizedValues) {
  const std::string base = temp_dir("fp8");
  auto bufs = std::make_shared<std::vector<std::vector<uint8_t>>>();
  auto keep = [&](std::vector<uint8_t> v) {
    bufs->push_back(std::move(v));
    return std::span<const uint8_t>(bufs->back().data(), bufs->back().size());
  };
  bufs->reserve(256);
  std::vector<std::pair<std::string, RawTensor>> fp8, ref;
  auto ck = Checkpoint::open(model_dir("qwen3_5_dense"));
  ASSERT_TRUE(ck.is_ok());
  int converted = 0;
  for (const std::string& n : ck->names()) {
    RawTensor r = ck->get_raw(n).value();
    const bool proj = r.shape.size() == 2 && n.find("proj.weight") != std::string::npos;
    if (!proj) {
      fp8.emplace_back(n, r);
      ref.emplace_back(n, r);
      continue;
    }
    const Tensor w = ck->get_unchecked(n).value().to(DType::kF32);
    const int64_t N = w.dim(0), K = w.dim(1), bn = (N + 127) / 128, bk = (K + 127) / 128;
    std::vector<float> sc(size_t(bn * bk));
    for (int64_t i = 0; i < N; ++i)
      for (int64_t k = 0; k < K; ++k) {
        float& s = sc[size_t(i / 128 * bk + k / 128)];
        s = std::max(s, std::fabs(w.f32()[i * K + k]) / 448.0f);
      }
    std::vector<uint8_t> codes(size_t(N * K)), deq(size_t(N * K * 2));
    for (int64_t i = 0; i < N; ++i)
      for (int64_t k = 0; k < K; ++k) {
        const float s = sc[size_t(i / 128 * bk + k / 128)];
        const uint8_t c = to_e4m3(s > 0 ? w.f32()[i * K + k] / s : 0.0f);
        codes[size_t(i * K + k)] = c;
        const uint16_t b = f32_to_bf16(fp8_e4m3_to_f32(c) * s);
        std::memcpy(deq.data() + 2 * (i * K + k), &b, 2);
      }
    std::vector<uint8_t> sb(sc.size() * 4);
    std::memcpy(sb.data(), sc.data(), sb.size());
    fp8.emplace_back(n, RawTensor{"F8_E4M3", {N, K}, keep(std::move(codes)), bufs});
    fp8.emplace_back(n + "_scale_inv", RawTensor{"F32", {bn, bk}, keep(std::move(sb)), bufs});
    ref.emplace_back(n, RawTensor{"BF16", {N, K}, keep(std::move(deq)), bufs});
    ++converted;
  }
  ASSERT_GT(converted, 8);
  for (auto [dir, ts] : {std::pair{base + "/fp8", &fp8}, {base + "/ref", &ref}}) {
    fs::create_directories(dir);
    ASSERT_TRUE(write_safetensors_raw(dir + "/model.safetensors", *ts).is_ok());
    for (const auto& f : fs::directory_iterator(model_dir("qwen3_5_dense")))
      if (f.path().extension() != ".safetensors" && f.path().filename() != "model.safetensors.index.json")
        fs::copy_file(f.path(), dir + "/" + f.path().filename().string());
  }
  const auto got = prompt_logits(base + "/fp8", DType::kF32);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got, prompt_logits(base + "/ref", DType::kF32));
  // Without its block scales an FP8 matrix is refused by name.
  const std::string victim = "model.language_model.layers.0.mlp.up_proj.weight";
  ASSERT_EQ(std::erase_if(fp8, [&](const auto& p) { return p.first == victim + "_scale_inv"; }), 1u);
  fs::create_directories(base + "/fp8_noscale");
  ASSERT_TRUE(write_safetensors_raw(base + "/fp8_noscale/model.safetensors", fp8).is_ok());
  fs::copy_file(model_dir("qwen3_5_dense") + "/config.json", base + "/fp8_noscale/config.json");
  auto m = Model::load(base + "/fp8_noscale", {DType::kBF16, false});
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find(victim + "_scale_inv"), std::string::npos) << m.status().to_string();
}

}  // namespace
}  // namespace hypic
