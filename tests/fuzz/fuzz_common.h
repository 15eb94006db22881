// Shared helpers of the fuzz targets (tests/fuzz/README.md).
#pragma once

#include <cstdio>
#include <cstdlib>

// An invariant a target checks: on failure, prints it and aborts, so libFuzzer records the
// input as a crash (like a sanitizer report).
#define FUZZ_CHECK(cond, ...)                                                        \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, "" __VA_ARGS__);                                          \
      std::fprintf(stderr, "\n");                                                    \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)
