// GGUF reader (checkpoint/gguf.h): the fixture written by llama.cpp's own Python writer
// (tools/make_gguf_fixtures.py) read back — metadata of every value type, tensor index,
// every block format hypic reads decoded exactly as gguf-py's reference dequantization — and
// every kind of damaged header refused with a message, never a crash. (The tokenizer a
// GGUF file carries: tests/engine/test_gguf_tokenizer.cpp.)
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>


#include "checkpoint/gguf.h"
#include "core/bytes.h"

namespace hypic {
namespace {

const std::string kFixture = std::string(HYPIC_SOURCE_DIR) + "/tests/data/gguf/blocks.gguf";

TEST(Gguf, ReadsMetadataOfEveryType) {
  auto f = GgufFile::open(kFixture);
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  EXPECT_EQ(*f->meta_string("general.architecture").value(), "hypic-test");
  EXPECT_EQ(*f->meta_int("test.u8").value(), 200);
  EXPECT_EQ(*f->meta_int("test.i8").value(), -100);
  EXPECT_EQ(*f->meta_int("test.u16").value(), 60000);
  EXPECT_EQ(*f->meta_int("test.i16").value(), -30000);
  EXPECT_EQ(*f->meta_int("test.u32").value(), 4000000000);
  EXPECT_EQ(*f->meta_int("test.i32").value(), -2000000000);
  EXPECT_EQ(*f->meta_float("test.f32").value(), 0.25);
  EXPECT_EQ(*f->meta_bool("test.bool").value(), true);
  EXPECT_EQ(*f->meta_string("test.string").value(), "h\xc3\xa9llo");
  EXPECT_EQ(*f->find_meta("test.ints"), nlohmann::json({1, 2, 3}));
  EXPECT_EQ(*f->find_meta("test.strings"), nlohmann::json({"a", "bc", ""}));
  EXPECT_EQ(*f->meta_int("test.i64").value(), -(int64_t(1) << 40));
  EXPECT_EQ(*f->meta_float("test.f64").value(), 1e-300);
  // 2^63 + 5 does not fit an int64: a typed read says so, naming the key.
  auto big = f->meta_int("test.u64");
  ASSERT_FALSE(big.is_ok());
  EXPECT_NE(big.status().message().find("test.u64"), std::string::npos);
  // Absent: nullopt; another type: an error naming the key.
  EXPECT_FALSE(f->meta_int("test.absent").value().has_value());
  auto wrong = f->meta_int("test.string");
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_NE(wrong.status().message().find("test.string"), std::string::npos);
}

TEST(Gguf, DecodesEveryBlockFormatAsLlamaCppDoes) {
  auto f = GgufFile::open(kFixture);
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  for (const char* type : {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"}) {
    const GgufTensorInfo* w = f->find(std::string("w.") + type);
    const GgufTensorInfo* ref = f->find(std::string("ref.") + type);
    ASSERT_TRUE(w && ref) << type;
    EXPECT_EQ(w->shape, (Shape{3, 512})) << type;
    EXPECT_STREQ(ggml_type_info(w->type)->name, type);
    std::vector<float> got(size_t(w->elements())), want(got.size());
    ASSERT_TRUE(ggml_dequantize(w->type, f->bytes(*w).data(), got.data(), w->elements()).is_ok()) << type;
    ASSERT_TRUE(ggml_dequantize(ref->type, f->bytes(*ref).data(), want.data(), ref->elements()).is_ok());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << type << " element " << i;
  }
}

TEST(Gguf, RefusesTypesItDoesNotReadNamingThem) {
  auto f = GgufFile::open(kFixture);
  ASSERT_TRUE(f.is_ok());
  const GgufTensorInfo* q2 = f->find("w.Q2_K");
  ASSERT_TRUE(q2);
  std::vector<float> out(size_t(q2->elements()));
  Status s = ggml_dequantize(q2->type, f->bytes(*q2).data(), out.data(), q2->elements());
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("Q2_K"), std::string::npos) << s.message();
  EXPECT_STREQ(ggml_type_info(16)->name, "IQ2_XXS");
  EXPECT_EQ(ggml_type_info(4), nullptr);    // removed from ggml
  EXPECT_EQ(ggml_type_info(999), nullptr);  // never defined
}

// A hand-built GGUF image: one u32 key and one F32 tensor of `ne` elements at offset 0.
struct Image {
  uint32_t magic = 0x46554747, version = 3;
  uint64_t n_tensors = 1, n_kv = 1;
  std::string key = "general.alignment";
  uint32_t value_type = 4;  // u32
  uint32_t alignment = 32;
  std::string tensor = "t";
  uint32_t n_dims = 1;
  uint64_t ne = 8;
  uint32_t type = 0;  // F32
  uint64_t offset = 0;
  size_t data_bytes = 32;
  std::string build() const {
    std::string s;
    put_le(&s, magic);
    put_le(&s, version);
    put_le(&s, n_tensors);
    put_le(&s, n_kv);
    put_le(&s, uint64_t(key.size()));
    s += key;
    put_le(&s, value_type);
    put_le(&s, alignment);
    put_le(&s, uint64_t(tensor.size()));
    s += tensor;
    put_le(&s, n_dims);
    for (uint32_t i = 0; i < n_dims; ++i) put_le(&s, ne);
    put_le(&s, type);
    put_le(&s, offset);
    s.resize((s.size() + 31) / 32 * 32, '\0');
    s.append(data_bytes, '\0');
    return s;
  }
};

// The refusal of `img`, which must say `what`.
void expect_refused(const std::string& img, const std::string& what, StatusCode code = StatusCode::kCorrupt) {
  auto f = GgufFile::from_bytes(img, "bad.gguf");
  ASSERT_FALSE(f.is_ok()) << what;
  EXPECT_EQ(f.status().code(), code) << f.status().to_string();
  EXPECT_NE(f.status().message().find(what), std::string::npos) << f.status().message();
  EXPECT_NE(f.status().message().find("bad.gguf"), std::string::npos) << f.status().message();
}

TEST(Gguf, AcceptsTheHandBuiltImage) {
  auto f = GgufFile::from_bytes(Image{}.build(), "ok.gguf");
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  ASSERT_EQ(f->tensors().size(), 1u);
  EXPECT_EQ(f->tensors()[0].shape, (Shape{8}));
  EXPECT_EQ(f->tensors()[0].nbytes, 32u);
}

TEST(Gguf, RefusesEveryDamagedHeader) {
  Image i;
  i.magic = 0x46554746;
  expect_refused(i.build(), "not a GGUF file");
  i = Image{};
  i.version = 4;
  expect_refused(i.build(), "version 4", StatusCode::kUnsupported);
  i = Image{};
  i.n_kv = uint64_t(1) << 60;
  expect_refused(i.build(), "more than the file");
  i = Image{};
  i.n_tensors = uint64_t(1) << 60;
  expect_refused(i.build(), "more than the file");
  i = Image{};
  i.value_type = 13;
  expect_refused(i.build(), "value type 13");
  i = Image{};
  i.alignment = 24;
  expect_refused(i.build(), "power of two");
  i = Image{};
  i.n_dims = 5;
  expect_refused(i.build(), "5 dimensions");
  i = Image{};
  i.ne = 0;
  expect_refused(i.build(), "dimension of 0");
  i = Image{};
  i.type = 4;
  expect_refused(i.build(), "ggml type 4");
  i = Image{};
  i.type = 8;  // Q8_0: 8 elements are not a block of 32
  expect_refused(i.build(), "whole number of 32-element blocks");
  i = Image{};
  i.offset = 16;
  expect_refused(i.build(), "not a multiple of the alignment");
  i = Image{};
  i.data_bytes = 31;
  expect_refused(i.build(), "ends past the end of the file");
  // Every truncation of a valid image is refused cleanly.
  const std::string whole = Image{}.build();
  for (size_t n = 0; n + 1 < whole.size(); ++n) {
    auto f = GgufFile::from_bytes(whole.substr(0, n), "cut.gguf");
    EXPECT_FALSE(f.is_ok()) << n;
  }
  // A key twice.
  std::string twice;
  {
    Image d;
    d.n_kv = 2;
    std::string s = d.build();
    // Insert a second copy of the key / value right after the first one.
    const size_t kv_at = 24, kv_len = 8 + d.key.size() + 4 + 4;
    s.insert(kv_at + kv_len, s.substr(kv_at, kv_len));
    twice = s;
  }
  expect_refused(twice, "appears twice");
}

TEST(Gguf, MetadataAloneMayEndWithoutPadding) {
  Image i;
  i.n_tensors = 0;
  std::string s = i.build();
  s.resize(24 + 8 + i.key.size() + 4 + 4);  // header and the one key / value, nothing after
  auto f = GgufFile::from_bytes(s, "vocab.gguf");
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  EXPECT_EQ(f->data_offset(), s.size());
  EXPECT_EQ(*f->meta_int("general.alignment").value(), 32);
}

// The segment keys' model identity: stable, and changed by the metadata, the index and the
// sampled bytes of every tensor.
TEST(Gguf, FingerprintNamesTheWeights) {
  std::ifstream in(kFixture, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto a = GgufFile::from_bytes(file, "a.gguf");
  auto b = GgufFile::open(kFixture);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  const std::string fp = a->fingerprint();
  EXPECT_EQ(fp.size(), 64u);
  EXPECT_EQ(fp, b->fingerprint());
  const GgufTensorInfo* q4 = a->find("w.Q4_K");
  ASSERT_TRUE(q4);
  const size_t meta_byte = 40 /* inside the first key's name */, first = size_t(a->data_offset() + q4->offset),
               last = size_t(a->data_offset() + q4->offset + q4->nbytes - 1);
  for (size_t at : {meta_byte, first, last}) {
    std::string changed = file;
    changed[at] = char(changed[at] ^ 0x01);
    auto c = GgufFile::from_bytes(changed, "c.gguf");
    ASSERT_TRUE(c.is_ok()) << c.status().to_string();
    EXPECT_NE(c->fingerprint(), fp) << "byte " << at;
  }
}

TEST(Gguf, MissingFileIsNotFound) {
  auto f = GgufFile::open(std::string(HYPIC_SOURCE_DIR) + "/tests/data/gguf/absent.gguf");
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace hypic
