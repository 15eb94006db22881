// What every `hypic <cmd>` does first: parse its flags, answer --help, report errors.
#include <cstdio>

#include "cli/args.h"
#include "cli/commands.h"

namespace hypic::cli {

int report_error(const std::string& cmd, const Status& s) {
  std::fprintf(stderr, "hypic %s: %s\n", cmd.c_str(), s.message().c_str());
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
  if (Status s = a.parse(argc, argv); !s) return report_error(cmd, s);
  if (a.help_requested()) return std::printf("%s", a.help().c_str()), 0;
  for (const char* flag : required)
    if (!a.has(flag))
      return report_error(cmd, invalid_argument("--" + std::string(flag) + " is required; see --help"));
  return std::nullopt;
}

}  // namespace hypic::cli
