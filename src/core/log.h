// Leveled logging to stderr. HYPIC_LOG=debug|info|warn|error sets the threshold.
#pragma once

#include <cstdarg>

namespace hypic {

enum class LogLevel { kDebug = 0, kInfo, kWarn, kError, kOff };
LogLevel log_level();
void set_log_level(LogLevel l);
void log_msg(LogLevel l, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace hypic

#define HYPIC_LOG_DEBUG(...) ::hypic::log_msg(::hypic::LogLevel::kDebug, __VA_ARGS__)
#define HYPIC_LOG_INFO(...) ::hypic::log_msg(::hypic::LogLevel::kInfo, __VA_ARGS__)
#define HYPIC_LOG_WARN(...) ::hypic::log_msg(::hypic::LogLevel::kWarn, __VA_ARGS__)
#define HYPIC_LOG_ERROR(...) ::hypic::log_msg(::hypic::LogLevel::kError, __VA_ARGS__)
