// hypic bench constrained: the cost of constrained decoding (bench/constrained.h), one JSON
// document.
#include <cstdio>
#include <string>

#include "bench/constrained.h"
#include "cli/args.h"
#include "cli/commands.h"

namespace hypic::cli {

int bench_constrained(int argc, char** argv) {
  Args a("hypic bench constrained --model DIR [--tokens N --reps R --dtype T]",
         "The cost of constrained decoding: the full vocabulary mask and the one-token check along a\n"
         "tool call in the model's vocabulary, and decode ms per token free against under a\n"
         "tool-call grammar (greedy and temperature 1, interleaved), with the share of tokens that\n"
         "needed the full mask.");
  a.opt("model", "DIR|FILE.gguf", "model directory (config.json, weights, tokenizer), or a GGUF file")
      .opt("tokens", "N", "tokens decoded per run", "64")
      .opt("prompt-tokens", "N", "random prompt length", "64")
      .opt("reps", "R", "interleaved free / constrained pairs per sampling mode", "3")
      .opt("dtype", "bf16|f32|int8|q4", "matrix weights", "bf16")
      .opt("seed", "S", "prompt seed", "1")
      .opt("json", "", "print JSON (the default)");
  if (auto done = parse_command(a, argc, argv, "bench constrained")) return *done;
  auto tokens = a.integer("tokens"), prompt = a.integer("prompt-tokens"), reps = a.integer("reps"), seed = a.integer("seed");
  auto dt = parse_dtype(a.str("dtype"));
  for (const Status* s : {&tokens.status(), &prompt.status(), &reps.status(), &seed.status(), &dt.status()})
    if (!s->is_ok()) return report_error("bench constrained", *s);
  if (!a.has("model") || *tokens < 2 || *prompt < 1 || *reps < 1)
    return report_error("bench constrained", invalid_argument("need --model DIR, --tokens >= 2, --prompt-tokens >= 1, --reps >= 1"));
  bench::ConstrainedBenchOptions o;
  o.model = a.str("model");
  o.dtype = *dt;
  o.tokens = int(*tokens);
  o.prompt_tokens = int(*prompt);
  o.reps = int(*reps);
  o.seed = uint32_t(*seed);
  auto r = bench::run_constrained_bench(o);
  if (!r) return report_error("bench constrained", r.status());
  print_bench_json(*r, 2);
  return 0;
}

}  // namespace hypic::cli
