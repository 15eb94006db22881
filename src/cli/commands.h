// The hypic subcommands. Each parses its own arguments (argv[0] = subcommand name) and
// returns the process exit code: 0 success, 1 runtime failure, 2 usage error.
#pragma once

#include <string>

#include "core/dtype.h"
#include "core/status.h"

namespace hypic::cli {

int cmd_run(int argc, char** argv);
int cmd_inspect(int argc, char** argv);
int cmd_bench(int argc, char** argv);

// Prints "hypic <cmd>: <message>" to stderr and returns the exit code for the status.
int report_error(const std::string& cmd, const Status& s);
// Parses --dtype: "bf16" or "f32".
Result<DType> parse_dtype(const std::string& s);

}  // namespace hypic::cli
