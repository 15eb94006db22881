// aarch64: Linux's HWCAP / HWCAP2 and MIDR_EL1 (core/cpu.h's tiers).
#if defined(__aarch64__)
#include <asm/hwcap.h>
#include <sys/auxv.h>

#include <cstdio>

#include "core/cpu_arch.h"

namespace hypic::cpu::arch {

const char* const kArchName = "aarch64";

const std::array<const char*, kTiers> kTierNames = {"generic", "neon", "dotprod", "i8mm", "sve"};

const std::array<uint32_t, kTiers> kIntroduces = {0u, kNeonFeature | kFp16, kDotprod, kI8mm | kBf16,
                                                  kSve | kSve2};

// Each tier builds on the one below; FP16 arithmetic and SVE2 are used where present, never
// needed.
uint32_t needs(Tier t) {
  uint32_t m = 0;
  for (int i = 1; i <= int(t); ++i) m |= kIntroduces[size_t(i)];
  return m & ~(kFp16 | kSve2);
}

std::span<const std::pair<uint32_t, const char*>> feature_list() {
  static constexpr std::pair<uint32_t, const char*> kNames[] = {
      {kNeonFeature, "asimd"}, {kFp16, "fp16"}, {kDotprod, "asimddp"}, {kI8mm, "i8mm"},
      {kBf16, "bf16"},         {kSve, "sve"},   {kSve2, "sve2"}};
  return kNames;
}

uint32_t read_features() {
  const unsigned long h = getauxval(AT_HWCAP), h2 = getauxval(AT_HWCAP2);
  uint32_t f = 0;
  if ((h & HWCAP_FP) && (h & HWCAP_ASIMD)) f |= kNeonFeature;
  if ((h & HWCAP_FPHP) && (h & HWCAP_ASIMDHP)) f |= kFp16;
  if (h & HWCAP_ASIMDDP) f |= kDotprod;
  if (h & HWCAP_SVE) f |= kSve;
  if (h2 & HWCAP2_SVE2) f |= kSve2;
  if (h2 & HWCAP2_I8MM) f |= kI8mm;
  if (h2 & HWCAP2_BF16) f |= kBf16;
  return f;
}

Vendor read_vendor() { return Vendor::kOther; }

// MIDR_EL1 (Linux emulates the read where HWCAP_CPUID says so): implementer and part.
std::string read_model_name() {
  if (!(getauxval(AT_HWCAP) & HWCAP_CPUID)) return "";
  uint64_t midr;
  __asm__ volatile("mrs %0, MIDR_EL1" : "=r"(midr));
  const unsigned impl = unsigned(midr >> 24) & 0xff, part = unsigned(midr >> 4) & 0xfff;
  static constexpr std::pair<unsigned, const char*> kArm[] = {
      {0xd03, "Cortex-A53"}, {0xd05, "Cortex-A55"},  {0xd07, "Cortex-A57"},  {0xd08, "Cortex-A72"},
      {0xd0b, "Cortex-A76"}, {0xd0c, "Neoverse-N1"}, {0xd40, "Neoverse-V1"}, {0xd49, "Neoverse-N2"},
      {0xd4f, "Neoverse-V2"}};
  if (impl == 0x41)
    for (const auto& [p, name] : kArm)
      if (p == part) return name;
  char s[64];
  std::snprintf(s, sizeof s, "implementer 0x%02x, part 0x%03x", impl, part);
  return s;
}

}  // namespace hypic::cpu::arch
#endif  // __aarch64__
