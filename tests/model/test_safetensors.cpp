// safetensors reader/writer and Checkpoint: round trips, every header corruption, shards.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "checkpoint/checkpoint.h"
#include "checkpoint/safetensors.h"
#include "core/log.h"

namespace hypic {
namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(::testing::TempDir()) / "hypic_st_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (fs::path(dir_) / name).string(); }

  std::string dir_;
};

// Random bit patterns, so that NaN payloads, -0, infinities and subnormals all round trip.
Tensor random_bits(DType t, Shape shape, uint32_t seed) {
  Tensor x = Tensor::zeros(t, std::move(shape));
  std::mt19937 rng(seed);
  auto* p = static_cast<uint8_t*>(x.raw());
  for (size_t i = 0; i < x.nbytes(); ++i) p[i] = uint8_t(rng());
  return x;
}

std::vector<uint8_t> read_bytes(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::string& p, const std::vector<uint8_t>& b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

// A file with a hand-written header and `data_bytes` zero bytes of data.
void write_with_header(const std::string& p, const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> b(8);
  for (int i = 0; i < 8; ++i) b[i] = uint8_t(uint64_t(header.size()) >> (8 * i));
  b.insert(b.end(), header.begin(), header.end());
  b.resize(b.size() + data_bytes, 0);
  write_bytes(p, b);
}

uint64_t header_len(const std::vector<uint8_t>& b) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | b[i];
  return n;
}

void set_header_len(std::vector<uint8_t>& b, uint64_t n) {
  for (int i = 0; i < 8; ++i) b[i] = uint8_t(n >> (8 * i));
}

#define EXPECT_ERROR(expr, want_code, ...)                                                   \
  do {                                                                                  \
    auto _r = (expr);                                                                   \
    ASSERT_FALSE(_r.is_ok()) << #expr " unexpectedly succeeded";                        \
    EXPECT_EQ(_r.status().code(), want_code) << _r.status().to_string();                     \
    for (const std::string& _s : std::vector<std::string>{__VA_ARGS__})                 \
      EXPECT_NE(_r.status().message().find(_s), std::string::npos)                      \
          << "message lacks '" << _s << "': " << _r.status().message();                 \
  } while (0)

// ---------------------------------------------------------------------------------------
// Round trips

TEST_F(SafetensorsTest, RoundTripEveryFloatDTypeBitExact) {
  const std::vector<std::pair<std::string, Tensor>> tensors = {
      {"w.f32", random_bits(DType::kF32, {7, 5}, 1)},
      {"w.bf16", random_bits(DType::kBF16, {3, 1, 9}, 2)},
      {"w.f16", random_bits(DType::kF16, {11}, 3)},
      {"scalar", random_bits(DType::kF32, {}, 4)},
      {"empty", Tensor::zeros(DType::kBF16, {0, 4})},
  };
  const std::string p = path("model.safetensors");
  ASSERT_TRUE(write_safetensors(p, tensors, {{"format", "pt"}, {"note", "hi"}}).is_ok());

  auto f = SafetensorsFile::open(p);
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  EXPECT_EQ(f->entries().size(), tensors.size());
  EXPECT_EQ(f->metadata().at("format"), "pt");
  EXPECT_EQ(f->metadata().at("note"), "hi");
  for (const auto& [name, want] : tensors) {
    auto got = f->tensor(name);
    ASSERT_TRUE(got.is_ok()) << got.status().to_string();
    EXPECT_EQ(got->dtype(), want.dtype()) << name;
    EXPECT_EQ(got->shape(), want.shape()) << name;
    ASSERT_EQ(got->nbytes(), want.nbytes()) << name;
    EXPECT_EQ(std::memcmp(got->raw(), want.raw(), want.nbytes()), 0) << name;
    EXPECT_EQ(f->find(name)->dtype, safetensors_dtype_name(want.dtype()));
  }
}

TEST_F(SafetensorsTest, LayoutIsAlignedAndContiguous) {
  const std::string p = path("a.safetensors");
  ASSERT_TRUE(write_safetensors(p, {{"odd", random_bits(DType::kBF16, {3}, 1)},
                                    {"f", random_bits(DType::kF32, {5}, 2)},
                                    {"h", random_bits(DType::kF16, {1}, 3)}})
                  .is_ok());
  auto f = SafetensorsFile::open(p);
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  EXPECT_EQ(f->data_offset() % 8, 0u);
  uint64_t expect_begin = 0;
  for (const SafetensorsEntry& e : f->entries()) {
    EXPECT_EQ(e.begin, expect_begin) << e.name;  // no gaps: the reference reader needs that
    EXPECT_EQ(e.begin % e.element_size, 0u) << e.name;
    expect_begin = e.end;
  }
  EXPECT_EQ(expect_begin, f->data_size());
  EXPECT_EQ(f->entries().front().name, "f");  // 4-byte elements first
}

TEST_F(SafetensorsTest, ViewsAreZeroCopyAndOutliveTheFileObject) {
  const std::string p = path("a.safetensors");
  Tensor w = random_bits(DType::kF32, {16, 16}, 7);
  ASSERT_TRUE(write_safetensors(p, {{"w", w}}).is_ok());
  Tensor view;
  {
    auto f = SafetensorsFile::open(p);
    ASSERT_TRUE(f.is_ok());
    auto raw = f->raw("w");
    ASSERT_TRUE(raw.is_ok());
    auto t = f->tensor("w");
    ASSERT_TRUE(t.is_ok());
    EXPECT_EQ(t->raw(), static_cast<const void*>(raw->bytes.data()));  // no copy
    view = *t;
  }
  EXPECT_EQ(std::memcmp(view.raw(), w.raw(), w.nbytes()), 0);  // mapping still alive
}

TEST_F(SafetensorsTest, MisalignedTensorIsCopied) {
  // Header not padded to a multiple of 8: the F32 data starts at an odd file offset.
  const std::string header = R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})";
  ASSERT_NE((8 + header.size()) % 4, 0u);
  const std::string p = path("odd.safetensors");
  write_with_header(p, header, 0);
  const float vals[2] = {1.25f, -3.5f};
  {
    std::ofstream out(p, std::ios::binary | std::ios::app);
    out.write(reinterpret_cast<const char*>(vals), 8);
  }
  auto f = SafetensorsFile::open(p);
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  auto t = f->tensor("t");
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t->raw()) % 4, 0u);
  EXPECT_EQ(t->f32()[0], 1.25f);
  EXPECT_EQ(t->f32()[1], -3.5f);
}

TEST_F(SafetensorsTest, OtherDTypesAreListedAndReadableAsRawBytes) {
  const std::vector<int64_t> i64 = {-1, 2, std::numeric_limits<int64_t>::max()};
  const std::vector<uint8_t> u8 = {1, 2, 3, 4, 5};
  const std::vector<uint8_t> flags = {1, 0, 1};
  const std::vector<uint8_t> fp8 = {0x38, 0xb8};
  const std::vector<double> f64 = {1.5, -2.25};
  auto span_of = [](const auto& v) {
    return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()),
                                    v.size() * sizeof(v[0]));
  };
  const std::string p = path("mixed.safetensors");
  ASSERT_TRUE(write_safetensors_raw(p, {{"ids", {"I64", {3}, span_of(i64), nullptr}},
                                        {"bytes", {"U8", {5}, span_of(u8), nullptr}},
                                        {"mask", {"BOOL", {3}, span_of(flags), nullptr}},
                                        {"q", {"F8_E4M3", {2}, span_of(fp8), nullptr}},
                                        {"d", {"F64", {2, 1}, span_of(f64), nullptr}}})
                  .is_ok());
  auto f = SafetensorsFile::open(p);
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  EXPECT_EQ(f->names().size(), 5u);
  auto ids = f->raw("ids");
  ASSERT_TRUE(ids.is_ok());
  EXPECT_EQ(ids->dtype, "I64");
  ASSERT_EQ(ids->bytes.size(), 24u);
  EXPECT_EQ(std::memcmp(ids->bytes.data(), i64.data(), 24), 0);
  auto d = f->raw("d");
  ASSERT_TRUE(d.is_ok());
  EXPECT_EQ(d->shape, (Shape{2, 1}));
  EXPECT_EQ(std::memcmp(d->bytes.data(), f64.data(), 16), 0);
  EXPECT_FALSE(f->find("q")->float_dtype.has_value());
  EXPECT_ERROR(f->tensor("ids"), StatusCode::kUnsupported, "'ids'", p, "I64", "raw bytes");
  EXPECT_ERROR(f->tensor("q"), StatusCode::kUnsupported, "F8_E4M3");
  EXPECT_ERROR(f->tensor("nope"), StatusCode::kNotFound, "'nope'", p);
}

TEST_F(SafetensorsTest, WriteReplacesAtomicallyAndLeavesNoTempFiles) {
  const std::string p = path("model.safetensors");
  ASSERT_TRUE(write_safetensors(p, {{"a", random_bits(DType::kF32, {4}, 1)}}).is_ok());
  Tensor b = random_bits(DType::kF16, {8}, 2);
  ASSERT_TRUE(write_safetensors(p, {{"b", b}}).is_ok());
  auto f = SafetensorsFile::open(p);
  ASSERT_TRUE(f.is_ok());
  EXPECT_FALSE(f->has("a"));
  EXPECT_TRUE(f->has("b"));
  int n_files = 0;
  for (const auto& de : fs::directory_iterator(dir_)) {
    ++n_files;
    EXPECT_EQ(de.path().filename(), "model.safetensors");
  }
  EXPECT_EQ(n_files, 1);
}

TEST_F(SafetensorsTest, WriterRejectsBadInput) {
  const std::string p = path("x.safetensors");
  Tensor t = Tensor::zeros_f32({2});
  EXPECT_EQ(write_safetensors(p, {{"a", t}, {"a", t}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(write_safetensors(p, {{"__metadata__", t}}).code(), StatusCode::kInvalidArgument);
  const uint8_t bytes[3] = {};
  EXPECT_EQ(write_safetensors_raw(p, {{"a", {"I32", {1}, {bytes, 3}, nullptr}}}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(write_safetensors_raw(p, {{"a", {"Q4", {3}, {bytes, 3}, nullptr}}}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(write_safetensors(path("no/such/dir/x.safetensors"), {{"a", t}}).code(),
            StatusCode::kIoError);
  EXPECT_FALSE(fs::exists(p));
}

// ---------------------------------------------------------------------------------------
// Corruption: every case gives the right error and names the file (and tensor).

class SafetensorsCorruption : public SafetensorsTest {
 protected:
  void SetUp() override {
    SafetensorsTest::SetUp();
    good_ = path("good.safetensors");
    ASSERT_TRUE(write_safetensors(good_, {{"alpha", random_bits(DType::kF32, {4, 4}, 1)},
                                          {"beta", random_bits(DType::kBF16, {8}, 2)}})
                    .is_ok());
    bytes_ = read_bytes(good_);
  }
  // Writes `b` as bad.safetensors and opens it.
  Result<SafetensorsFile> open_patched(const std::vector<uint8_t>& b) {
    write_bytes(bad(), b);
    return SafetensorsFile::open(bad());
  }
  Result<SafetensorsFile> open_header(const std::string& header, size_t data_bytes) {
    write_with_header(bad(), header, data_bytes);
    return SafetensorsFile::open(bad());
  }
  std::string bad() const { return path("bad.safetensors"); }

  std::string good_;
  std::vector<uint8_t> bytes_;
};

TEST_F(SafetensorsCorruption, GoodFileOpens) {
  ASSERT_TRUE(SafetensorsFile::open(good_).is_ok());
}

TEST_F(SafetensorsCorruption, MissingOrUnreadableFile) {
  EXPECT_ERROR(SafetensorsFile::open(path("absent.safetensors")), StatusCode::kNotFound,
               path("absent.safetensors"));
  EXPECT_ERROR(SafetensorsFile::open(dir_), StatusCode::kIoError, dir_);
}

TEST_F(SafetensorsCorruption, ShorterThanEightBytes) {
  for (size_t n : {0, 1, 7}) {
    std::vector<uint8_t> b(bytes_.begin(), bytes_.begin() + n);
    EXPECT_ERROR(open_patched(b), StatusCode::kCorrupt, bad(), "8-byte");
  }
}

TEST_F(SafetensorsCorruption, HeaderLengthBeyondFile) {
  std::vector<uint8_t> b(bytes_.begin(), bytes_.begin() + 8 + header_len(bytes_) / 2);
  EXPECT_ERROR(open_patched(b), StatusCode::kCorrupt, bad(), "truncated");
  b = bytes_;
  set_header_len(b, b.size());  // one more than there is
  EXPECT_ERROR(open_patched(b), StatusCode::kCorrupt, bad(), "exceeds");
}

TEST_F(SafetensorsCorruption, AbsurdHeaderLength) {
  std::vector<uint8_t> b = bytes_;
  set_header_len(b, 100'000'001);
  EXPECT_ERROR(open_patched(b), StatusCode::kCorrupt, bad(), "100 MB");
  set_header_len(b, ~uint64_t(0));
  EXPECT_ERROR(open_patched(b), StatusCode::kCorrupt, bad(), "100 MB");
}

TEST_F(SafetensorsCorruption, InvalidJson) {
  std::vector<uint8_t> b = bytes_;
  b[8] = 'x';  // the opening brace
  EXPECT_ERROR(open_patched(b), StatusCode::kCorrupt, bad(), "not valid JSON");
  b = bytes_;
  b[8 + header_len(b) / 2] = 0xff;  // invalid UTF-8 in the middle
  EXPECT_ERROR(open_patched(b), StatusCode::kCorrupt, bad());
  EXPECT_ERROR(open_header("[1, 2]", 0), StatusCode::kCorrupt, "not an object");
  EXPECT_ERROR(open_header(R"({"__metadata__": 3})", 0), StatusCode::kCorrupt, "__metadata__");
  EXPECT_ERROR(open_header(R"({"t": [1]})", 0), StatusCode::kCorrupt, "'t'", "not an object");
}

TEST_F(SafetensorsCorruption, EntryMissingFields) {
  EXPECT_ERROR(open_header(R"({"t": {"shape": [2], "data_offsets": [0, 8]}})", 8),
               StatusCode::kCorrupt, bad(), "'t'", "dtype");
  EXPECT_ERROR(open_header(R"({"t": {"dtype": "F32", "data_offsets": [0, 8]}})", 8),
               StatusCode::kCorrupt, bad(), "'t'", "shape");
  EXPECT_ERROR(open_header(R"({"t": {"dtype": "F32", "shape": [2]}})", 8),
               StatusCode::kCorrupt, bad(), "'t'", "data_offsets");
  EXPECT_ERROR(open_header(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", 8),
               StatusCode::kCorrupt, "'t'", "data_offsets");
  EXPECT_ERROR(open_header(R"({"t": {"dtype": 7, "shape": [2], "data_offsets": [0, 8]}})", 8),
               StatusCode::kCorrupt, "'t'", "dtype");
  EXPECT_ERROR(open_header(R"({"t": {"dtype": "F32", "shape": [2.5], "data_offsets": [0, 8]}})",
                           8),
               StatusCode::kCorrupt, "'t'", "not an integer");
}

TEST_F(SafetensorsCorruption, UnknownDType) {
  EXPECT_ERROR(open_header(R"({"t": {"dtype": "Q4_K", "shape": [2], "data_offsets": [0, 2]}})",
                           2),
               StatusCode::kUnsupported, bad(), "'t'", "Q4_K");
}

TEST_F(SafetensorsCorruption, NegativeDimension) {
  EXPECT_ERROR(
      open_header(R"({"t": {"dtype": "F32", "shape": [2, -1], "data_offsets": [0, 8]}})", 8),
      StatusCode::kCorrupt, bad(), "'t'", "negative dimension -1");
}

TEST_F(SafetensorsCorruption, OffsetsOutOfDataSectionOrReversed) {
  EXPECT_ERROR(open_header(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 7),
               StatusCode::kCorrupt, bad(), "'t'", "past the data section");
  EXPECT_ERROR(open_header(R"({"t": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})", 8),
               StatusCode::kCorrupt, bad(), "'t'", "reversed");
  EXPECT_ERROR(open_header(R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]}})", 8),
               StatusCode::kCorrupt, "'t'", "non-negative");
  // A good file whose data section lost its tail.
  std::vector<uint8_t> b(bytes_.begin(), bytes_.end() - 3);
  EXPECT_ERROR(open_patched(b), StatusCode::kCorrupt, bad(), "past the data section");
}

TEST_F(SafetensorsCorruption, ByteSizeDisagreesWithShape) {
  EXPECT_ERROR(open_header(R"({"t": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 8]}})",
                           8),
               StatusCode::kCorrupt, bad(), "'t'", "needs 6");
  // numel × size overflows 64 bits.
  EXPECT_ERROR(open_header(R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296],
                                     "data_offsets": [0, 8]}})",
                           8),
               StatusCode::kCorrupt, "'t'");
}

TEST_F(SafetensorsCorruption, OverlappingTensors) {
  EXPECT_ERROR(open_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                               "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                           12),
               StatusCode::kCorrupt, bad(), "'a'", "'b'", "overlap");
  // Zero-size tensors may sit anywhere.
  EXPECT_TRUE(open_header(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                              "z": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]}})",
                          8)
                  .is_ok());
}

TEST_F(SafetensorsCorruption, RandomByteFlipsNeverCrash) {
  std::mt19937 rng(123);
  const size_t hn = 8 + header_len(bytes_);
  for (int i = 0; i < 300; ++i) {
    std::vector<uint8_t> b = bytes_;
    b[rng() % hn] ^= uint8_t(1u << (rng() % 8));
    auto r = open_patched(b);
    if (r.is_ok())  // a harmless flip (e.g. in a name); reading must still be in bounds
      for (const auto& e : r->entries()) (void)r->raw(e.name);
  }
}

TEST_F(SafetensorsCorruption, DeeplyNestedValuesAreErrorsNotStackOverflows) {
  // Messages quote offending values and non-string metadata is kept as JSON text: neither
  // may dump a value nested a million levels deep (dump() recurses once per level).
  const std::string deep = std::string(1000000, '[') + std::string(1000000, ']');
  EXPECT_ERROR(open_header(R"({"__metadata__": {"a": )" + deep + "}}", 0),
               StatusCode::kCorrupt, bad(), "'a'", "nested");
  EXPECT_ERROR(open_header(R"({"t": {"dtype": "F32", "shape": [)" + deep +
                               R"(], "data_offsets": [0, 0]}})",
                           0),
               StatusCode::kCorrupt, "'t'", "not an integer", "nested more than");
  EXPECT_ERROR(open_header(R"({"t": {"dtype": "F32", "shape": [0], "data_offsets": [)" + deep +
                               ", 0]}}",
                           0),
               StatusCode::kCorrupt, "'t'", "data_offsets", "nested more than");
  // Shallow non-string metadata is still kept as its JSON text.
  auto r = open_header(R"({"__metadata__": {"a": [1, {"b": null}]}})", 0);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  EXPECT_EQ(r->metadata().at("a"), R"([1,{"b":null}])");
}

TEST_F(SafetensorsCorruption, FromBytesValidatesLikeOpen) {
  const std::string image(bytes_.begin(), bytes_.end());
  Result<SafetensorsFile> f = SafetensorsFile::from_bytes(image, "mem.safetensors");
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  Result<SafetensorsFile> g = SafetensorsFile::open(good_);
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ(f->path(), "mem.safetensors");
  EXPECT_EQ(f->file_size(), g->file_size());
  EXPECT_EQ(f->data_offset(), g->data_offset());
  EXPECT_EQ(f->names(), g->names());
  for (const std::string& name : g->names()) {
    Result<Tensor> a = f->tensor(name), b = g->tensor(name);
    ASSERT_TRUE(a.is_ok() && b.is_ok());
    ASSERT_EQ(a->shape(), b->shape());
    EXPECT_EQ(std::memcmp(a->raw(), b->raw(), b->nbytes()), 0) << name;
  }
  // The same errors, naming the given name.
  EXPECT_ERROR(SafetensorsFile::from_bytes(image.substr(0, 7), "mem"), StatusCode::kCorrupt,
               "'mem'", "8-byte");
  EXPECT_ERROR(SafetensorsFile::from_bytes(image.substr(0, image.size() - 3), "mem"),
               StatusCode::kCorrupt, "'mem'", "past the data section");
}

// ---------------------------------------------------------------------------------------
// Checkpoint

using CheckpointTest = SafetensorsTest;

void write_index(const std::string& p, const std::vector<std::pair<std::string, std::string>>& m) {
  std::string s = R"({"metadata": {"total_size": 0}, "weight_map": {)";
  for (size_t i = 0; i < m.size(); ++i)
    s += (i ? ", " : "") + ("\"" + m[i].first + "\": \"" + m[i].second + "\"");
  s += "}}";
  std::ofstream(p) << s;
}

TEST_F(CheckpointTest, SingleFile) {
  Tensor a = random_bits(DType::kBF16, {4, 6}, 1);
  ASSERT_TRUE(write_safetensors(path("model.safetensors"), {{"a", a}}).is_ok());
  std::ofstream(path("config.json")) << "{}";
  auto ck = Checkpoint::open(dir_);
  ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
  EXPECT_EQ(ck->names(), std::vector<std::string>{"a"});
  EXPECT_TRUE(ck->has("a"));
  EXPECT_FALSE(ck->has("b"));
  EXPECT_EQ(ck->total_bytes(), a.nbytes());
  auto t = ck->get("a", {4, 6});
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(std::memcmp(t->raw(), a.raw(), a.nbytes()), 0);
  EXPECT_ERROR(ck->get("b", {1}), StatusCode::kNotFound, "'b'", dir_);
  // A single file may be given directly.
  auto ck2 = Checkpoint::open(path("model.safetensors"));
  ASSERT_TRUE(ck2.is_ok()) << ck2.status().to_string();
  EXPECT_TRUE(ck2->has("a"));
}

TEST_F(CheckpointTest, ShapeMismatchMessage) {
  ASSERT_TRUE(write_safetensors(path("model.safetensors"),
                                {{"model.embed_tokens.weight", Tensor::zeros_f32({2, 3})}})
                  .is_ok());
  auto ck = Checkpoint::open(dir_);
  ASSERT_TRUE(ck.is_ok());
  auto r = ck->get("model.embed_tokens.weight", {3, 2});
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  const std::string want = "tensor 'model.embed_tokens.weight' in file '" +
                           path("model.safetensors") +
                           "' has shape [2, 3], config implies [3, 2]";
  EXPECT_EQ(r.status().message().rfind(want, 0), 0u) << r.status().message();
  EXPECT_TRUE(ck->get_unchecked("model.embed_tokens.weight").is_ok());
}

TEST_F(CheckpointTest, ShardedIndexRoundTrip) {
  Tensor a = random_bits(DType::kBF16, {8, 4}, 1), b = random_bits(DType::kF32, {3}, 2),
         c = random_bits(DType::kF16, {2, 2}, 3);
  const std::vector<uint8_t> ids = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::string s1 = "model-00001-of-00002.safetensors";
  const std::string s2 = "model-00002-of-00002.safetensors";
  ASSERT_TRUE(write_safetensors(path(s1), {{"a", a}, {"b", b}}).is_ok());
  ASSERT_TRUE(write_safetensors_raw(
                  path(s2), {{"c", {"F16", {2, 2}, {static_cast<const uint8_t*>(c.raw()), 8},
                                    nullptr}},
                             {"ids", {"I64", {1}, {ids.data(), 8}, nullptr}}})
                  .is_ok());
  write_index(path("model.safetensors.index.json"),
              {{"a", s1}, {"b", s1}, {"c", s2}, {"ids", s2}});

  std::vector<CheckpointProgress> events;
  auto ck = Checkpoint::open(dir_, [&](const CheckpointProgress& p) { events.push_back(p); });
  ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
  EXPECT_EQ(ck->names(), (std::vector<std::string>{"a", "b", "c", "ids"}));
  EXPECT_EQ(ck->files().size(), 2u);
  EXPECT_EQ(*ck->file_of("c"), path(s2));
  EXPECT_EQ(ck->total_bytes(), a.nbytes() + b.nbytes() + c.nbytes() + 8);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].stage, CheckpointProgress::Stage::kOpenShard);
  EXPECT_EQ(events[1].done_items, 2u);
  EXPECT_EQ(events[1].done_bytes, events[1].total_bytes);

  events.clear();
  ck->set_progress_callback([&](const CheckpointProgress& p) { events.push_back(p); });
  for (const auto& [name, want] :
       std::vector<std::pair<std::string, Tensor>>{{"a", a}, {"b", b}, {"c", c}}) {
    auto t = ck->get(name, want.shape());
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    EXPECT_EQ(t->dtype(), want.dtype());
    EXPECT_EQ(std::memcmp(t->raw(), want.raw(), want.nbytes()), 0) << name;
  }
  ASSERT_TRUE(ck->get("a", {8, 4}).is_ok());  // fetched twice, counted once
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[2].stage, CheckpointProgress::Stage::kLoadTensor);
  EXPECT_EQ(events[2].item, "c");
  EXPECT_EQ(events[2].done_bytes, a.nbytes() + b.nbytes() + c.nbytes());
  EXPECT_EQ(events[2].total_items, 4u);

  EXPECT_ERROR(ck->get("ids", {1}), StatusCode::kUnsupported, "'ids'", s2, "I64");
  auto raw = ck->get_raw("ids");
  ASSERT_TRUE(raw.is_ok());
  EXPECT_EQ(std::memcmp(raw->bytes.data(), ids.data(), 8), 0);
}

TEST_F(CheckpointTest, MissingShard) {
  ASSERT_TRUE(write_safetensors(path("s1.safetensors"), {{"a", Tensor::zeros_f32({1})}}).is_ok());
  write_index(path("model.safetensors.index.json"), {{"a", "s1.safetensors"},
                                                    {"b", "s2.safetensors"}});
  EXPECT_ERROR(Checkpoint::open(dir_), StatusCode::kNotFound, "s2.safetensors", "'b'");
}

TEST_F(CheckpointTest, IndexNamesTensorMissingFromShard) {
  ASSERT_TRUE(write_safetensors(path("s1.safetensors"), {{"a", Tensor::zeros_f32({1})}}).is_ok());
  write_index(path("model.safetensors.index.json"), {{"a", "s1.safetensors"},
                                                    {"ghost", "s1.safetensors"}});
  EXPECT_ERROR(Checkpoint::open(dir_), StatusCode::kCorrupt, "'ghost'", "s1.safetensors");
}

TEST_F(CheckpointTest, BadIndex) {
  ASSERT_TRUE(write_safetensors(path("s1.safetensors"), {{"a", Tensor::zeros_f32({1})}}).is_ok());
  std::ofstream(path("model.safetensors.index.json")) << R"({"weight_map": )";
  EXPECT_ERROR(Checkpoint::open(dir_), StatusCode::kCorrupt, "model.safetensors.index.json");
  std::ofstream(path("model.safetensors.index.json")) << R"({"metadata": {}})";
  EXPECT_ERROR(Checkpoint::open(dir_), StatusCode::kCorrupt, "weight_map");
}

TEST_F(CheckpointTest, CorruptShardIsNamed) {
  ASSERT_TRUE(write_safetensors(path("s1.safetensors"), {{"a", Tensor::zeros_f32({1})}}).is_ok());
  write_bytes(path("s2.safetensors"), {1, 2, 3});
  write_index(path("model.safetensors.index.json"), {{"a", "s1.safetensors"},
                                                    {"b", "s2.safetensors"}});
  EXPECT_ERROR(Checkpoint::open(dir_), StatusCode::kCorrupt, path("s2.safetensors"));
}

TEST_F(CheckpointTest, WithoutIndexGlobsShardsAndRejectsDuplicates) {
  ASSERT_TRUE(write_safetensors(path("part-a.safetensors"), {{"x", Tensor::zeros_f32({2})}})
                  .is_ok());
  ASSERT_TRUE(write_safetensors(path("part-b.safetensors"), {{"y", Tensor::zeros_f32({3})}})
                  .is_ok());
  auto ck = Checkpoint::open(dir_);
  ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
  EXPECT_EQ(ck->names(), (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(ck->get("y", {3}).is_ok());

  ASSERT_TRUE(write_safetensors(path("part-c.safetensors"), {{"x", Tensor::zeros_f32({2})}})
                  .is_ok());
  EXPECT_ERROR(Checkpoint::open(dir_), StatusCode::kCorrupt, "'x'", "part-a.safetensors",
               "part-c.safetensors");
}

TEST_F(CheckpointTest, DuplicateAcrossIndexedShards) {
  ASSERT_TRUE(write_safetensors(path("s1.safetensors"), {{"a", Tensor::zeros_f32({1})}}).is_ok());
  ASSERT_TRUE(write_safetensors(path("s2.safetensors"), {{"a", Tensor::zeros_f32({1})},
                                                         {"b", Tensor::zeros_f32({1})}})
                  .is_ok());
  write_index(path("model.safetensors.index.json"), {{"a", "s1.safetensors"},
                                                    {"b", "s2.safetensors"}});
  EXPECT_ERROR(Checkpoint::open(dir_), StatusCode::kCorrupt, "'a'", "s1.safetensors",
               "s2.safetensors");
}

TEST_F(CheckpointTest, LargeCheckpointLogsOpeningProgress) {
  // A sparse 1.5 GiB shard: mapped, never read.
  const uint64_t n = (uint64_t(3) << 29) / 2;  // BF16 elements
  const std::string p = path("model.safetensors");
  std::string header = R"({"big": {"dtype": "BF16", "shape": [)" + std::to_string(n) +
                       R"(], "data_offsets": [0, )" + std::to_string(2 * n) + "]}}";
  header.append((8 - header.size() % 8) % 8, ' ');  // aligned, so get() does not copy
  write_with_header(p, header, 0);
  fs::resize_file(p, fs::file_size(p) + 2 * n);
  const LogLevel old = log_level();
  set_log_level(LogLevel::kInfo);
  ::testing::internal::CaptureStderr();
  uint64_t reported = 0;
  auto ck = Checkpoint::open(dir_, [&](const CheckpointProgress& pr) { reported = pr.done_bytes; });
  const std::string log = ::testing::internal::GetCapturedStderr();
  set_log_level(old);
  ASSERT_TRUE(ck.is_ok()) << ck.status().to_string();
  EXPECT_EQ(ck->total_bytes(), 2 * n);
  EXPECT_EQ(reported, fs::file_size(p));
  EXPECT_NE(log.find("validated 1/1 shards"), std::string::npos) << log;
  EXPECT_NE(log.find("(100%)"), std::string::npos) << log;
  auto t = ck->get("big", {int64_t(n)});
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_EQ(t->u16()[n - 1], 0);  // the tail reads as zeros
}

TEST_F(CheckpointTest, NoWeights) {
  EXPECT_ERROR(Checkpoint::open(dir_), StatusCode::kNotFound, dir_, "model.safetensors");
  EXPECT_ERROR(Checkpoint::open(path("nope")), StatusCode::kNotFound, "nope");
  std::ofstream(path("config.json")) << "{}";
  EXPECT_ERROR(Checkpoint::open(path("config.json")), StatusCode::kInvalidArgument,
               "config.json");
}

}  // namespace
}  // namespace hypic
