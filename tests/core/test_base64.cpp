// Base64 (core/base64.h): RFC 4648 test vectors, round trips of every length, and the
// strictness the entry format relies on (one encoding per byte string).
#include <gtest/gtest.h>

#include "core/base64.h"

namespace hypic {
namespace {

std::string enc(std::string_view s) {
  return base64_encode(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

TEST(Base64, Rfc4648Vectors) {
  EXPECT_EQ(enc(""), "");
  EXPECT_EQ(enc("f"), "Zg==");
  EXPECT_EQ(enc("fo"), "Zm8=");
  EXPECT_EQ(enc("foo"), "Zm9v");
  EXPECT_EQ(enc("foob"), "Zm9vYg==");
  EXPECT_EQ(enc("fooba"), "Zm9vYmE=");
  EXPECT_EQ(enc("foobar"), "Zm9vYmFy");
}

TEST(Base64, RoundTripsEveryLengthAndByte) {
  std::vector<uint8_t> b;
  for (int n = 0; n < 300; ++n) {
    const std::string s = base64_encode(b.data(), b.size());
    std::vector<uint8_t> back;
    ASSERT_TRUE(base64_decode(s, &back)) << n;
    EXPECT_EQ(back, b) << n;
    b.push_back(uint8_t(n * 37 + 11));
  }
}

TEST(Base64, RejectsNonCanonicalInput) {
  std::vector<uint8_t> out;
  for (const char* bad : {"Zg=", "Zg", "Zh==", "Zm9=", "Z===", "Zg=a", "Zm9v\n", "Zm 9", "Zg==Zg==",
                          "Zm9v!A=="})
    EXPECT_FALSE(base64_decode(bad, &out)) << bad;
}

}  // namespace
}  // namespace hypic
