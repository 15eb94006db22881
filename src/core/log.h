// Leveled logging to stderr. HYPIC_LOG=debug|info|warn|error|off sets the threshold,
// HYPIC_LOG_FORMAT=text|json (or set_log_format, the commands' --log-format) the form:
//   text  2026-12-07T08:50:01.123Z I message
//   json  {"ts":"2026-12-07T08:50:01.123Z","level":"info","msg":"message"}
// Timestamps are UTC, ISO 8601, milliseconds. JSON event lines (a server's request log) go
// through log_json_line, which puts the same "ts" first; every line is written whole.
#pragma once

#include <cstdarg>
#include <string>

namespace hypic {

enum class LogLevel { kDebug = 0, kInfo, kWarn, kError, kOff };
LogLevel log_level();
void set_log_level(LogLevel l);
void log_msg(LogLevel l, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

enum class LogFormat { kText, kJson };
LogFormat log_format();
void set_log_format(LogFormat f);
// "text" / "json" → the format; false for anything else.
bool parse_log_format(const std::string& name, LogFormat* out);

// The current time as "YYYY-MM-DDTHH:MM:SS.mmmZ".
std::string log_timestamp();
// A JSON object's text ("{...}") as one line on stderr with "ts" as its first field.
void log_json_line(const std::string& object);
// A command's own status line ("hypic serve: model 'x' on http://…"), whatever the threshold:
// as it is in the text form (scripts read these lines), an info object in the JSON form.
void log_status(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace hypic

#define HYPIC_LOG_DEBUG(...) ::hypic::log_msg(::hypic::LogLevel::kDebug, __VA_ARGS__)
#define HYPIC_LOG_INFO(...) ::hypic::log_msg(::hypic::LogLevel::kInfo, __VA_ARGS__)
#define HYPIC_LOG_WARN(...) ::hypic::log_msg(::hypic::LogLevel::kWarn, __VA_ARGS__)
#define HYPIC_LOG_ERROR(...) ::hypic::log_msg(::hypic::LogLevel::kError, __VA_ARGS__)
