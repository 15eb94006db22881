// hypic bench compose: segment transition operators per linear-attention family
// (bench/compose.h), one JSON object per family.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "bench/compose.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "core/parallel.h"

namespace hypic::cli {

int bench_compose(int argc, char** argv) {
  using kernels::Family;
  std::string fams;
  for (Family f : kernels::all_families()) fams += std::string(" ") + kernels::family_name(f);
  Args a("hypic bench compose --family F --tokens L [--heads H --dk D --dv D] [--model DIR] [--json]",
         "Segment transition operators: the composed end state T_C·S0 + S(C|0) against direct\n"
         "computation, naive addition S0 + S(C|0), and the cost of building (T_C, S(C|0))\n"
         "against a plain prefill.\nFamilies:" + fams +
             ", or all.\nWith --model DIR (Gated DeltaNet or Lightning linear layers) the model's family\n"
             "runs at its layer's shape (decay, RoPE inside the layer: then the entry is built at\n"
             "canonical positions and re-rotated on composition) and also reports the extra build\n"
             "time of all its linear layers relative to one whole forward over the same tokens.");
  a.opt("family", "F", "family name, or all", "all")
      .opt("tokens", "L", "segment length", "256")
      .opt("heads", "H", "heads (value heads; default 16, Gated DeltaNet 16 key / 32 value)", "16")
      .opt("dk", "D", "key dim", "128")
      .opt("dv", "D", "value dim", "128")
      .opt("prefix", "P", "prefix length (default: random in [L, 4L])")
      .opt("reps", "R", "timed repetitions after one warm-up (best is reported)", "5")
      .opt("seed", "S", "input seed", "1")
      .opt("threads", "N", "threads (default: all)")
      .opt("model", "DIR", "also measure a whole forward of this model (its linear layers' family)")
      .opt("forward-reps", "R", "timed forward repetitions with --model (best is reported)", "2")
      .opt("json", "", "print JSON (the default; kept for symmetry)");
  if (auto done = parse_command(a, argc, argv, "bench compose")) return *done;
  auto L = a.integer("tokens");
  auto H = a.integer("heads");
  auto dk = a.integer("dk");
  auto dv = a.integer("dv");
  auto reps = a.integer("reps");
  auto seed = a.integer("seed");
  if (!L || !H || !dk || !dv || !reps || !seed || *L < 1 || *H < 1 || *dk < 1 || *dv < 1 || *reps < 1)
    return report_error("bench compose",
                        invalid_argument("need integer --tokens >= 1, --heads/--dk/--dv >= 1, --reps >= 1"));
  if (a.has("threads")) {
    auto n = a.integer("threads");
    if (!n || *n < 1) return report_error("bench compose", invalid_argument("--threads N >= 1"));
    set_num_threads(int(*n));
  }
  std::vector<Family> families;
  if (a.str("family") == "all") {
    families = kernels::all_families();
  } else {
    Family f;
    if (!kernels::parse_family(a.str("family"), &f))
      return report_error("bench compose", invalid_argument("unknown --family '" + a.str("family") +
                                                            "'; one of:" + fams + ", all"));
    families = {f};
  }
  bench::ComposeBenchOptions o;
  o.tokens = int(*L);
  o.heads = int(*H);
  o.dk = int(*dk);
  o.dv = int(*dv);
  o.heads_given = a.has("heads");
  o.reps = int(*reps);
  o.seed = uint32_t(*seed);
  if (a.has("prefix")) {
    auto p = a.integer("prefix");
    if (!p || *p < 0) return report_error("bench compose", invalid_argument("--prefix P >= 0"));
    o.prefix = int(*p);
  }
  std::optional<bench::ModelForward> model;
  if (a.has("model")) {
    auto freps = a.integer("forward-reps");
    if (!freps || *freps < 1) return report_error("bench compose", invalid_argument("--forward-reps R >= 1"));
    auto m = bench::measure_forward(a.str("model"), o.tokens, int(*freps));
    if (!m) return report_error("bench compose", m.status());
    model = std::move(*m);
  }
  for (Family f : families)
    print_bench_json(bench::bench_compose_family(f, o, model ? &*model : nullptr));
  return 0;
}

}  // namespace hypic::cli
