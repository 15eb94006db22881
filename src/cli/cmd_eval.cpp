// hypic eval: accuracy and TTFT of every PIC mode on multi-document reading tasks
// (bench/eval.h); a table, or the JSON document, on stdout.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/eval.h"
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

}  // namespace

int cmd_eval(int argc, char** argv) {
  Args a("hypic eval --model DIR [--data FILE] [--tasks LIST] [--n N] [--modes LIST] [--seams LIST] [--json]",
         "Accuracy (exact match and F1 of the normalised answer) and mean TTFT per (task, mode,\n"
         "seam) on multi-document reading tasks, greedy, through the engine. Each record runs\n"
         "cold (scored) and warm with its documents rotated by one place (timed). Progress on\n"
         "stderr; a table (or --json) on stdout.");
  a.opt("model", "DIR|FILE.gguf", "model directory (Hugging Face), or a GGUF file (llama.cpp's; a split: its first part)")
      .opt("data", "FILE", "JSONL task records (tools/tiny/gen_data.py)", "DIR/eval/heldout.jsonl")
      .opt("tasks", "LIST", "task types to run", "single,two_hop,aggregate")
      .opt("n", "N", "records per task (the first N of each)", "100")
      .opt("modes", "LIST", "PIC modes", "full,prefix,hypic,naive")
      .opt("seams", "LIST", "seam widths for hypic and naive", "0,4,8,16")
      .opt("max-tokens", "N", "answer length limit", "48")
      .opt("cache-mem", "MiB", "segment / prefix cache budget per configuration (as run and serve)", "1024")
      .opt("dtype", kDtypeValues, kDtypeHelp, "bf16")
      .opt("json", "", "print one JSON document instead of the table");
  if (auto done = parse_command(a, argc, argv, "eval", {"model"})) return *done;
  bench::EvalOptions o;
  o.model = a.str("model");
  o.data = a.has("data") ? a.str("data") : o.model + "/eval/heldout.jsonl";
  auto n = a.integer("n");
  auto max_tokens = a.integer("max-tokens");
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
  o.tasks = split_list(a.str("tasks"));
  o.n = *n;
  o.max_tokens = int(*max_tokens);
  o.cache_mem_mib = *mem;
  o.dtype = *dt;
  o.dtype_label = a.str("dtype");
  log_system_info("eval");
  auto out = bench::run_eval(o);
  if (!out) return report_error("eval", out.status());
  if (a.flag("json")) {
    print_bench_json(*out, 2);
    return 0;
  }
  print_table(*out, o.tasks);
  return 0;
}

}  // namespace hypic::cli
