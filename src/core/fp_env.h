// The floating-point environment of the recurrent kernels.
#pragma once

#if defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h>
#endif

namespace hypic {

// Flushes denormal results to zero and reads denormal inputs as zero on this thread while it
// lives (MXCSR FTZ | DAZ), restoring the previous mode after. Each operation on a denormal
// takes a microcode assist of ~100 cycles: a gated recurrence's decays e^{Σg} fall through the
// denormal range (|x| < 2^−126) within a chunk, and a strongly gated head then made the
// delta-rule prefill 6–13× slower (L = 512, 16 heads of 128: g = −1: 6.3 ms, g = −2 / −5:
// 81 / 40 ms). Values that small are below every tolerance the results are held to.
class FlushDenormals {
 public:
#if defined(__x86_64__) || defined(_M_X64)
  FlushDenormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | kFtz | kDaz); }
  ~FlushDenormals() { _mm_setcsr(saved_); }
#else
  FlushDenormals() = default;
#endif
  FlushDenormals(const FlushDenormals&) = delete;
  FlushDenormals& operator=(const FlushDenormals&) = delete;

 private:
#if defined(__x86_64__) || defined(_M_X64)
  static constexpr unsigned kFtz = 0x8000, kDaz = 0x0040;
  unsigned saved_;
#endif
};

}  // namespace hypic
