// The in-memory entry form (serialize_entry / deserialize_entry): the same bytes as the
// file, bit-exact round trips, and any damaged byte rejected as kCorrupt.
#include <gtest/gtest.h>

#include "cache/entry_util.h"
#include "core/log.h"

namespace hypic {
namespace {

class EntryBytes : public test::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    set_log_level(LogLevel::kError);
  }
  void TearDown() override {
    set_log_level(LogLevel::kInfo);
    TempDirTest::TearDown();
  }
};

TEST_F(EntryBytes, AreTheFileBytesAndRoundTripBitExact) {
  for (int seam : {0, 2, 12}) {
    const SegmentEntry e = test::make_entry(40 + uint32_t(seam), seam);
    Result<std::string> b = serialize_entry(e);
    ASSERT_TRUE(b.is_ok()) << b.status().to_string();
    ASSERT_TRUE(save_entry(path("e"), e).is_ok());
    EXPECT_EQ(*b, test::read_file(path("e"))) << "seam " << seam;
    Result<SegmentEntry> r = deserialize_entry(*b);
    ASSERT_TRUE(r.is_ok()) << r.status().to_string();
    test::expect_same_entry(*r, e);
    b->assign(b->size(), '\0');  // the entry owns copies, not views of the bytes
    test::expect_same_entry(*r, e);
  }
  SegmentEntry empty;
  empty.key = "k";
  Result<std::string> b = serialize_entry(empty);
  ASSERT_TRUE(b.is_ok());
  Result<SegmentEntry> r = deserialize_entry(*b);
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  test::expect_same_entry(*r, empty);
}

TEST_F(EntryBytes, EveryFlippedByteIsCorrupt) {
  const std::string good = serialize_entry(test::make_entry(7)).value();
  for (size_t i = 0; i < good.size(); ++i) {
    std::string b = good;
    b[i] = char(b[i] ^ 0xff);
    Result<SegmentEntry> r = deserialize_entry(b);
    ASSERT_FALSE(r.is_ok()) << "flipping byte " << i << " of " << good.size() << " went unnoticed";
    ASSERT_EQ(r.status().code(), StatusCode::kCorrupt) << i << ": " << r.status().to_string();
  }
}

TEST_F(EntryBytes, TruncatedOrExtendedIsCorrupt) {
  const std::string good = serialize_entry(test::make_entry(8)).value();
  for (size_t n : {size_t(0), size_t(7), size_t(8), size_t(100), good.size() / 2, good.size() - 1}) {
    Result<SegmentEntry> r = deserialize_entry(std::string_view(good).substr(0, n));
    ASSERT_FALSE(r.is_ok()) << n;
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt) << n;
  }
  Result<SegmentEntry> r = deserialize_entry(good + "x");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorrupt);
  EXPECT_NE(r.status().message().find("recompute"), std::string::npos) << r.status().message();
}

TEST_F(EntryBytes, InconsistentEntryIsNotSerialised) {
  SegmentEntry e = test::make_entry(9);
  e.tokens.pop_back();
  Result<std::string> b = serialize_entry(e);
  ASSERT_FALSE(b.is_ok());
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hypic
