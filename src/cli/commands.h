// The hypic subcommands. Each parses its own arguments (argv[0] = subcommand name) and
// returns the process exit code: 0 success, 1 runtime failure, 2 usage error.
#pragma once

#include <initializer_list>
#include <optional>

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/status.h"

namespace hypic::cli {

int cmd_run(int argc, char** argv);
int cmd_inspect(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_serve(int argc, char** argv);
int cmd_eval(int argc, char** argv);
int cmd_worker(int argc, char** argv);
int cmd_router(int argc, char** argv);
int cmd_quantize(int argc, char** argv);
// hypic bench compose (cmd_bench_compose.cpp), dispatched by cmd_bench.
int bench_compose(int argc, char** argv);
int bench_ttft(int argc, char** argv);
// hypic bench scatter (cmd_bench_scatter.cpp): segment parallelism, measured and simulated.
int bench_scatter(int argc, char** argv);
// hypic bench constrained (cmd_bench_constrained.cpp): the cost of constrained decoding.
int bench_constrained(int argc, char** argv);

// One line of a command list.
struct CommandSummary {
  const char* name;
  const char* summary;
};
// The benchmarks of `hypic bench` (dispatched by cmd_bench); `hypic --help` and
// `hypic bench --help` both list them from here.
inline constexpr CommandSummary kBenchCommands[] = {
    {"prefill", "prefill throughput vs the oneDNN GEMM peak of the same shape"},
    {"decode", "decode tokens/s per batch size: batched step vs separate sequences"},
    {"make-model", "write a random checkpoint with a real model's widths"},
    {"compose", "linear-attention segment transitions: exactness and build cost"},
    {"ttft", "time to first token of a RAG trace in every caching mode"},
    {"scatter", "cold TTFT with scatter workers (segment parallelism), measured and simulated"},
    {"constrained", "constrained decoding (tool calls, JSON schemas): mask and decode cost"},
};
// kBenchCommands as help lines: `indent`, the name padded to `width`, the summary.
std::string bench_command_lines(const std::string& indent, int width);

class Args;
}  // namespace hypic::cli
namespace hypic {
class Model;
class Tokenizer;
struct GenerateOptions;
struct LoadOptions;
}  // namespace hypic
namespace hypic::cli {
// hypic run with --segment/--query (cmd_run_parts.cpp).
int run_parts(const Args& a, const Model& model, const Tokenizer& tok, const GenerateOptions& go);
Result<std::string> read_text_file(const std::string& path);

// Prints "hypic <cmd>: <message>" to stderr and returns the exit code for the status.
int report_error(const std::string& cmd, const Status& s);
// Parses argv into `a` for `hypic <cmd>`. The exit status when the command ends here — a bad
// flag (its message, 2), --help (printed, 0), a flag of `required` missing (2) — else nullopt.
std::optional<int> parse_command(Args& a, int argc, char** argv, const std::string& cmd,
                                 std::initializer_list<const char*> required = {});

// What `hypic <cmd>` runs on (version, CPU, ISA tier, kernels, threads; kernels/system_info.h)
// as its first log line, and a warning when HYPIC_MAX_ISA was ignored.
void log_system_info(const std::string& cmd);
// A model loaded for serving: Model::load, then its kernel self-test (Model::self_test).
Result<std::unique_ptr<Model>> load_checked_model(const std::string& dir, const LoadOptions& lo);

// A benchmark's JSON on stdout with "system" (kernels::system_info_json) added; indent as
// nlohmann's dump.
void print_bench_json(nlohmann::json j, int indent = -1);
// Parses --dtype: bf16, f32 (or fp32), int8 or q4.
Result<DType> parse_dtype(const std::string& s);

}  // namespace hypic::cli
