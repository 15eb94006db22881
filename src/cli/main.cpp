#include <cstdio>
#include <cstring>
#include <string>

#include "cli/commands.h"

namespace {

const char* kUsage =
    "hypic — serving engine for hybrid-attention LLMs (Qwen3-Next, Qwen3.5)\n\n"
    "usage: hypic <command> [options]      (hypic <command> --help for details)\n\n"
    "commands:\n"
    "  run       run one request (prompt from flags or a file); text or a JSON report\n"
    "  inspect   print a model's architecture summary\n"
    "  serve     OpenAI-compatible HTTP server\n"
    "  bench     benchmarks printing JSON (prefill, make-model)\n";

bool cpu_ok() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

}  // namespace

int main(int argc, char** argv) {
  if (!cpu_ok()) {
    std::fprintf(stderr, "hypic: this build needs a CPU with AVX2 and FMA (x86-64-v3)\n");
    return 1;
  }
  if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help") ||
      !std::strcmp(argv[1], "help")) {
    std::fprintf(argc < 2 ? stderr : stdout, "%s", kUsage);  // no command: a usage error
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  if (cmd == "run") return hypic::cli::cmd_run(argc - 1, argv + 1);
  if (cmd == "inspect") return hypic::cli::cmd_inspect(argc - 1, argv + 1);
  if (cmd == "bench") return hypic::cli::cmd_bench(argc - 1, argv + 1);
  if (cmd == "serve") return hypic::cli::cmd_serve(argc - 1, argv + 1);
  std::fprintf(stderr, "hypic: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
  return 2;
}
