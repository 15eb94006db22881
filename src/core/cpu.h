// The CPU this process runs on, read once, named as ISA tiers and lowered by a cap. Every
// kernel asks here which instructions it may use. The tiers are the build architecture's:
//
// x86-64 (CPUID features that the OS has enabled: XCR0's AVX, AVX-512 and AMX tile state;
// Linux's arch_prctl permission for AMX tile data), lowest first; each needs the features
// listed and those of the tiers it names:
//   generic      x86-64-v3 (AVX2 + FMA, the build baseline) with the portable kernels only
//   avx2         AVX2, FMA, F16C: the hand-written 256-bit kernels
//   avx_vnni     avx2 + AVX-VNNI (256-bit vpdpbusd)
//   avx512       avx2 + AVX-512 F / BW / VL / DQ
//   avx512_vnni  avx512 + AVX512-VNNI
//   avx512_bf16  avx512_vnni + AVX512-BF16 (oneDNN's bf16 matmul from here on)
//   amx          avx512_bf16 + AMX tile / int8 / bf16
// aarch64 (Linux's HWCAP / HWCAP2 from getauxval):
//   generic      ARMv8.0 with the portable kernels only (compiled for ARMv8.0 + NEON)
//   neon         Advanced SIMD (every ARMv8 Linux CPU): the hand-written 128-bit kernels
//   dotprod      neon + sdot / udot (ARMv8.2: Neoverse N1, Cortex-A76, Graviton 2, Apple M1)
//   i8mm         dotprod + smmla / ummla and bfdot / bfmmla (ARMv8.6: Graviton 3 / 4, Neoverse
//                V1 / V2 / N2, Grace, Apple M2)
//   sve          i8mm + SVE (vector length read at run time: Graviton 3 / 4, Grace, A64FX)
// A feature belongs to the lowest tier that introduces it. The cap keeps the features of the
// tiers at or below it: HYPIC_MAX_ISA=<tier> at start-up (HYPIC_AMX=0 is amx's lower
// neighbour), set_cap() in tests. oneDNN is capped once, at its first primitive, by the
// start-up cap (kernels/gemm.cpp), so a capped AVX-512 machine runs what an AVX2 CPU runs.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace hypic::cpu {

#if defined(__x86_64__)
enum class Tier { kGeneric, kAvx2, kAvxVnni, kAvx512, kAvx512Vnni, kAvx512Bf16, kAmx };
constexpr int kTiers = 7;

enum Feature : uint32_t {
  kAvx2 = 1u << 0,
  kFma = 1u << 1,
  kF16c = 1u << 2,
  kAvxVnni = 1u << 3,
  kAvx512F = 1u << 4,
  kAvx512Bw = 1u << 5,
  kAvx512Vl = 1u << 6,
  kAvx512Dq = 1u << 7,
  kAvx512Vnni = 1u << 8,
  kAvx512Bf16 = 1u << 9,
  kAmxTile = 1u << 10,
  kAmxInt8 = 1u << 11,
  kAmxBf16 = 1u << 12,
};
#elif defined(__aarch64__)
enum class Tier { kGeneric, kNeon, kDotprod, kI8mm, kSve };
constexpr int kTiers = 5;

enum Feature : uint32_t {
  kNeonFeature = 1u << 0,  // ASIMD + FP
  kFp16 = 1u << 1,         // FP16 arithmetic (fphp + asimdhp); not a tier's need
  kDotprod = 1u << 2,
  kI8mm = 1u << 3,
  kBf16 = 1u << 4,
  kSve = 1u << 5,
  kSve2 = 1u << 6,  // not a tier's need
};
#else
#error "hypic builds for x86-64 and aarch64"
#endif

// The build architecture's name ("x86-64", "aarch64") and the tiers' names joined by '|'.
const char* arch_name();
std::string tier_names();

// "generic", "avx2", ... (the list above).
const char* tier_name(Tier t);
// A tier by name; the error lists the names.
Result<Tier> parse_tier(const std::string& name);

// The features the CPU and OS provide (no cap).
uint32_t detected();
// The highest tier the CPU supports.
Tier best_tier();
// The cap in force (best_tier() unless lowered) and the start-up cap (what oneDNN got).
Tier cap();
Tier startup_cap();
// Lowers (or restores) the cap of hypic's own kernels, clamped to best_tier(); for tests and
// benchmarks that compare tiers in one process. Not oneDNN's (fixed at its first use).
void set_cap(Tier t);

// Whether every feature in `mask` is usable under the cap.
bool has(uint32_t mask);
// The highest tier whose features are usable under the cap.
Tier tier();

// CPUID's vendor: for choices whose speed ranking differs between the two x86 designs (kOther
// on aarch64).
enum class Vendor { kIntel, kAmd, kOther };
Vendor vendor();

// "AMD EPYC 7B13" (CPUID's brand string, trimmed); on aarch64 the core's name from MIDR_EL1
// ("Neoverse-N1"), else "implementer 0xc0, part 0xac3"; "unknown <arch> CPU" when unreadable.
const std::string& model_name();
// Space-separated names of the detected features ("avx2 fma f16c avx512f ...").
std::string feature_names();

// Why HYPIC_MAX_ISA was ignored ("" when it was valid or unset): an unknown name, or a tier
// above what this CPU has. Start-up logs it.
const std::string& cap_warning();

// Sets the cap for a scope and restores the previous one (tests).
class ScopedCap {
 public:
  explicit ScopedCap(Tier t) : prev_(cap()) { set_cap(t); }
  ~ScopedCap() { set_cap(prev_); }
  ScopedCap(const ScopedCap&) = delete;
  ScopedCap& operator=(const ScopedCap&) = delete;

 private:
  Tier prev_;
};

}  // namespace hypic::cpu
