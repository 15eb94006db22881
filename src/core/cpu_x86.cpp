// x86-64: CPUID, XCR0 and Linux's AMX permission (core/cpu.h's tiers).
#if defined(__x86_64__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

#include "core/cpu_arch.h"

namespace hypic::cpu::arch {

const char* const kArchName = "x86-64";

const std::array<const char*, kTiers> kTierNames = {
    "generic", "avx2", "avx_vnni", "avx512", "avx512_vnni", "avx512_bf16", "amx"};

const std::array<uint32_t, kTiers> kIntroduces = {
    0u,
    kAvx2 | kFma | kF16c,
    kAvxVnni,
    kAvx512F | kAvx512Bw | kAvx512Vl | kAvx512Dq,
    kAvx512Vnni,
    kAvx512Bf16,
    kAmxTile | kAmxInt8 | kAmxBf16,
};

// avx512 does not need avx_vnni: AMD Zen 4 has AVX-512 without it.
uint32_t needs(Tier t) {
  switch (t) {
    case Tier::kGeneric: return 0;
    case Tier::kAvx2: return kIntroduces[1];
    case Tier::kAvxVnni: return kIntroduces[1] | kIntroduces[2];
    case Tier::kAvx512: return kIntroduces[1] | kIntroduces[3];
    case Tier::kAvx512Vnni: return needs(Tier::kAvx512) | kIntroduces[4];
    case Tier::kAvx512Bf16: return needs(Tier::kAvx512Vnni) | kIntroduces[5];
    case Tier::kAmx: return needs(Tier::kAvx512Bf16) | kIntroduces[6];
  }
  return 0;
}

std::span<const std::pair<uint32_t, const char*>> feature_list() {
  static constexpr std::pair<uint32_t, const char*> kNames[] = {
      {kAvx2, "avx2"},         {kFma, "fma"},           {kF16c, "f16c"},
      {kAvxVnni, "avx_vnni"},  {kAvx512F, "avx512f"},   {kAvx512Bw, "avx512bw"},
      {kAvx512Vl, "avx512vl"}, {kAvx512Dq, "avx512dq"}, {kAvx512Vnni, "avx512_vnni"},
      {kAvx512Bf16, "avx512_bf16"}, {kAmxTile, "amx_tile"}, {kAmxInt8, "amx_int8"},
      {kAmxBf16, "amx_bf16"}};
  return kNames;
}

namespace {

bool bit(uint32_t r, int b) { return (r >> b) & 1u; }

uint64_t xgetbv0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

// AMX tile data is off until the process asks Linux (≥ 5.16) for it: once, for all threads.
bool request_amx_tile_data() {
  constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
}

}  // namespace

uint32_t read_features() {
  uint32_t a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
  const bool osxsave = bit(c, 27), avx = bit(c, 28);
  if (!osxsave || !avx) return 0;
  const uint64_t xcr0 = xgetbv0();
  if ((xcr0 & 0x6) != 0x6) return 0;  // the OS saves no YMM state
  uint32_t f = 0;
  if (bit(c, 12)) f |= kFma;
  if (bit(c, 29)) f |= kF16c;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  const uint32_t b7 = b, c7 = c, d7 = d;
  __cpuid_count(7, 1, a, b, c, d);
  const uint32_t a71 = a;
  if (bit(b7, 5)) f |= kAvx2;
  if (bit(a71, 4)) f |= kAvxVnni;
  if ((xcr0 & 0xe0) == 0xe0) {  // opmask, ZMM_Hi256, Hi16_ZMM
    if (bit(b7, 16)) f |= kAvx512F;
    if (bit(b7, 17)) f |= kAvx512Dq;
    if (bit(b7, 30)) f |= kAvx512Bw;
    if (bit(b7, 31)) f |= kAvx512Vl;
    if (bit(c7, 11)) f |= kAvx512Vnni;
    if (bit(a71, 5)) f |= kAvx512Bf16;
  }
  const bool amx = bit(d7, 24) && bit(d7, 25) && bit(d7, 22);
  if (amx && (xcr0 & (3u << 17)) == (3u << 17) && request_amx_tile_data())
    f |= kAmxTile | kAmxInt8 | kAmxBf16;
  return f;
}

Vendor read_vendor() {
  uint32_t a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return Vendor::kOther;
  char s[13] = {};
  std::memcpy(s, &b, 4);
  std::memcpy(s + 4, &d, 4);
  std::memcpy(s + 8, &c, 4);
  const std::string id(s);
  return id == "GenuineIntel" ? Vendor::kIntel : id == "AuthenticAMD" ? Vendor::kAmd : Vendor::kOther;
}

std::string read_model_name() {
  uint32_t r[12];
  if (__get_cpuid_max(0x80000000u, nullptr) < 0x80000004u) return "";
  for (uint32_t i = 0; i < 3; ++i)
    __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
  char s[49] = {};
  std::memcpy(s, r, 48);
  return s;
}

}  // namespace hypic::cpu::arch
#endif  // __x86_64__
