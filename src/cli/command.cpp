// What every `hypic <cmd>` does first: parse its flags, answer --help, report errors.
#include <cstdio>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/log.h"

namespace hypic::cli {

int report_error(const std::string& cmd, const Status& s) {
  if (log_format() == LogFormat::kJson) log_msg(LogLevel::kError, "hypic %s: %s", cmd.c_str(), s.message().c_str());
  else std::fprintf(stderr, "hypic %s: %s\n", cmd.c_str(), s.message().c_str());
  return s.code() == StatusCode::kInvalidArgument ? 2 : 1;
}

Result<DType> parse_dtype(const std::string& s) {
  if (s == "bf16") return DType::kBF16;
  if (s == "f32" || s == "fp32") return DType::kF32;
  if (s == "int8") return DType::kQ8;
  if (s == "q4") return DType::kQ4;
  return invalid_argument("--dtype must be bf16, f32, int8 or q4, got '" + s + "'");
}

std::optional<int> parse_command(Args& a, int argc, char** argv, const std::string& cmd,
                                 std::initializer_list<const char*> required) {
  // Every command logs the same way: one flag for the form of its stderr lines.
  a.opt("log-format", "text|json", "log lines on stderr: text (ISO 8601 UTC time, level, message) or one JSON "
                                   "object a line, request logs included (also $HYPIC_LOG_FORMAT)");
  if (Status s = a.parse(argc, argv); !s) return report_error(cmd, s);
  if (a.help_requested()) return std::printf("%s", a.help().c_str()), 0;
  if (a.has("log-format")) {
    LogFormat f;
    if (!parse_log_format(a.str("log-format"), &f))
      return report_error(cmd, invalid_argument("--log-format must be text or json, got '" + a.str("log-format") + "'"));
    set_log_format(f);
  }
  for (const char* flag : required)
    if (!a.has(flag))
      return report_error(cmd, invalid_argument("--" + std::string(flag) + " is required; see --help"));
  return std::nullopt;
}

}  // namespace hypic::cli
