// hypic eval: accuracy and TTFT of every PIC mode on multi-document reading tasks
// (bench/eval.h); a table, or the JSON document, on stdout.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/eval.h"
#include "bench/eval_tools.h"
#include "cli/args.h"
#include "cli/commands.h"

namespace hypic::cli {
namespace {

void print_table(const nlohmann::json& out, const std::vector<std::string>& tasks) {
  std::printf("%-16s", "mode / seam");
  for (const auto& t : tasks) std::printf(" %10s", t.c_str());
  std::printf(" %8s %8s %9s %9s %12s %12s\n", "mean", "vs full", "reply nll", "= full", "ttft cold ms",
              "ttft warm ms");
  for (const auto& r : out["results"]) {
    std::string name = r["mode"].get<std::string>();
    if (!r["seam"].is_null()) name.append(" ").append(std::to_string(r["seam"].get<int>()));
    std::printf("%-16s", name.c_str());
    double cold_ms = 0, warm_ms = 0;
    for (const auto& t : tasks) {
      const auto& tj = r["tasks"].value(t, nlohmann::json::object());
      std::printf(" %10.3f", tj.value("exact_match", 0.0));
      cold_ms += tj.value("ttft_cold_ms", 0.0) / double(tasks.size());
      warm_ms += tj.value("ttft_warm_ms", 0.0) / double(tasks.size());
    }
    const auto& ag = r["mean_agreement_with_full"];
    std::printf(" %8.3f %+8.2f %9.4f %9s %12.1f %12.1f\n", r["mean_exact_match"].get<double>(),
                r.value("points_vs_full", 0.0), r["mean_reply_nll"].get<double>(),
                ag.is_null() ? "-" : std::to_string(ag.get<double>()).substr(0, 5).c_str(), cold_ms, warm_ms);
  }
}

void print_tool_table(const nlohmann::json& out) {
  std::printf("%-16s %8s %8s %8s %8s %8s %8s %12s %12s %12s\n", "mode / seam", "name", "args", "valid", "answer",
              "no call", "= full", "ttft cold ms", "ttft warm ms", "after result");
  for (const auto& r : out["results"]) {
    std::string name = r["mode"].get<std::string>();
    if (!r["seam"].is_null()) name.append(" ").append(std::to_string(r["seam"].get<int>()));
    double cold_ms = 0, warm_ms = 0, result_ms = 0;
    int n = 0, calling = 0;
    for (const auto& [t, tj] : r["tasks"].items()) {
      cold_ms += tj["ttft_cold_ms"].get<double>() * tj["n"].get<int>();
      warm_ms += tj["ttft_warm_ms"].get<double>() * tj["n"].get<int>();
      n += tj["n"].get<int>();
      if (tj["ttft_result_ms"].is_null()) continue;
      result_ms += tj["ttft_result_ms"].get<double>() * tj["n"].get<int>();
      calling += tj["n"].get<int>();
    }
    const auto& nt = r["tasks"].value("no_tool", nlohmann::json::object());
    const auto no_call = nt.value("no_call_rate", nlohmann::json(nullptr));
    const auto& ag = r["agreement_with_full"];
    auto cell = [](const nlohmann::json& v) { return v.is_null() ? std::string("-") : std::to_string(v.get<double>()).substr(0, 5); };
    std::printf("%-16s %8.3f %8.3f %8.3f %8.3f %8s %8s %12.1f %12.1f %12.1f\n", name.c_str(),
                r["mean_name_accuracy"].get<double>(), r["mean_args_accuracy"].get<double>(),
                r["mean_valid_call_rate"].get<double>(), r["mean_answer_accuracy"].get<double>(),
                cell(no_call).c_str(), cell(ag).c_str(),
                n ? cold_ms / n : 0.0, n ? warm_ms / n : 0.0, calling ? result_ms / calling : 0.0);
  }
}

}  // namespace

int cmd_eval(int argc, char** argv) {
  Args a("hypic eval --model DIR [--data FILE] [--tasks LIST|tools] [--n N] [--modes LIST] [--seams LIST] [--json]",
         "Accuracy (exact match and F1 of the normalised answer) and mean TTFT per (task, mode,\n"
         "seam) on multi-document reading tasks, greedy, through the engine. Each record runs\n"
         "cold (scored) and warm with its documents rotated by one place (timed).\n"
         "--tasks tools (or a list of tool_direct, tool_doc, tool_two, no_tool): tool calling\n"
         "instead, through the server's request path with the tools as segments: tool-name and\n"
         "exact-argument accuracy, valid-call rate, the answer after the tools' results, TTFT cold\n"
         "and warm (tools in a new order and subset); data DIR/eval/tools_heldout.jsonl, records of\n"
         "tools/tiny/gen_tools.py. Progress on stderr; a table (or --json) on stdout.");
  a.opt("model", "DIR|FILE.gguf", "model directory (Hugging Face), or a GGUF file (llama.cpp's; a split: its first part)")
      .opt("data", "FILE", "JSONL task records (tools/tiny/gen_data.py; gen_tools.py for tools)",
           "DIR/eval/heldout.jsonl, with tools DIR/eval/tools_heldout.jsonl")
      .opt("tasks", "LIST", "task types to run, or 'tools' (every tool task)", "single,two_hop,aggregate")
      .opt("n", "N", "records per task (the first N of each)", "100")
      .opt("modes", "LIST", "PIC modes", "full,prefix,hypic,naive")
      .opt("seams", "LIST", "seam widths for hypic and naive", "0,4,8,16")
      .opt("max-tokens", "N", "answer length limit", "48; with tools 224")
      .opt("cache-mem", "MiB", "segment / prefix cache budget per configuration (as run and serve)", "1024")
      .opt("dtype", kDtypeValues, kDtypeHelp, "bf16")
      .opt("json", "", "print one JSON document instead of the table");
  if (auto done = parse_command(a, argc, argv, "eval", {"model"})) return *done;
  bench::EvalOptions o;
  o.model = a.str("model");
  o.tasks = split_list(a.str("tasks"));
  const bool tools = std::any_of(o.tasks.begin(), o.tasks.end(), [](const std::string& t) {
    return t == "tools" || t.rfind("tool_", 0) == 0 || t == "no_tool";
  });
  if (tools && o.tasks == std::vector<std::string>{"tools"}) o.tasks.clear();  // every tool task
  o.data = a.has("data") ? a.str("data") : o.model + (tools ? "/eval/tools_heldout.jsonl" : "/eval/heldout.jsonl");
  auto n = a.integer("n");
  auto max_tokens = a.has("max-tokens") ? a.integer("max-tokens") : Result<int64_t>(tools ? 224 : 48);
  auto mem = a.integer("cache-mem");
  for (const Status* s : {&n.status(), &max_tokens.status(), &mem.status()})
    if (!s->is_ok()) return report_error("eval", *s);
  if (*n < 1 || *max_tokens < 1 || *mem < 0)
    return report_error("eval", invalid_argument("need --n >= 1, --max-tokens >= 1, --cache-mem >= 0"));
  auto dt = parse_dtype(a.str("dtype"));
  if (!dt) return report_error("eval", dt.status());

  auto seams = int_list(a.str("seams"), "seams", 0, 4096);
  if (!seams) return report_error("eval", seams.status());
  std::vector<PicMode> modes;
  for (const auto& m : split_list(a.str("modes"))) {
    PicMode mode;
    if (!parse_pic_mode(m, &mode))
      return report_error("eval", invalid_argument("unknown mode '" + m + "' (full, prefix, hypic, naive)"));
    modes.push_back(mode);
  }
  o.configs = bench::eval_configs(modes, *seams);
  o.n = *n;
  o.max_tokens = int(*max_tokens);
  o.cache_mem_mib = *mem;
  o.dtype = *dt;
  o.dtype_label = a.str("dtype");
  log_system_info("eval");
  auto out = tools ? bench::run_tool_eval(o) : bench::run_eval(o);
  if (!out) return report_error("eval", out.status());
  if (a.flag("json")) {
    print_bench_json(*out, 2);
    return 0;
  }
  if (tools) print_tool_table(*out);
  else print_table(*out, o.tasks);
  return 0;
}

}  // namespace hypic::cli
