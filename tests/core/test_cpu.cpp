// core/cpu.h: tiers, names, the cap. The detection itself is checked against the kernel's
// view of the CPU (/proc/cpuinfo's flags on x86-64, its Features on aarch64: the same CPUID
// bits / HWCAPs; under qemu-user the host's file is read, and those checks skip).
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "core/cpu.h"

namespace hypic::cpu {
namespace {

// The words of /proc/cpuinfo's first line that starts with `key`.
std::set<std::string> proc_flags(const char* key) {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) {
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
  EXPECT_NE(bad.status().message().find(tier_names()), std::string::npos);
  EXPECT_EQ(tier_name(Tier::kGeneric), std::string("generic"));
}

TEST(Cpu, CapAboveTheCpuStaysAtItsTierAndGenericHasNoFeature) {
  {
    ScopedCap cap(Tier(kTiers - 1));
    EXPECT_EQ(int(tier()), int(startup_cap()));
  }
  {
    ScopedCap cap(Tier::kGeneric);
    EXPECT_EQ(tier(), Tier::kGeneric);
    if (detected() != 0) {
      EXPECT_FALSE(has(detected() & ~(detected() - 1)));  // its lowest feature
    }
  }
  EXPECT_EQ(cap(), startup_cap());
}

TEST(Cpu, NamesTheCpu) {
  EXPECT_FALSE(model_name().empty());
  EXPECT_FALSE(feature_names().empty());
}

#if defined(__x86_64__)
TEST(Cpu, DetectedFeaturesMatchTheKernelsFlags) {
  const std::set<std::string> f = proc_flags("flags");
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
  ASSERT_GE(int(best_tier()), int(Tier::kAvx2)) << "hypic's baseline is x86-64-v3";
  ScopedCap cap(Tier::kAvx2);
  EXPECT_EQ(tier(), Tier::kAvx2);
  EXPECT_TRUE(has(kAvx2 | kFma | kF16c));
  EXPECT_FALSE(has(kAvx512F));
  EXPECT_FALSE(has(kAvxVnni));
  EXPECT_FALSE(has(kAmxTile));
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

TEST(Cpu, NamesX86Features) { EXPECT_NE(feature_names().find("avx2"), std::string::npos); }
#elif defined(__aarch64__)
TEST(Cpu, DetectedFeaturesMatchTheKernelsFeatures) {
  const std::set<std::string> f = proc_flags("Features");
  if (f.empty()) GTEST_SKIP() << "no /proc/cpuinfo Features (qemu-user shows the host's file)";
  EXPECT_EQ(f.count("asimd") == 1, bool(detected() & kNeonFeature));
  EXPECT_EQ(f.count("asimddp") == 1, bool(detected() & kDotprod));
  EXPECT_EQ(f.count("i8mm") == 1, bool(detected() & kI8mm));
  EXPECT_EQ(f.count("bf16") == 1, bool(detected() & kBf16));
  EXPECT_EQ(f.count("sve") == 1, bool(detected() & kSve));
}

TEST(Cpu, EveryArmv8CpuHasNeonAndTheCapLowersIt) {
  ASSERT_GE(int(best_tier()), int(Tier::kNeon)) << feature_names();
  ScopedCap cap(Tier::kNeon);
  EXPECT_EQ(tier(), Tier::kNeon);
  EXPECT_TRUE(has(kNeonFeature));
  EXPECT_FALSE(has(kDotprod));
  EXPECT_FALSE(has(kI8mm));
  EXPECT_FALSE(has(kSve));
}

TEST(Cpu, ArmTiersAreCumulative) {
  for (int i = 0; i <= int(startup_cap()); ++i) {
    ScopedCap cap{Tier(i)};
    EXPECT_EQ(int(tier()), i);
  }
  // sve needs i8mm (and bf16): an SVE core without them (A64FX) is a dotprod-or-lower CPU.
  if ((detected() & kSve) && !(detected() & kI8mm)) {
    EXPECT_LT(int(best_tier()), int(Tier::kI8mm));
  }
}
#endif

}  // namespace
}  // namespace hypic::cpu
