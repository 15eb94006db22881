// hypic inspect: architecture summary of a model directory (and a check that it loads).
#include <cstdio>

#include "checkpoint/checkpoint.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "core/timer.h"
#include "model/model.h"

namespace hypic::cli {

int cmd_inspect(int argc, char** argv) {
  Args a("hypic inspect --model DIR [--load]",
         "Prints the architecture summary from config.json and the checkpoint's tensors.");
  a.opt("model", "DIR", "model directory")
      .opt("load", "", "also load every weight (validates all shapes) and report the time")
      .opt("dtype", kDtypeValues, kDtypeHelp, "bf16");
  if (auto done = parse_command(a, argc, argv, "inspect", {"model"})) return *done;
  auto dt = parse_dtype(a.str("dtype"));  // checked before anything is printed
  if (!dt) return report_error("inspect", dt.status());
  auto cfg = ModelConfig::from_dir(a.str("model"));
  if (!cfg) return report_error("inspect", cfg.status());
  auto ck = Checkpoint::open(a.str("model"));
  if (ck) cfg->resolve_head(ck->has("lm_head.weight"));
  std::printf("%s\n", cfg->summary().c_str());
  if (!ck) return report_error("inspect", ck.status());
  std::printf("checkpoint: %zu tensors in %zu file(s), %.1f MiB\n", ck->num_tensors(),
              ck->files().size(), double(ck->total_bytes()) / (1 << 20));
  if (a.flag("load")) {
    Timer t;
    LoadOptions lo;
    lo.compute = *dt;
    auto m = Model::load(a.str("model"), lo);
    if (!m) return report_error("inspect", m.status());
    std::printf("loaded and validated all weights in %.2f s\n", t.seconds());
  }
  return 0;
}

}  // namespace hypic::cli
