// SIGTERM / SIGINT for the long-running commands (`hypic serve`, `worker`, `router`): they
// ask the service to stop (drain) instead of killing the process.
#pragma once

#include <functional>

namespace hypic::cli {

// Routes SIGTERM and SIGINT to a stop request. Installed before loading a model, so that a
// signal during a long load is not lost.
void install_stop_signals();

// Runs `run` (the service's blocking loop) while a watcher thread waits for a stop request or
// for `run` to return, then calls `stop` once (which makes `run` return).
void run_until_stopped(const std::function<void()>& run, const std::function<void()>& stop);

}  // namespace hypic::cli
