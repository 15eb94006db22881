// Decode throughput of Model::decode_batch at B = 1, 8, 16 against B separate forward()
// calls per step. A measurement, not a test (no timing assertions); run it explicitly:
//   HYPIC_BENCH_MODEL=/path/to/checkpoint HYPIC_BENCH_DTYPE=bf16|int8|q4|f32 test_model
//     --gtest_also_run_disabled_tests --gtest_filter='*DecodeBatchBench*'
// HYPIC_BENCH_PROMPT: prompt tokens before the timed steps (default 32); HYPIC_BENCH_STEPS:
// timed steps (default 8); HYPIC_BENCH_B: batch sizes (default "1,8,16").
// Default model: tests/models/qwen3_5_moe in f32 (tiny: shows per-call overhead only).
// Prints a table, then the same figures as one JSON line.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include <nlohmann/json.hpp>

#include "core/timer.h"
#include "kernels/gemv.h"
#include "model/model.h"

namespace hypic {
namespace {

TEST(DecodeBatchBench, DISABLED_TokensPerSecond) {
  const char* env = std::getenv("HYPIC_BENCH_MODEL");
  const std::string dir =
      env ? env : std::string(HYPIC_SOURCE_DIR) + "/tests/models/qwen3_5_moe";
  const char* dt = std::getenv("HYPIC_BENCH_DTYPE");
  const std::string dts = dt ? dt : "f32";
  const DType compute = dts == "bf16"   ? DType::kBF16
                        : dts == "int8" ? DType::kQ8
                        : dts == "q4"   ? DType::kQ4
                                        : DType::kF32;
  auto env_int = [](const char* name, int def) {
    const char* v = std::getenv(name);
    return v ? std::atoi(v) : def;
  };
  const int steps = env_int("HYPIC_BENCH_STEPS", 8), prompt_len = env_int("HYPIC_BENCH_PROMPT", 32);
  std::vector<int> batches;
  for (std::string bs = std::getenv("HYPIC_BENCH_B") ? std::getenv("HYPIC_BENCH_B") : "1,8,16";
       !bs.empty();) {
    const size_t comma = bs.find(',');
    batches.push_back(std::atoi(bs.substr(0, comma).c_str()));
    bs = comma == std::string::npos ? "" : bs.substr(comma + 1);
  }
  auto m = Model::load(dir, {compute, false});
  ASSERT_TRUE(m.is_ok()) << m.status().to_string();
  const Model& model = **m;
  const int64_t V = model.config().vocab_size;
  std::mt19937 rng(1);
  std::printf("model %s (%s), prompt %d tokens, %d timed steps after 2 warm-up\n", dir.c_str(),
              dtype_name(compute), prompt_len, steps);
  std::printf("%4s  %14s  %14s  %8s\n", "B", "batched tok/s", "separate tok/s", "speedup");
  nlohmann::json out = {{"model", dir}, {"dtype", dtype_name(compute)}, {"prompt", prompt_len},
                        {"steps", steps}, {"gemv", std::getenv("HYPIC_GEMV") ? std::getenv("HYPIC_GEMV") : "1"},
                        {"gemv_kernel", kernels::gemv_impl(compute)},
                        {"rows", nlohmann::json::array()}};
  for (int B : batches) {
    std::vector<SeqState> seqs;
    for (int b = 0; b < B; ++b) {
      std::vector<int32_t> prompt(static_cast<size_t>(prompt_len));
      for (auto& t : prompt) t = int32_t(rng() % uint32_t(V));
      seqs.push_back(model.new_state(prompt_len + steps + 8));
      std::vector<float> l;
      ASSERT_TRUE(model.forward(seqs.back(), prompt, LogitsFor::kLast, &l).is_ok());
    }
    std::vector<SeqState*> ptrs;
    for (auto& s : seqs) ptrs.push_back(&s);
    std::vector<int32_t> toks(size_t(B), 1);
    std::vector<float> logits;
    auto batched = [&] { ASSERT_TRUE(model.decode_batch(ptrs, toks, &logits).is_ok()); };
    auto separate = [&] {
      for (auto& s : seqs) ASSERT_TRUE(model.forward(s, {1}, LogitsFor::kLast, &logits).is_ok());
    };
    auto rate = [&](auto&& one_step) {
      for (int i = 0; i < 2; ++i) one_step();
      Timer t;
      for (int i = 0; i < steps; ++i) one_step();
      return double(B) * steps / t.seconds();
    };
    const double rb = rate(batched), rs = rate(separate);
    std::printf("%4d  %14.1f  %14.1f  %7.2fx\n", B, rb, rs, rb / rs);
    out["rows"].push_back({{"B", B}, {"batched_tps", rb}, {"separate_tps", rs}});
  }
  std::printf("%s\n", out.dump().c_str());  // one JSON line for bench/results and bench/plots.py
}

}  // namespace
}  // namespace hypic
