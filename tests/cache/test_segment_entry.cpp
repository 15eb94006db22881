// Segment keys and the entry file: bit-exact round trips; every kind of damage is kCorrupt.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <nlohmann/json.hpp>
#include <set>

#include "cache/entry_util.h"
#include "checkpoint/safetensors.h"
#include "core/log.h"

namespace hypic {
namespace {

using test::expect_same_entry;
using test::make_entry;
using test::read_file;
using test::write_file;

class SegmentEntryFile : public test::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    set_log_level(LogLevel::kError);  // the reader warns about what the tests break
  }
  void TearDown() override {
    set_log_level(LogLevel::kInfo);
    TempDirTest::TearDown();
  }
  void expect_corrupt(const std::string& p, const std::string& what) {
    Result<SegmentEntry> r = load_entry(p);
    ASSERT_FALSE(r.is_ok()) << what;
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt) << what << ": " << r.status().to_string();
  }
};

TEST(SegmentEntry, BytesIsTheExactSumOfTensorData) {
  const SegmentEntry e = make_entry(1);
  size_t want = 0;
  for (const auto& l : e.layers) {
    if (l.T) want += l.T->data.size() * 4;
    for (const NamedTensor& n : l.tensors) want += size_t(n.t.numel()) * dtype_size(n.t.dtype());
  }
  EXPECT_EQ(e.bytes(), want);
  // identity: 0, log-scalar: nv, log-vector: nv·dk, dense: nv·dk² floats; s0 2·4·3 each;
  // conv tails 3·10 on three layers; warm 2·(10+2+2) on two; attn 10·2·4 ×2 in f32 and bf16.
  EXPECT_EQ(want, size_t(4 * (2 + 8 + 32) + 4 * 24 * 4 + 4 * 30 * 3 + 4 * 28 * 2 + 80 * 2 * 4 +
                         80 * 2 * 2));
  EXPECT_EQ(SegmentEntry{}.bytes(), 0u);
}

TEST(SegmentKey, ChangesWithEveryField) {
  const std::vector<int32_t> toks = {1, 2, 3, -7, 151935};
  const std::string base = segment_key("fp", DType::kF32, 8, "salt", toks);
  EXPECT_EQ(base.size(), 64u);
  EXPECT_EQ(base.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(base, segment_key("fp", DType::kF32, 8, "salt", toks));  // deterministic
  std::set<std::string> keys = {base};
  auto add = [&](const std::string& k, const char* what) {
    EXPECT_TRUE(keys.insert(k).second) << what << " did not change the key";
  };
  add(segment_key("fq", DType::kF32, 8, "salt", toks), "fingerprint");
  add(segment_key("fp", DType::kBF16, 8, "salt", toks), "dtype");
  add(segment_key("fp", DType::kF16, 8, "salt", toks), "dtype f16");
  add(segment_key("fp", DType::kF32, 0, "salt", toks), "seam");
  add(segment_key("fp", DType::kF32, 8, "", toks), "salt");
  add(segment_key("fp", DType::kF32, 8, "salu", toks), "salt byte");
  for (size_t i = 0; i < toks.size(); ++i) {
    std::vector<int32_t> t = toks;
    t[i] ^= 1;
    add(segment_key("fp", DType::kF32, 8, "salt", t), "one token");
  }
  std::vector<int32_t> longer = toks;
  longer.push_back(0);
  add(segment_key("fp", DType::kF32, 8, "salt", longer), "an appended 0 token");
  add(segment_key("fp", DType::kF32, 8, "salt", {}), "no tokens");
  // Field boundaries are unambiguous (length-prefixed).
  add(segment_key("fpsalt", DType::kF32, 8, "", toks), "bytes moved from salt to fingerprint");
  add(segment_key("", DType::kF32, 8, "fpsalt", toks), "bytes moved from fingerprint to salt");
}

TEST_F(SegmentEntryFile, RoundTripIsBitExact) {
  for (int seam : {0, 2, 12}) {
    SegmentEntry e = make_entry(10 + uint32_t(seam), seam);
    const std::string p = path("e" + std::to_string(seam));
    ASSERT_TRUE(save_entry(p, e).is_ok());
    Result<SegmentEntry> r = load_entry(p);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    expect_same_entry(*r, e);
    // Loaded tensors are owned, writable copies.
    float* k0 = r->layers[4].find("k")->f32();
    const float was = *k0;
    *k0 = 1.0f;
    // Saving the loaded entry writes the identical file.
    const std::string p2 = path("again");
    ASSERT_TRUE(save_entry(p2, *r).is_ok());
    *k0 = was;
    ASSERT_TRUE(save_entry(p2, *r).is_ok());
    EXPECT_EQ(read_file(p), read_file(p2));
  }
}

TEST_F(SegmentEntryFile, EmptyEntryRoundTrips) {
  SegmentEntry e;
  e.key = "k";
  ASSERT_TRUE(save_entry(path("empty"), e).is_ok());
  Result<SegmentEntry> r = load_entry(path("empty"));
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  expect_same_entry(*r, e);
}

TEST_F(SegmentEntryFile, FileUsesDocumentedNamesAndMetadata) {
  const SegmentEntry e = make_entry(3);
  ASSERT_TRUE(save_entry(path("e"), e).is_ok());
  Result<SafetensorsFile> f = SafetensorsFile::open(path("e"));
  ASSERT_TRUE(f.is_ok());
  for (const char* n : {"layer.1.T", "layer.2.T", "layer.3.T", "layer.0.s0", "layer.0.conv_tail",
                        "layer.3.warm_mixed", "layer.3.warm_g", "layer.3.warm_beta", "layer.4.k",
                        "layer.5.v"})
    EXPECT_TRUE(f->has(n)) << n;
  EXPECT_FALSE(f->has("layer.0.T"));          // identity: nothing stored
  EXPECT_FALSE(f->has("layer.1.conv_tail"));  // absent in the entry
  EXPECT_EQ(f->names().size(), 3u + 4 + 3 + 3 * 2 + 2 * 2);
  EXPECT_EQ(f->find("layer.3.T")->shape, (Shape{2, 4, 4}));
  EXPECT_EQ(f->find("layer.5.k")->dtype, "BF16");
  const auto& m = f->metadata();
  EXPECT_EQ(m.size(), 8u);
  EXPECT_EQ(m.at("format_version"), "2");
  EXPECT_EQ(m.at("key"), e.key);
  EXPECT_EQ(m.at("length"), "12");
  EXPECT_EQ(m.at("seam"), "2");
  EXPECT_EQ(m.at("tokens").size(), 64u);  // base64 of 48 bytes
  EXPECT_EQ(m.at("checksum").rfind("xxh64:", 0), 0u);
  const nlohmann::json layers = nlohmann::json::parse(m.at("layers"));
  ASSERT_EQ(layers.size(), 6u);
  EXPECT_EQ(layers[3], (nlohmann::json{{"mixer", "test_linear"},
                                       {"tensors", nlohmann::json::array({"s0", "conv_tail", "warm_mixed", "warm_g", "warm_beta"})},
                                       {"transition", {{"form", "dense"}, {"nv", 2}, {"dk", 4}}}}));
  EXPECT_EQ(layers[5], (nlohmann::json{{"mixer", "test_attention"}, {"tensors", nlohmann::json::array({"k", "v"})}}));
}

TEST_F(SegmentEntryFile, MissingFileIsNotFound) {
  Result<SegmentEntry> r = load_entry(path("nope"));
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
}

TEST_F(SegmentEntryFile, TruncatedAnywhereIsCorrupt) {
  ASSERT_TRUE(save_entry(path("e"), make_entry(4)).is_ok());
  const std::string bytes = read_file(path("e"));
  for (size_t n = 0; n < bytes.size(); n += (n < 2048 ? 1 : 7)) {
    write_file(path("t"), bytes.substr(0, n));
    expect_corrupt(path("t"), "truncated to " + std::to_string(n) + " bytes");
  }
  write_file(path("t"), bytes + "x");  // trailing bytes: not a file save_entry wrote
  expect_corrupt(path("t"), "one byte appended");
}

TEST_F(SegmentEntryFile, EveryFlippedHeaderByteIsCorrupt) {
  ASSERT_TRUE(save_entry(path("e"), make_entry(5)).is_ok());
  const std::string bytes = read_file(path("e"));
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = hlen << 8 | uint8_t(bytes[size_t(i)]);
  ASSERT_LT(8 + hlen, bytes.size());
  for (size_t i = 0; i < 8 + hlen; ++i) {
    for (uint8_t mask : {uint8_t(0x01), uint8_t(0x80)}) {
      std::string b = bytes;
      b[i] = char(uint8_t(b[i]) ^ mask);
      write_file(path("f"), b);
      expect_corrupt(path("f"), "header byte " + std::to_string(i) + " ^ " + std::to_string(mask));
    }
  }
}

TEST_F(SegmentEntryFile, EveryFlippedDataByteIsCorrupt) {
  ASSERT_TRUE(save_entry(path("e"), make_entry(6)).is_ok());
  const std::string bytes = read_file(path("e"));
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = hlen << 8 | uint8_t(bytes[size_t(i)]);
  for (size_t i = 8 + hlen; i < bytes.size(); ++i) {
    std::string b = bytes;
    b[i] = char(uint8_t(b[i]) ^ (1u << (i % 8)));
    write_file(path("f"), b);
    expect_corrupt(path("f"), "data byte " + std::to_string(i));
  }
}

TEST_F(SegmentEntryFile, RandomMutationsAreCorruptNeverACrash) {
  ASSERT_TRUE(save_entry(path("e"), make_entry(9)).is_ok());
  const std::string bytes = read_file(path("e"));
  std::mt19937 g(99);
  for (int trial = 0; trial < 400; ++trial) {
    std::string b = bytes;
    const int n = 1 + int(g() % 8);
    for (int k = 0; k < n; ++k) {
      const size_t i = g() % b.size();
      b[i] = char(uint8_t(b[i]) ^ uint8_t(1 + g() % 255));  // a real change
    }
    if (g() % 4 == 0) b.resize(g() % b.size());
    if (g() % 8 == 0) b += std::string(g() % 64, char(g()));
    write_file(path("m"), b);
    expect_corrupt(path("m"), "mutation " + std::to_string(trial));
  }
}

// Rewrites a saved entry's file with changed metadata / tensors (checksum left as it was).
void rewrite(const std::string& from, const std::string& to,
             const std::function<void(std::map<std::string, std::string>&,
                                      std::vector<std::pair<std::string, RawTensor>>&)>& edit) {
  Result<SafetensorsFile> f = SafetensorsFile::open(from);
  ASSERT_TRUE(f.is_ok());
  std::map<std::string, std::string> meta = f->metadata();
  std::vector<std::pair<std::string, RawTensor>> ts;
  for (const std::string& n : f->names()) ts.emplace_back(n, f->raw(n).value());
  edit(meta, ts);
  ASSERT_TRUE(write_safetensors_raw(to, ts, meta).is_ok());
}

// An edit of the "layers" metadata (JSON).
std::function<void(std::map<std::string, std::string>&, std::vector<std::pair<std::string, RawTensor>>&)>
layers_edit(std::function<void(nlohmann::json&)> f) {
  return [f](std::map<std::string, std::string>& m, auto&) {
    nlohmann::json j = nlohmann::json::parse(m["layers"]);
    f(j);
    m["layers"] = j.dump();
  };
}

TEST_F(SegmentEntryFile, ForeignAndEditedFilesAreCorrupt) {
  ASSERT_TRUE(save_entry(path("e"), make_entry(7)).is_ok());
  using Meta = std::map<std::string, std::string>;
  using Ts = std::vector<std::pair<std::string, RawTensor>>;
  struct Case {
    const char* what;
    std::function<void(Meta&, Ts&)> edit;
    const char* message;  // expected in the error
  };
  const Case cases[] = {
      {"format version 1", [](Meta& m, Ts&) { m["format_version"] = "1"; }, "format version"},
      {"no format", [](Meta& m, Ts&) { m.erase("format"); }, "missing"},
      {"other format", [](Meta& m, Ts&) { m["format"] = "pytorch"; }, "format"},
      {"extra metadata", [](Meta& m, Ts&) { m["extra"] = "1"; }, "unexpected metadata"},
      {"length", [](Meta& m, Ts&) { m["length"] = "13"; }, "token ids"},
      {"length not a number", [](Meta& m, Ts&) { m["length"] = "12x"; }, "length"},
      {"seam > length", [](Meta& m, Ts&) { m["seam"] = "13"; }, "seam"},
      {"seam", [](Meta& m, Ts&) { m["seam"] = "3"; }, "checksum"},
      {"bad base64", [](Meta& m, Ts&) { m["tokens"][5] = '*'; }, "base64"},
      {"token changed", [](Meta& m, Ts&) { m["tokens"][5] = m["tokens"][5] == 'A' ? 'B' : 'A'; },
       "checksum"},
      {"key changed", [](Meta& m, Ts&) { m["key"] = "other"; }, "checksum"},
      {"checksum", [](Meta& m, Ts&) { m["checksum"] = "xxh64:0000000000000000"; }, "checksum"},
      {"form", layers_edit([](nlohmann::json& j) { j[3]["transition"]["form"] = "log-vector"; }),
       "layer.3.T"},
      {"unknown form", layers_edit([](nlohmann::json& j) { j[0]["transition"]["form"] = "cubic"; }),
       "transition is not"},
      {"layers not JSON", [](Meta& m, Ts&) { m["layers"] = "[{"; }, "JSON"},
      {"layers not a list", [](Meta& m, Ts&) { m["layers"] = "{}"; }, "JSON array"},
      {"fewer layers", layers_edit([](nlohmann::json& j) { j.erase(5); }), "unexpected tensor"},
      {"extra layer field", layers_edit([](nlohmann::json& j) { j[4]["rope"] = true; }),
       "is not {mixer"},
      {"mixer id", layers_edit([](nlohmann::json& j) { j[4]["mixer"] = "Full Attention"; }),
       "mixer id"},
      {"tensor name", layers_edit([](nlohmann::json& j) { j[4]["tensors"][0] = "../k"; }),
       "tensor name"},
      {"tensor listed twice", layers_edit([](nlohmann::json& j) { j[4]["tensors"].push_back("k"); }),
       "appears twice"},
      {"tensor not listed", layers_edit([](nlohmann::json& j) { j[0]["tensors"].erase(0); }),
       "unexpected tensor 'layer.0.s0'"},
      {"extra tensor", [](Meta&, Ts& t) { t.push_back({"layer.9.s0", t[0].second}); },
       "unexpected tensor"},
      {"missing T", [](Meta&, Ts& t) {
         std::erase_if(t, [](const auto& p) { return p.first == "layer.2.T"; }); },
       "missing"},
      {"missing listed tensor", [](Meta&, Ts& t) {
         std::erase_if(t, [](const auto& p) { return p.first == "layer.0.s0"; }); },
       "'layer.0.s0' is missing"},
      {"T reshaped", [](Meta&, Ts& t) {
         for (auto& [n, r] : t) if (n == "layer.3.T") r.shape = {4, 2, 4}; }, "expected F32"},
      {"s0 reshaped", [](Meta&, Ts& t) {
         for (auto& [n, r] : t) if (n == "layer.1.s0") r.shape = {4, 2, 3}; }, "checksum"},
      {"k as integers", [](Meta&, Ts& t) {
         for (auto& [n, r] : t) if (n == "layer.4.k") r.dtype = "I32"; }, "dtype"},
      {"v relabelled f16", [](Meta&, Ts& t) {
         for (auto& [n, r] : t) if (n == "layer.5.v") r.dtype = "F16"; }, "checksum"},
  };
  for (const Case& c : cases) {
    rewrite(path("e"), path("x"), c.edit);
    Result<SegmentEntry> r = load_entry(path("x"));
    ASSERT_FALSE(r.is_ok()) << c.what;
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt) << c.what;
    EXPECT_NE(r.status().message().find(c.message), std::string::npos)
        << c.what << ": " << r.status().message();
  }
  // A file that is not a safetensors file at all.
  write_file(path("x"), std::string(100, 'z'));
  expect_corrupt(path("x"), "garbage");
}

// The wire form with its header edited as text (tensor data kept; checksum left as it was).
std::string with_header_text(const std::string& bytes,
                             const std::function<void(std::string&)>& edit) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | uint8_t(bytes[size_t(i)]);
  std::string h = bytes.substr(8, size_t(n));
  edit(h);
  std::string out;
  for (int i = 0; i < 8; ++i) out += char(uint8_t(uint64_t(h.size()) >> (8 * i)));
  return out + h + bytes.substr(8 + size_t(n));
}

TEST_F(SegmentEntryFile, WireFormDamageFoundByFuzzingIsCorrupt) {
  const std::string good = serialize_entry(make_entry(3)).value();
  auto expect_corrupt_bytes = [](const std::string& b, const std::string& message) {
    Result<SegmentEntry> r = deserialize_entry(b);
    ASSERT_FALSE(r.is_ok()) << message;
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt) << r.status().to_string();
    EXPECT_NE(r.status().message().find(message), std::string::npos) << r.status().message();
  };
  auto edit_json = [&](const std::function<void(nlohmann::json&)>& f) {
    return with_header_text(good, [&](std::string& h) {
      nlohmann::json j = nlohmann::json::parse(h);
      f(j);
      h = j.dump();
    });
  };
  // A shape whose element count overflows 64 bits, hidden by a later zero dimension.
  expect_corrupt_bytes(edit_json([](nlohmann::json& j) {
                         j["layer.4.k"]["shape"] = {int64_t(1) << 40, int64_t(1) << 40, 0};
                         j["layer.4.k"]["data_offsets"] = {0, 0};
                       }),
                       "more than 2^64 bytes");
  // Values nested a million levels deep are quoted in messages without recursing into them.
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  expect_corrupt_bytes(with_header_text(good,
                                        [&](std::string& h) {
                                          const size_t at = h.find("\"shape\":[") + 9;
                                          h.insert(at, deep + ",");
                                        }),
                       "nested more than");
  expect_corrupt_bytes(edit_json([&](nlohmann::json& j) { j["__metadata__"]["layers"] = deep; }),
                       "nested more than");
}

TEST_F(SegmentEntryFile, LayersOfZeroHeadsRoundTrip) {
  // Empty transitions (nv = 0) have no data: hashing them must not read through a null pointer.
  SegmentEntry e;
  e.key = "k";
  for (auto f : {kernels::TransitionForm::kLogScalar, kernels::TransitionForm::kLogVector,
                 kernels::TransitionForm::kDense}) {
    SegmentEntry::Layer l;
    l.mixer = "test_linear";
    l.T = kernels::Transition::identity(f, 0, 0);
    l.put("s0", Tensor::zeros_f32({0, 0, 3}));
    e.layers.push_back(std::move(l));
  }
  Result<std::string> b = serialize_entry(e);
  ASSERT_TRUE(b.is_ok()) << b.status().to_string();
  Result<SegmentEntry> r = deserialize_entry(*b);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  expect_same_entry(*r, e);
  Result<std::string> again = serialize_entry(*r);
  ASSERT_TRUE(again.is_ok());
  EXPECT_EQ(*again, *b);
}

TEST_F(SegmentEntryFile, SaveRejectsInconsistentEntries) {
  struct Case {
    const char* what;
    std::function<void(SegmentEntry&)> edit;
  };
  const Case cases[] = {
      {"token count", [](SegmentEntry& e) { e.tokens.pop_back(); }},
      {"seam > length", [](SegmentEntry& e) { e.seam = 13; }},
      {"T size", [](SegmentEntry& e) { e.layers[3].T->data.pop_back(); }},
      {"identity with data", [](SegmentEntry& e) { e.layers[0].T->data = {1.0f}; }},
      {"T sizes", [](SegmentEntry& e) { e.layers[1].T->nv = -1; }},
      {"empty tensor", [](SegmentEntry& e) { e.layers[2].put("warm_g", Tensor()); }},
      {"no mixer id", [](SegmentEntry& e) { e.layers[4].mixer.clear(); }},
      {"tensor name", [](SegmentEntry& e) { e.layers[4].put("K", Tensor::zeros_f32({1})); }},
      {"tensor twice", [](SegmentEntry& e) { e.layers[4].tensors.push_back(e.layers[4].tensors[0]); }},
  };
  for (const Case& c : cases) {
    SegmentEntry e = make_entry(8);
    c.edit(e);
    Status s = save_entry(path("bad"), e);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.what;
    EXPECT_FALSE(std::filesystem::exists(path("bad"))) << c.what;
  }
}

}  // namespace
}  // namespace hypic
