// Synthetic segment entries for the cache tests, a bitwise comparison, and a temp dir.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "entry/segment_entry.h"

namespace hypic::test {

// Random bit patterns (NaN payloads, −0, infinities, subnormals all included).
inline Tensor random_bits(DType t, Shape shape, std::mt19937& g) {
  Tensor x = Tensor::zeros(t, std::move(shape));
  auto* p = static_cast<uint8_t*>(x.raw());
  for (size_t i = 0; i < x.nbytes(); ++i) p[i] = uint8_t(g());
  return x;
}

inline std::vector<float> random_floats_bits(size_t n, std::mt19937& g) {
  std::vector<float> v(n);
  for (float& f : v) {
    const uint32_t u = g();
    std::memcpy(&f, &u, 4);
  }
  return v;
}

// An entry in the shape of a hybrid model's (mixers "test_linear" and "test_attention": the
// format knows no mixer): layers 0-3 with a transition of every form, s0, a conv tail on all
// but layer 1 and warm-up tensors on layers 2 and 3; layers 4 and 5 with k, v in F32 and
// BF16. L = 12, seam = 2.
inline SegmentEntry make_entry(uint32_t seed, int seam = 2) {
  std::mt19937 g(seed);
  const int nv = 2, dk = 4, dv = 3, conv_dim = 10, Km1 = 3, nkv = 2, hd = 4;
  SegmentEntry e;
  e.length = 12;
  e.seam = seam;
  for (int i = 0; i < e.length; ++i) e.tokens.push_back(int32_t(g()));
  const kernels::TransitionForm forms[] = {
      kernels::TransitionForm::kIdentity, kernels::TransitionForm::kLogScalar,
      kernels::TransitionForm::kLogVector, kernels::TransitionForm::kDense};
  for (int i = 0; i < 4; ++i) {
    SegmentEntry::Layer l;
    l.mixer = "test_linear";
    l.T = kernels::Transition::identity(forms[i], nv, dk);
    l.T->data = random_floats_bits(l.T->data.size(), g);
    l.put("s0", random_bits(DType::kF32, {nv, dk, dv}, g));
    if (i != 1) l.put("conv_tail", random_bits(DType::kF32, {Km1, conv_dim}, g));
    if (i >= 2) {
      const int P = 2;
      l.put("warm_mixed", random_bits(DType::kF32, {P, conv_dim}, g));
      l.put("warm_g", random_bits(DType::kF32, {P, nv}, g));
      l.put("warm_beta", random_bits(DType::kF32, {P, nv}, g));
    }
    e.layers.push_back(std::move(l));
  }
  const int64_t Lb = e.length - e.seam;
  for (DType t : {DType::kF32, DType::kBF16}) {
    SegmentEntry::Layer a;
    a.mixer = "test_attention";
    a.put("k", random_bits(t, {Lb, nkv, hd}, g));
    a.put("v", random_bits(t, {Lb, nkv, hd}, g));
    e.layers.push_back(std::move(a));
  }
  e.key = segment_key("test-model", DType::kF32, e.seam, "", e.tokens);
  return e;
}

// An entry of exactly `bytes` bytes (a multiple of 4; of 1024 above 256 KiB) whose contents
// identify `tag`.
inline std::string sized_key(int tag) {
  return segment_key("store-test", DType::kF32, 0, "", {int32_t(tag)});
}
inline SegmentEntry make_sized(int tag, size_t bytes) {
  SegmentEntry e;
  e.length = 1;
  e.tokens = {int32_t(tag)};
  SegmentEntry::Layer l;
  l.mixer = "test_sized";
  kernels::Transition& T = l.T.emplace();
  const size_t n = bytes / 4;
  if (n <= (size_t(1) << 16)) {  // nv scalars
    T.form = kernels::TransitionForm::kLogScalar;
    T.nv = int(n);
    T.dk = 1;
  } else {  // nv × 256 per-channel logs (big entries)
    T.form = kernels::TransitionForm::kLogVector;
    T.nv = int(n / 256);
    T.dk = 256;
  }
  T.data.resize(size_t(T.nv) * (T.form == kernels::TransitionForm::kLogScalar ? 1 : 256));
  for (size_t i = 0; i < T.data.size(); ++i) T.data[i] = float(tag) * 1000.0f + float(i % 997);
  e.layers.push_back(std::move(l));
  e.key = sized_key(tag);
  return e;
}
// True if `e` is make_sized(tag, bytes) (spot checks for big ones).
inline bool is_sized(const SegmentEntry& e, int tag, size_t bytes) {
  if (e.key != sized_key(tag) || e.tokens != std::vector<int32_t>{tag} || e.bytes() != bytes ||
      e.layers.size() != 1 || !e.layers[0].T)
    return false;
  const std::vector<float>& d = e.layers[0].T->data;
  for (size_t i = 0; i < d.size(); i += 1 + d.size() / 64)
    if (d[i] != float(tag) * 1000.0f + float(i % 997)) return false;
  return d.empty() || d.back() == float(tag) * 1000.0f + float((d.size() - 1) % 997);
}

inline bool same_tensor(const Tensor& a, const Tensor& b) {
  if (a.empty() || b.empty()) return a.empty() == b.empty();
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// Bitwise equality of everything an entry holds.
inline void expect_same_entry(const SegmentEntry& a, const SegmentEntry& b) {
  EXPECT_EQ(a.key, b.key);
  EXPECT_EQ(a.length, b.length);
  EXPECT_EQ(a.seam, b.seam);
  EXPECT_EQ(a.tokens, b.tokens);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 0; i < a.layers.size(); ++i) {
    const SegmentEntry::Layer &x = a.layers[i], &y = b.layers[i];
    EXPECT_EQ(x.mixer, y.mixer) << i;
    ASSERT_EQ(bool(x.T), bool(y.T)) << i;
    if (x.T) {
      EXPECT_EQ(x.T->form, y.T->form) << i;
      EXPECT_EQ(x.T->nv, y.T->nv) << i;
      EXPECT_EQ(x.T->dk, y.T->dk) << i;
      ASSERT_EQ(x.T->data.size(), y.T->data.size()) << i;
      EXPECT_TRUE(x.T->data.empty() ||
                  std::memcmp(x.T->data.data(), y.T->data.data(), x.T->bytes()) == 0) << i;
    }
    ASSERT_EQ(x.tensors.size(), y.tensors.size()) << i;
    for (size_t j = 0; j < x.tensors.size(); ++j) {
      EXPECT_EQ(x.tensors[j].name, y.tensors[j].name) << i;
      EXPECT_TRUE(same_tensor(x.tensors[j].t, y.tensors[j].t)) << i << " " << x.tensors[j].name;
    }
  }
  EXPECT_EQ(a.bytes(), b.bytes());
}

inline std::string read_file(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
// Replaces the file (unlinked first: ext4 flushes a file that is truncated and rewritten,
// which makes the byte-flip loops slow).
inline void write_file(const std::string& p, const std::string& s) {
  std::error_code ec;
  std::filesystem::remove(p, ec);
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(s.data(), std::streamsize(s.size()));
}

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl =
        (std::filesystem::path(::testing::TempDir()) / "hypic_cache_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const {
    return (std::filesystem::path(dir_) / name).string();
  }
  std::string dir_;
};

}  // namespace hypic::test
