// Opt-in wall-clock profile by named scope: HYPIC_PROFILE=1 accumulates the time of each
// HYPIC_PROFILE_SCOPE and prints a table to stderr at exit. Disabled, a scope costs one
// branch. Scopes may nest (times are inclusive) and be entered from any thread.
#pragma once

#include <chrono>

namespace hypic {

bool profiling_enabled();
void profile_add(const char* name, double seconds);

class ProfileScope {
 public:
  explicit ProfileScope(const char* name) : name_(profiling_enabled() ? name : nullptr) {
    if (name_) t0_ = std::chrono::steady_clock::now();
  }
  ~ProfileScope() {
    if (name_)
      profile_add(name_, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count());
  }

 private:
  const char* name_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace hypic

#define HYPIC_PROFILE_SCOPE(name) ::hypic::ProfileScope HYPIC_CONCAT(_prof_, __LINE__)(name)
