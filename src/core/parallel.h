// Parallelism over the machine's cores. OpenMP is the one runtime (oneDNN uses it too,
// so both share one thread pool and never oversubscribe).
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <utility>

namespace hypic {

int num_threads();
void set_num_threads(int n);

// Calls f(i) for i in [0, n), spread over the threads. f must be safe to run concurrently
// for distinct i. Runs inline when n is small or when called from inside a parallel region.
// An exception thrown by f never leaves a worker thread (that would end the process): the
// first one stops the iterations not yet started and is rethrown here, on the caller's
// thread, after the region.
template <typename F>
void parallel_for(int64_t n, F&& f, bool region_even_for_one = false) {
  std::exception_ptr error;
  std::atomic<bool> failed{false};
#pragma omp parallel for schedule(dynamic, 1) if (n > 1 || region_even_for_one)
  for (int64_t i = 0; i < n; ++i) {
    if (failed.load(std::memory_order_relaxed)) continue;
    try {
      f(i);
    } catch (...) {
      if (!failed.exchange(true)) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

// parallel_for whose tasks always run inside a parallel region, even a single one: a oneDNN
// primitive executed in a task then runs on that task's thread alone (oneDNN does not nest),
// so its result does not depend on the thread count.
template <typename F>
void parallel_tasks(int64_t n, F&& f) {
  parallel_for(n, std::forward<F>(f), true);
}

}  // namespace hypic
