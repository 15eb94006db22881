#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cli/commands.h"
#include "core/cpu.h"
#include "kernels/system_info.h"

namespace {

std::string usage() {
  return "hypic — serving engine for hybrid-attention LLMs (Qwen3.5, Qwen3-Next, Ring-linear, MiniMax, Kimi-Linear, Ling)\n\n"
         "usage: hypic <command> [options]      (hypic <command> --help for details)\n\n"
         "commands:\n"
         "  run       run one request: a prompt, or documents + a question; text or a JSON report\n"
         "  inspect   print a model's architecture summary and its checkpoint's tensors\n"
         "  quantize  write a copy of a model with int8 / q4 matrices (converted once)\n"
         "  serve     OpenAI-compatible HTTP server (alone, or an instance behind hypic router)\n"
         "  worker    scatter worker: builds segment entries for a combine worker (gRPC)\n"
         "  router    cluster entry point: routes requests to instances by cache affinity\n"
         "  eval      accuracy and TTFT of every PIC mode on multi-document reading tasks\n"
         "  bench     benchmarks printing JSON:\n" +
         hypic::cli::bench_command_lines("    bench ", 11) +
         "\n  --version  the version, this CPU, its ISA tier and the kernels each weight type runs on\n\n"
         "environment:\n"
         "  HYPIC_MAX_ISA=" + hypic::cpu::tier_names() + "\n"
         "            run the kernels of that tier at most (oneDNN's too), e.g. to run on an AVX-512\n"
         "            machine exactly what an AVX2-only CPU runs\n";
}

// hypic --version: the system_info line, a fact a line.
void print_version() {
  std::string s = hypic::kernels::system_info_line();
  for (size_t at; (at = s.find(" | ")) != std::string::npos;) s.replace(at, 3, "\n");
  std::printf("%s\n", s.c_str());
}

// One iteration of a spin-wait loop: `pause` on x86-64, `yield` on aarch64.
inline void cpu_relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#else
  __asm__ volatile("yield" ::: "memory");
#endif
}

// Spin iterations of libgomp's wait loop (one cpu_relax each) that last about `us` on this
// CPU: a pause is ~10 ns on some cores and ~40 on others, so a fixed count is not a fixed time.
unsigned long spins_lasting(double us) {
  constexpr int kProbe = 20000;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kProbe; ++i) cpu_relax();
  const double ns = std::chrono::duration<double, std::nano>(
                        std::chrono::steady_clock::now() - t0).count() / kProbe;
  return static_cast<unsigned long>(std::clamp(us * 1000.0 / std::max(ns, 0.5), 1e3, 1e6));
}

// OpenMP's default wait (spinning ~3 ms between parallel regions) steals the core a partner
// thread or another process needs: a 3,000-token prefill of hypic-tiny took 4.4 s spinning
// against 0.51 s passive while another process was busy. Fully passive waiting (a futex sleep
// and wake per parallel region) halves the decode speed of a small model, whose step is a few
// hundred µs with serial stretches of up to ~60 µs between regions (hypic-tiny bf16, Xeon:
// 480–550 tok/s passive, 1,150–1,300 spinning ≥ 80 µs). So: spin ~150 µs, then sleep; and
// sleep at once when this process has more OpenMP threads than CPUs (passive's throttled
// count is 0). The runtime reads the policy once at load, so set it and re-execute; an
// explicit OMP_WAIT_POLICY or GOMP_SPINCOUNT from the user is kept.
void ensure_openmp_wait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  setenv("OMP_WAIT_POLICY", "passive", 1);
  setenv("GOMP_SPINCOUNT", std::to_string(spins_lasting(150)).c_str(), 1);
  execv("/proc/self/exe", argv);  // returns only on failure: carry on with the default policy
}

}  // namespace

int main(int argc, char** argv) {
  ensure_openmp_wait(argv);
#if defined(__x86_64__)
  if (int(hypic::cpu::best_tier()) < int(hypic::cpu::Tier::kAvx2)) {
    std::fprintf(stderr, "hypic: this build needs a CPU with AVX2, FMA and F16C (x86-64-v3) and an OS "
                         "that enables AVX; this one has: %s\n", hypic::cpu::feature_names().c_str());
    return 1;
  }
#endif
  if (const char* cap = std::getenv("HYPIC_MAX_ISA"); cap && *cap && !hypic::cpu::parse_tier(cap).is_ok()) {
    std::fprintf(stderr, "hypic: HYPIC_MAX_ISA: %s\n", hypic::cpu::parse_tier(cap).status().message().c_str());
    return 2;
  }
  if (argc < 2 || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "--help") ||
      !std::strcmp(argv[1], "help")) {
    std::fprintf(argc < 2 ? stderr : stdout, "%s", usage().c_str());  // no command: a usage error
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  if (cmd == "--version" || cmd == "version") return print_version(), 0;
  if (cmd == "run") return hypic::cli::cmd_run(argc - 1, argv + 1);
  if (cmd == "inspect") return hypic::cli::cmd_inspect(argc - 1, argv + 1);
  if (cmd == "bench") return hypic::cli::cmd_bench(argc - 1, argv + 1);
  if (cmd == "serve") return hypic::cli::cmd_serve(argc - 1, argv + 1);
  if (cmd == "eval") return hypic::cli::cmd_eval(argc - 1, argv + 1);
  if (cmd == "worker") return hypic::cli::cmd_worker(argc - 1, argv + 1);
  if (cmd == "router") return hypic::cli::cmd_router(argc - 1, argv + 1);
  if (cmd == "quantize") return hypic::cli::cmd_quantize(argc - 1, argv + 1);
  std::fprintf(stderr, "hypic: unknown command '%s'\n\n%s", cmd.c_str(), usage().c_str());
  return 2;
}
