#include "core/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace hypic {
namespace {

LogLevel initial_level() {
  const char* e = std::getenv("HYPIC_LOG");
  if (!e) return LogLevel::kInfo;
  if (!std::strcmp(e, "debug")) return LogLevel::kDebug;
  if (!std::strcmp(e, "warn")) return LogLevel::kWarn;
  if (!std::strcmp(e, "error")) return LogLevel::kError;
  if (!std::strcmp(e, "off")) return LogLevel::kOff;
  return LogLevel::kInfo;
}

std::atomic<LogLevel> g_level{initial_level()};
std::mutex g_mu;

}  // namespace

LogLevel log_level() { return g_level.load(); }
void set_log_level(LogLevel l) { g_level.store(l); }

void log_msg(LogLevel l, const char* fmt, ...) {
  if (l < g_level.load()) return;
  static const char* kNames[] = {"D", "I", "W", "E"};
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const double t = std::chrono::duration<double>(now).count();
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lk(g_mu);
  std::fprintf(stderr, "[%s %.3f] %s\n", kNames[int(l)], t, buf);
}

}  // namespace hypic
