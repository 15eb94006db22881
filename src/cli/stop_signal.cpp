#include "cli/stop_signal.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

namespace hypic::cli {
namespace {
volatile std::sig_atomic_t g_stop = 0;
extern "C" void on_stop_signal(int) { g_stop = 1; }
}  // namespace

void install_stop_signals() {
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGINT, on_stop_signal);
}

void run_until_stopped(const std::function<void()>& run, const std::function<void()>& stop) {
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done.load() && !g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    stop();
  });
  run();
  done = true;
  watcher.join();
}

}  // namespace hypic::cli
