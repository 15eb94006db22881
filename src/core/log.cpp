#include "core/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>

#include <nlohmann/json.hpp>

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

LogFormat initial_format() {
  const char* e = std::getenv("HYPIC_LOG_FORMAT");
  LogFormat f = LogFormat::kText;
  if (e) parse_log_format(e, &f);
  return f;
}

std::atomic<LogLevel> g_level{initial_level()};
std::atomic<LogFormat> g_format{initial_format()};
std::mutex g_mu;

}  // namespace

LogLevel log_level() { return g_level.load(); }
void set_log_level(LogLevel l) { g_level.store(l); }
LogFormat log_format() { return g_format.load(); }
void set_log_format(LogFormat f) { g_format.store(f); }

bool parse_log_format(const std::string& name, LogFormat* out) {
  if (name == "text") return *out = LogFormat::kText, true;
  if (name == "json") return *out = LogFormat::kJson, true;
  return false;
}

std::string log_timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t s = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[40];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", int(ms));
  return buf;
}

namespace {

// One formatted line at level l; `status`: a command's status line, without time and level in
// the text form.
void emit(LogLevel l, bool status, const char* fmt, va_list ap) {
  static const char* kShort[] = {"D", "I", "W", "E"};
  static const char* kLong[] = {"debug", "info", "warn", "error"};
  char buf[2048];
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  const std::string ts = log_timestamp();
  std::string line;
  if (g_format.load() == LogFormat::kJson) {
    // The message may hold bytes of a damaged file: invalid UTF-8 is replaced, never thrown.
    line = nlohmann::ordered_json{{"ts", ts}, {"level", kLong[int(l)]}, {"msg", buf}}.dump(
        -1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  } else {
    line = status ? std::string(buf) : ts + " " + kShort[int(l)] + " " + buf;
  }
  std::lock_guard<std::mutex> lk(g_mu);
  std::fprintf(stderr, "%s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace

void log_msg(LogLevel l, const char* fmt, ...) {
  if (l < g_level.load()) return;
  va_list ap;
  va_start(ap, fmt);
  emit(l, false, fmt, ap);
  va_end(ap);
}

void log_status(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit(LogLevel::kInfo, true, fmt, ap);
  va_end(ap);
}

void log_json_line(const std::string& object) {
  std::string line = "{\"ts\":\"" + log_timestamp() + "\"";
  if (object.size() > 2 && object.front() == '{') line += "," + object.substr(1);
  else line += "}";
  std::lock_guard<std::mutex> lk(g_mu);
  std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace hypic
