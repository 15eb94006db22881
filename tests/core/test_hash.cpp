// SHA-256 against the FIPS 180-4 / NIST example vectors (both block functions, one-shot and
// streaming in odd pieces) and XXH64 against values from the reference libxxhash 0.8.1.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/hash.h"
#include "core/timer.h"

namespace hypic {
namespace {

struct ShaVector {
  std::string msg;
  const char* digest;
};

std::vector<ShaVector> fips_vectors() {
  return {
      {"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
      {"abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlm"
       "nopqrsmnopqrstnopqrstu",
       "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"},
      {std::string(1000000, 'a'),
       "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
  };
}

// 100000 bytes (i·31 + 7) mod 256; digest from Python's hashlib.
std::string pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = char(uint8_t(i * 31 + 7));
  return s;
}
constexpr const char* kPatternDigest =
    "731620161155f68e1209f22bc34a726bf5a583f40acf23ae55684b674fdbebf2";

class Sha256Test : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { Sha256::use_portable_for_testing(GetParam()); }
  void TearDown() override { Sha256::use_portable_for_testing(false); }
};

TEST_P(Sha256Test, FipsVectorsOneShot) {
  for (const ShaVector& v : fips_vectors())
    EXPECT_EQ(Sha256::hex(v.msg), v.digest) << "message of " << v.msg.size() << " bytes";
  EXPECT_EQ(Sha256::hex(pattern(100000)), kPatternDigest);
}

TEST_P(Sha256Test, StreamingInPiecesMatchesOneShot) {
  std::mt19937 g(7);
  std::vector<ShaVector> vs = fips_vectors();
  vs.push_back({pattern(100000), kPatternDigest});
  for (const ShaVector& v : vs) {
    for (int trial = 0; trial < 3; ++trial) {
      Sha256 s;
      size_t i = 0;
      while (i < v.msg.size()) {
        const size_t k = std::min<size_t>(v.msg.size() - i, g() % 200);  // 0-byte pieces too
        s.update(v.msg.data() + i, k);
        i += k;
      }
      EXPECT_EQ(s.final_hex(), v.digest);
    }
  }
  // Byte at a time across the 55/56/64-byte padding boundaries.
  for (size_t n : {55u, 56u, 57u, 63u, 64u, 65u, 119u, 120u}) {
    const std::string m = pattern(n);
    Sha256 s;
    for (char c : m) s.update(&c, 1);
    EXPECT_EQ(s.final_hex(), Sha256::hex(m)) << n;
  }
  Sha256 s;
  s.update("ab");
  s.final_hex();
  s.reset();
  s.update("abc");
  EXPECT_EQ(s.final_hex(), fips_vectors()[1].digest);
}

INSTANTIATE_TEST_SUITE_P(BlockFn, Sha256Test, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "portable" : "dispatched"; });

TEST(Sha256, ImplementationsAgreeOnRandomData) {
  std::mt19937_64 g(3);
  std::string m(5000, '\0');
  for (char& c : m) c = char(g());
  for (size_t n = 0; n <= m.size(); n += 97) {
    Sha256::use_portable_for_testing(true);
    const std::string a = Sha256::hex(m.data(), n);
    Sha256::use_portable_for_testing(false);
    EXPECT_EQ(a, Sha256::hex(m.data(), n)) << n;
  }
}

struct XxhVector {
  size_t n;
  uint64_t seed0, seed_golden;
};
// XXH64 of pattern(n) with seed 0 and seed 0x9E3779B97F4A7C15, from libxxhash 0.8.1.
constexpr XxhVector kXxh[] = {
    {1, 0xa96c7f0ce858bbb7ULL, 0x585882422a6165e7ULL},
    {3, 0x56e6957632a487f9ULL, 0x5acb303e78133c22ULL},
    {4, 0xc60d15b1e3ff8f04ULL, 0x7d51d5e2461732b3ULL},
    {7, 0xafbefc3d6c6f9a8eULL, 0x2ce9adec2b2c8104ULL},
    {8, 0x3da5c7aa269683e0ULL, 0x758848f033fa76a2ULL},
    {15, 0xae2a37eb9357caa7ULL, 0xa18d5c90d722cee3ULL},
    {31, 0x4a74f3a1a39ad4a1ULL, 0x8137041f5af88413ULL},
    {32, 0x8d57d6a4671cc43dULL, 0x184ebcf3745cd46cULL},
    {33, 0x62c9fd21ed857664ULL, 0x52fac3c981f3cc2eULL},
    {63, 0x5c320a0d2707057fULL, 0x64ef99a2e94cc7bdULL},
    {64, 0x7bbabbc45729d17eULL, 0xf7f22435fe1ab128ULL},
    {100, 0xefa0ad2d3e70c151ULL, 0xbc7ab33be7528c18ULL},
    {1000, 0x99594f4828043d35ULL, 0xda717f741f399f3fULL},
    {4096, 0xe21174be82dc78d9ULL, 0xe4d8ced124df0294ULL},
};

TEST(Xxh64, ReferenceVectors) {
  EXPECT_EQ(Xxh64::hash("", 0), 0xef46db3751d8e999ULL);
  EXPECT_EQ(Xxh64::hash("abc", 3), 0x44bc2cf5ad770999ULL);
  const std::string m = pattern(4096);
  for (const XxhVector& v : kXxh) {
    EXPECT_EQ(Xxh64::hash(m.data(), v.n), v.seed0) << v.n;
    EXPECT_EQ(Xxh64::hash(m.data(), v.n, 0x9E3779B97F4A7C15ULL), v.seed_golden) << v.n;
  }
}

TEST(Xxh64, StreamingInPiecesMatchesOneShot) {
  const std::string m = pattern(4096);
  std::mt19937 g(11);
  for (const XxhVector& v : kXxh) {
    Xxh64 x;
    size_t i = 0;
    while (i < v.n) {
      const size_t k = std::min<size_t>(v.n - i, g() % 45);
      x.update(m.data() + i, k);
      i += k;
      EXPECT_EQ(x.digest(), Xxh64::hash(m.data(), i));  // digest() does not end the stream
    }
    EXPECT_EQ(x.digest(), v.seed0) << v.n;
  }
}

TEST(Hex, Formats) {
  const uint8_t b[] = {0x00, 0x0f, 0xa0, 0xff};
  EXPECT_EQ(to_hex(b, 4), "000fa0ff");
  EXPECT_EQ(to_hex64(0x0123456789abcdefULL), "0123456789abcdef");
  EXPECT_EQ(to_hex64(0), "0000000000000000");
}

// Not a pass/fail check: prints throughput so it lands in the test log.
TEST(HashThroughput, Report) {
  std::vector<uint8_t> buf(64 << 20);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = uint8_t(i * 131 + (i >> 12));
  auto mbps = [&](auto&& fn) {
    double best = 1e30;
    for (int r = 0; r < 2; ++r) {
      Timer t;
      fn();
      best = std::min(best, t.seconds());
    }
    return double(buf.size()) / 1e6 / best;
  };
  volatile uint64_t sink = 0;
  const double xxh = mbps([&] { sink = sink + Xxh64::hash(buf.data(), buf.size()); });
  const double sha = mbps([&] { sink = sink + Sha256::hex(buf.data(), buf.size()).size(); });
  Sha256::use_portable_for_testing(true);
  const double sha_p = mbps([&] { sink = sink + Sha256::hex(buf.data(), buf.size()).size(); });
  Sha256::use_portable_for_testing(false);
  std::printf("[throughput] xxh64 %.0f MB/s, sha256 (%s) %.0f MB/s, sha256 (portable) %.0f MB/s\n",
              xxh, Sha256::implementation(), sha, sha_p);
  EXPECT_GT(xxh, 0);
}

}  // namespace
}  // namespace hypic
