// core/cpu.h: tiers, names, the cap. The detection itself is checked against the kernel's
// view of the CPU (/proc/cpuinfo's flags), which reads the same CPUID bits.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "core/cpu.h"

namespace hypic::cpu {
namespace {

std::set<std::string> proc_flags() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("flags", 0) == 0) {
      std::istringstream in(line.substr(line.find(':') + 1));
      std::set<std::string> out;
      for (std::string w; in >> w;) out.insert(w);
      return out;
    }
  return {};
}

TEST(Cpu, TierNamesRoundTrip) {
  for (int i = 0; i < kTiers; ++i) {
    Result<Tier> t = parse_tier(tier_name(Tier(i)));
    ASSERT_TRUE(t.is_ok());
    EXPECT_EQ(int(*t), i);
  }
  Result<Tier> bad = parse_tier("avx1024");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("generic|avx2|avx_vnni|avx512|avx512_vnni|avx512_bf16|amx"),
            std::string::npos);
}

TEST(Cpu, DetectedFeaturesMatchTheKernelsFlags) {
  const std::set<std::string> f = proc_flags();
  if (f.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags";
  EXPECT_EQ(f.count("avx2") == 1, bool(detected() & kAvx2));
  EXPECT_EQ(f.count("fma") == 1, bool(detected() & kFma));
  EXPECT_EQ(f.count("avx512f") == 1, bool(detected() & kAvx512F));
  EXPECT_EQ(f.count("avx512bw") == 1, bool(detected() & kAvx512Bw));
  EXPECT_EQ(f.count("avx512_vnni") == 1, bool(detected() & kAvx512Vnni));
  EXPECT_EQ(f.count("avx512_bf16") == 1, bool(detected() & kAvx512Bf16));
  EXPECT_EQ(f.count("avx_vnni") == 1, bool(detected() & kAvxVnni));
  EXPECT_EQ(f.count("amx_tile") == 1, bool(detected() & kAmxTile));
}

TEST(Cpu, CapLowersTheTierAndItsFeatures) {
  const Tier best = best_tier();
  ASSERT_GE(int(best), int(Tier::kAvx2)) << "hypic's baseline is x86-64-v3";
  {
    ScopedCap cap(Tier::kAvx2);
    EXPECT_EQ(tier(), Tier::kAvx2);
    EXPECT_TRUE(has(kAvx2 | kFma | kF16c));
    EXPECT_FALSE(has(kAvx512F));
    EXPECT_FALSE(has(kAvxVnni));
    EXPECT_FALSE(has(kAmxTile));
  }
  {
    ScopedCap cap(Tier::kGeneric);
    EXPECT_EQ(tier(), Tier::kGeneric);
    EXPECT_FALSE(has(kAvx2));
  }
  EXPECT_EQ(cap(), startup_cap());
  // A cap above the CPU stays at the CPU's tier.
  {
    ScopedCap cap(Tier::kAmx);
    EXPECT_EQ(int(tier()), int(startup_cap()));
  }
}

TEST(Cpu, TiersAreCumulativeButAvx512DoesNotNeedAvxVnni) {
  // Every tier at or below the best one is reachable by the cap and reports itself.
  for (int i = 0; i <= int(startup_cap()); ++i) {
    ScopedCap cap{Tier(i)};
    const Tier t = tier();
    EXPECT_LE(int(t), i);
    // avx_vnni is skipped on CPUs with AVX-512 but no AVX-VNNI (AMD Zen 4).
    if (Tier(i) == Tier::kAvxVnni && !(detected() & kAvxVnni)) EXPECT_EQ(t, Tier::kAvx2);
    else EXPECT_EQ(int(t), i);
  }
}

TEST(Cpu, NamesTheCpu) {
  EXPECT_FALSE(model_name().empty());
  EXPECT_NE(feature_names().find("avx2"), std::string::npos);
}

}  // namespace
}  // namespace hypic::cpu
