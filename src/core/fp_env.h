// The floating-point environment of the recurrent kernels.
#pragma once

#include <cstdint>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace hypic {

// Flushes denormal results to zero and reads denormal inputs as zero on this thread while it
// lives (x86-64: MXCSR FTZ | DAZ; aarch64: FPCR.FZ, which does both), restoring the previous
// mode after. Each operation on a denormal takes a microcode assist of ~100 cycles on x86: a
// gated recurrence's decays e^{Σg} fall through the denormal range (|x| < 2^−126) within a
// chunk, and a strongly gated head then made the delta-rule prefill 6–13× slower (L = 512, 16
// heads of 128: g = −1: 6.3 ms, g = −2 / −5: 81 / 40 ms). Values that small are below every
// tolerance the results are held to.
class FlushDenormals {
 public:
#if defined(__x86_64__)
  FlushDenormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | kFtz | kDaz); }
  ~FlushDenormals() { _mm_setcsr(saved_); }
#elif defined(__aarch64__)
  FlushDenormals() {
    __asm__ volatile("mrs %0, fpcr" : "=r"(saved_));
    const uint64_t fz = saved_ | kFz;
    __asm__ volatile("msr fpcr, %0" ::"r"(fz));
  }
  ~FlushDenormals() { __asm__ volatile("msr fpcr, %0" ::"r"(saved_)); }
#endif
  FlushDenormals(const FlushDenormals&) = delete;
  FlushDenormals& operator=(const FlushDenormals&) = delete;

 private:
#if defined(__x86_64__)
  static constexpr unsigned kFtz = 0x8000, kDaz = 0x0040;
  unsigned saved_;
#elif defined(__aarch64__)
  static constexpr uint64_t kFz = uint64_t(1) << 24;
  uint64_t saved_;
#endif
};

}  // namespace hypic
