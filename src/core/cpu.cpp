#include "core/cpu.h"

#include <atomic>
#include <cstdlib>

#include "core/cpu_arch.h"

namespace hypic::cpu {
namespace {

using arch::kIntroduces;
using arch::needs;

// The features of every tier at or below t.
uint32_t allowed(Tier t) {
  uint32_t m = 0;
  for (int i = 0; i <= int(t); ++i) m |= kIntroduces[size_t(i)];
  return m;
}

Tier highest(uint32_t features) {
  Tier best = Tier::kGeneric;
  for (int i = 0; i < kTiers; ++i)
    if ((features & needs(Tier(i))) == needs(Tier(i))) best = Tier(i);
  return best;
}

struct State {
  uint32_t features = 0;
  Tier best = Tier::kGeneric, start = Tier::kGeneric;
  std::string warning;
};

const State& state() {
  static const State s = [] {
    State st;
    st.features = arch::read_features();
    st.best = highest(st.features);
    st.start = st.best;
#if defined(__x86_64__)
    const char* amx = std::getenv("HYPIC_AMX");
    if (amx && std::string(amx) == "0" && st.start == Tier::kAmx) st.start = Tier::kAvx512Bf16;
#endif
    if (const char* e = std::getenv("HYPIC_MAX_ISA"); e != nullptr && *e != '\0') {
      Result<Tier> t = parse_tier(e);
      if (!t.is_ok()) {
        st.warning = "HYPIC_MAX_ISA ignored: " + t.status().message();
      } else if (int(*t) > int(st.best)) {
        st.warning = std::string("HYPIC_MAX_ISA=") + e + " is above this CPU's tier (" +
                     tier_name(st.best) + "): running at " + tier_name(st.best);
      } else if (int(*t) < int(st.start)) {
        st.start = *t;
      }
    }
    return st;
  }();
  return s;
}

std::atomic<int> g_cap{-1};  // −1: the start-up cap

}  // namespace

const char* tier_name(Tier t) { return arch::kTierNames[size_t(t)]; }

const char* arch_name() { return arch::kArchName; }

std::string tier_names() {
  std::string all;
  for (int i = 0; i < kTiers; ++i) all += std::string(i ? "|" : "") + arch::kTierNames[size_t(i)];
  return all;
}

Result<Tier> parse_tier(const std::string& name) {
  for (int i = 0; i < kTiers; ++i)
    if (name == arch::kTierNames[size_t(i)]) return Tier(i);
  return invalid_argument("unknown ISA tier '" + name + "' (expected " + tier_names() + ")");
}

uint32_t detected() { return state().features; }
Tier best_tier() { return state().best; }
Tier startup_cap() { return state().start; }

Tier cap() {
  const int c = g_cap.load(std::memory_order_relaxed);
  return c < 0 ? state().start : Tier(c);
}

void set_cap(Tier t) { g_cap.store(int(t) > int(best_tier()) ? int(best_tier()) : int(t)); }

bool has(uint32_t mask) {
  const uint32_t usable = state().features & allowed(cap());
  return (usable & mask) == mask;
}

Tier tier() { return highest(state().features & allowed(cap())); }

Vendor vendor() {
  static const Vendor v = arch::read_vendor();
  return v;
}

const std::string& model_name() {
  static const std::string name = [] {
    std::string out = arch::read_model_name();
    const size_t b = out.find_first_not_of(' '), e = out.find_last_not_of(' ');
    return b == std::string::npos ? std::string("unknown ") + arch::kArchName + " CPU"
                                  : out.substr(b, e - b + 1);
  }();
  return name;
}

std::string feature_names() {
  std::string out;
  for (const auto& [f, n] : arch::feature_list())
    if (detected() & f) out += std::string(out.empty() ? "" : " ") + n;
  return out;
}

const std::string& cap_warning() { return state().warning; }

}  // namespace hypic::cpu
