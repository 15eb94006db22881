// Minimal command-line parsing for the hypic subcommands: --flag VALUE, --flag=VALUE,
// boolean --switch, repeated flags, and generated --help text.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace hypic::cli {

class Args {
 public:
  Args(std::string usage, std::string description)
      : usage_(std::move(usage)), description_(std::move(description)) {}
  // Declare options before parse(). `value_name` empty means a boolean switch.
  Args& opt(const std::string& name, const std::string& value_name, const std::string& help,
            const std::string& default_value = "");
  Status parse(int argc, char** argv);  // argv[0] is the subcommand
  std::string help() const;
  bool help_requested() const { return help_; }

  bool has(const std::string& name) const { return values_.count(name) != 0; }
  bool flag(const std::string& name) const { return has(name); }
  std::string str(const std::string& name) const;  // value or default
  std::vector<std::string> all(const std::string& name) const;
  Result<int64_t> integer(const std::string& name) const;
  Result<double> number(const std::string& name) const;

 private:
  struct Opt {
    std::string value_name, help, def;
  };
  std::string usage_, description_;
  std::vector<std::string> order_;
  std::map<std::string, Opt> opts_;
  std::map<std::string, std::vector<std::string>> values_;
  bool help_ = false;
};

// The --dtype of the commands that load a model to compute with: one wording everywhere.
inline constexpr const char* kDtypeValues = "bf16|f32|int8|q4";
inline constexpr const char* kDtypeHelp =
    "matrix weights: bf16, f32 (exact reference path), int8 (per output channel) or q4 (4-bit, "
    "groups of 32), quantized at load";

// "a,b,,c" → {"a","b","c"} (empty entries dropped).
std::vector<std::string> split_list(const std::string& list);

// "1,8,16" → {1, 8, 16}; each entry an integer in [lo, hi] (`flag` names the option in errors).
Result<std::vector<int>> int_list(const std::string& list, const std::string& flag, int lo, int hi);

// "a,b,c" → {"a","b","c"}; each entry must be host:port (`flag` names the option in errors).
Result<std::vector<std::string>> host_port_list(const std::string& list, const std::string& flag);

// The address a cluster member tells the router (--advertise, else host:port; a wildcard
// host such as 0.0.0.0 cannot be reached, so it needs --advertise).
Result<std::string> advertised_address(const Args& a, const std::string& host, int port);

}  // namespace hypic::cli
