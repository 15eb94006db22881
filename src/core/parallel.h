// Parallelism over the machine's cores. OpenMP is the one runtime (oneDNN uses it too,
// so both share one thread pool and never oversubscribe).
#pragma once

#include <cstdint>

namespace hypic {

int num_threads();
void set_num_threads(int n);

// Calls f(i) for i in [0, n), spread over the threads. f must be safe to run concurrently
// for distinct i. Runs inline when n is small or when called from inside a parallel region.
template <typename F>
void parallel_for(int64_t n, F&& f) {
#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
  for (int64_t i = 0; i < n; ++i) f(i);
}

}  // namespace hypic
