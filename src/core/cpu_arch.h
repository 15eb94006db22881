// What core/cpu.cpp needs from the build architecture (cpu_x86.cpp, cpu_arm.cpp; each file
// is empty on the other architecture). Internal to core.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "core/cpu.h"

namespace hypic::cpu::arch {

extern const char* const kArchName;
extern const std::array<const char*, kTiers> kTierNames;
// The features each tier introduces (index = tier).
extern const std::array<uint32_t, kTiers> kIntroduces;
// The features a tier needs: its own and those of the tiers it builds on.
uint32_t needs(Tier t);
// Every feature's name, in the order feature_names() lists them.
std::span<const std::pair<uint32_t, const char*>> feature_list();

// Read once by cpu.cpp: the features the CPU and OS provide, the vendor, the CPU's name.
uint32_t read_features();
Vendor read_vendor();
std::string read_model_name();

}  // namespace hypic::cpu::arch
