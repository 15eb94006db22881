// The hypic binary end to end: help texts, run (text and --json) on the tiny dense Qwen3.5
// checkpoint against the transformers goldens, inspect, bench, and bad invocations (non-zero
// exit code, a message on stderr, nothing on stdout). HYPIC_BIN is the built binary
// ($<TARGET_FILE:hypic>, see tests/CMakeLists.txt).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#ifndef HYPIC_BIN
#error "HYPIC_BIN (path of the hypic binary) must be defined by the build"
#endif

namespace {

namespace fs = std::filesystem;

struct Proc {
  int rc = -1;
  std::string out, err;
};

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(::testing::TempDir()) / "hypic_cli_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    tmp_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }

  // Runs hypic with `args` (after `env_prefix`, words for env(1)); stdout through the pipe,
  // stderr into a file.
  Proc hypic(const std::vector<std::string>& args, const std::string& env_prefix = "") const {
    const fs::path err = tmp_ / "stderr.txt";
    std::string cmd = env_prefix.empty() ? quote(HYPIC_BIN) : "env " + env_prefix + " " + quote(HYPIC_BIN);
    for (const auto& a : args) {
      cmd += ' ';
      cmd += quote(a);
    }
    cmd += " 2>";
    cmd += quote(err.string());
    cmd += " </dev/null";
    Proc r;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return r;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
    const int st = ::pclose(p);
    r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    r.err = read_file(err);
    return r;
  }

  // A usage or runtime error: non-zero exit, "hypic ..." message on stderr containing
  // `needle`, nothing on stdout.
  void expect_error(const std::vector<std::string>& args, const std::string& needle, int rc = -1) {
    const Proc r = hypic(args);
    std::string all;
    for (const auto& a : args) all += a + " ";
    EXPECT_NE(r.rc, 0) << all;
    if (rc >= 0) {
      EXPECT_EQ(r.rc, rc) << all << "\n" << r.err;
    }
    EXPECT_LT(r.rc, 128) << "crashed: " << all << "\n" << r.err;
    EXPECT_EQ(r.out, "") << all;
    EXPECT_NE(r.err.find("hypic"), std::string::npos) << all << "\n" << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << all << "\nstderr: " << r.err;
  }

  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(tmp_ / name, std::ios::binary) << text;
    return tmp_ / name;
  }

  static std::string model(const std::string& name = "qwen3_5_dense") {
    return std::string(HYPIC_SOURCE_DIR) + "/tests/models/" + name;
  }
  static nlohmann::json golden() {
    return nlohmann::json::parse(read_file(model() + "/golden.json"));
  }

  fs::path tmp_;
};

// ---------------------------------------------------------------------------------------
// help

void expect_help(const Proc& r, const std::vector<std::string>& needles) {
  EXPECT_EQ(r.rc, 0);
  EXPECT_EQ(r.err, "");
  for (const auto& n : needles) EXPECT_NE(r.out.find(n), std::string::npos) << n << "\n" << r.out;
}

TEST_F(CliTest, Help) {
  for (const char* h : {"--help", "-h", "help"})
    expect_help(hypic({h}), {"usage: hypic", "run", "inspect", "serve", "worker", "router", "eval", "bench"});
}

// Every command and every benchmark is listed by `hypic --help` and runs its own --help.
TEST_F(CliTest, HelpListsEveryCommand) {
  const Proc top = hypic({"--help"});
  for (const char* c : {"run", "inspect", "serve", "worker", "router", "eval", "quantize"}) {
    EXPECT_NE(top.out.find(std::string("\n  ") + c + " "), std::string::npos) << c << "\n" << top.out;
    expect_help(hypic({c, "--help"}), {std::string("usage: hypic ") + c});
  }
  const Proc bench = hypic({"bench", "--help"});
  for (const char* b : {"prefill", "decode", "make-model", "compose", "ttft", "scatter", "constrained"}) {
    EXPECT_NE(top.out.find(std::string("bench ") + b + " "), std::string::npos) << b << "\n" << top.out;
    EXPECT_NE(bench.out.find(std::string("\n  ") + b + " "), std::string::npos) << b << "\n" << bench.out;
    expect_help(hypic({"bench", b, "--help"}), {std::string("usage: hypic bench ") + b});
  }
}

// Every flag a command's --help lists is one its parser takes (the help is generated from the
// same table, cli/args.h: the parser refuses any flag not in it, so together the two
// lists are equal), the shared --log-format included.
TEST_F(CliTest, EveryHelpFlagIsAccepted) {
  std::vector<std::vector<std::string>> cmds = {{"run"}, {"inspect"}, {"serve"}, {"worker"}, {"router"},
                                                {"eval"}, {"quantize"}};
  for (const char* b : {"prefill", "decode", "make-model", "compose", "ttft", "scatter", "constrained"})
    cmds.push_back({"bench", b});
  const std::regex flag(R"(^  --([a-z0-9-]+)( \S+)?)");
  for (const auto& cmd : cmds) {
    std::vector<std::string> args = cmd;
    args.push_back("--help");
    const Proc h = hypic(args);
    ASSERT_EQ(h.rc, 0) << cmd.back() << "\n" << h.err;
    std::istringstream lines(h.out);
    int n = 0;
    bool log_format = false;
    for (std::string line; std::getline(lines, line);) {
      std::smatch m;
      if (!std::regex_search(line, m, flag)) continue;
      ++n;
      log_format |= m[1] == "log-format";
      std::vector<std::string> with = cmd;
      with.push_back("--" + m[1].str() + (m[2].matched ? "=x" : ""));
      with.push_back("--help");
      const Proc r = hypic(with);
      EXPECT_EQ(r.rc, 0) << with[with.size() - 2] << " of " << cmd.back() << ": " << r.err;
    }
    EXPECT_GT(n, 0) << cmd.back();
    EXPECT_TRUE(log_format) << cmd.back();
  }
}

// The OpenMP wait policy the CLI re-executes itself with (libgomp prints its settings with
// OMP_DISPLAY_ENV=verbose; the last print is the re-executed process's): passive with a spin count
// calibrated to ~150 µs, unless the user chose a policy or a count.
TEST_F(CliTest, OpenMpWaitSpinsBrieflyUnlessTheUserChose) {
  auto last_setting = [](const std::string& err, const std::string& name) {
    const size_t at = err.rfind(name + " = '");
    if (at == std::string::npos) return std::string();
    const size_t from = at + name.size() + 4;
    return err.substr(from, err.find('\'', from) - from);
  };
  const std::string clean = "-u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_DISPLAY_ENV=verbose";
  Proc r = hypic({"--help"}, clean);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(last_setting(r.err, "OMP_WAIT_POLICY"), "PASSIVE") << r.err;
  const long spins = std::atol(last_setting(r.err, "GOMP_SPINCOUNT").c_str());
  EXPECT_GE(spins, 1000) << r.err;
  EXPECT_LE(spins, 1000000) << r.err;
  r = hypic({"--help"}, clean + " GOMP_SPINCOUNT=4321");
  EXPECT_EQ(last_setting(r.err, "GOMP_SPINCOUNT"), "4321") << r.err;
  r = hypic({"--help"}, clean + " OMP_WAIT_POLICY=active");
  EXPECT_EQ(last_setting(r.err, "OMP_WAIT_POLICY"), "ACTIVE") << r.err;
  EXPECT_EQ(last_setting(r.err, "GOMP_SPINCOUNT"), "30000000000") << r.err;
}

TEST_F(CliTest, RunHelp) {
  expect_help(hypic({"run", "--help"}),
              {"usage: hypic run", "--model", "--prompt", "--prompt-file", "--chat", "--max-tokens",
               "--temperature", "--top-k", "--top-p", "--seed", "--stop", "--ignore-eos", "--dtype",
               "--json"});
  // --help wins over everything else, even a bad value or a missing model
  expect_help(hypic({"run", "--temperature", "x", "--help"}), {"usage: hypic run"});
}

TEST_F(CliTest, InspectHelp) { expect_help(hypic({"inspect", "--help"}), {"usage: hypic inspect", "--model", "--load"}); }

TEST_F(CliTest, BenchHelp) {
  expect_help(hypic({"bench", "--help"}), {"prefill", "make-model"});
  expect_help(hypic({"bench", "prefill", "--help"}), {"--model", "--tokens", "--dtype", "--reps"});
  expect_help(hypic({"bench", "decode", "--help"}), {"--model", "--dtype", "--batch", "--steps", "--prompt"});
  expect_help(hypic({"bench", "make-model", "--help"}),
              {"--shape", "--layers", "--out", "qwen3.5-35b-a3b", "qwen3-next-80b-a3b"});
}

TEST_F(CliTest, NoCommandIsAUsageError) {
  const Proc r = hypic({});
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("usage: hypic"), std::string::npos);
  const Proc b = hypic({"bench"});
  EXPECT_EQ(b.rc, 2);
  EXPECT_EQ(b.out, "");
  EXPECT_NE(b.err.find("make-model"), std::string::npos);
}

TEST_F(CliTest, UnknownCommand) {
  expect_error({"frobnicate"}, "unknown command 'frobnicate'", 2);
  expect_error({"bench", "frobnicate"}, "unknown benchmark 'frobnicate'", 2);
}

// ---------------------------------------------------------------------------------------
// run

TEST_F(CliTest, RunJsonReproducesTheGoldenGreedyText) {
  const auto g = golden();
  const fs::path prompt = write("prompt.txt", g.at("prompt_text").get<std::string>());
  const Proc r = hypic({"run", "--model", model(), "--prompt-file", prompt.string(), "--dtype", "f32",
                       "--max-tokens", "16", "--ignore-eos", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  // exactly one line, one JSON object
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.back(), '\n');
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.is_object());
  for (const char* k : {"text", "finish_reason", "prompt_tokens", "completion_tokens", "ttft_ms",
                        "prefill_ms", "decode_ms", "prefill_tokens_per_s", "decode_tokens_per_s",
                        "dtype"})
    EXPECT_TRUE(j.contains(k)) << k << " missing in " << r.out;
  EXPECT_EQ(j["text"], g["greedy_text"]);
  EXPECT_EQ(j["prompt_tokens"], g["prompt_ids"].size());
  EXPECT_EQ(j["completion_tokens"], 16);
  EXPECT_EQ(j["finish_reason"], "length");
  EXPECT_EQ(j["dtype"], "f32");
  for (const char* k : {"ttft_ms", "prefill_tokens_per_s", "decode_tokens_per_s"}) {
    ASSERT_TRUE(j[k].is_number()) << k;
    EXPECT_GT(j[k].get<double>(), 0.0) << k;
  }
}

TEST_F(CliTest, RunTextStreamsTheSameText) {
  const auto g = golden();
  const fs::path prompt = write("prompt.txt", g.at("prompt_text").get<std::string>());
  const Proc r = hypic({"run", "--model", model(), "--prompt-file", prompt.string(), "--dtype=f32",
                       "--max-tokens=16", "--ignore-eos"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, g["greedy_text"].get<std::string>() + "\n");
}

TEST_F(CliTest, RunStopString) {
  const auto g = golden();
  const std::string full = g["greedy_text"];
  const fs::path prompt = write("prompt.txt", g.at("prompt_text").get<std::string>());
  const Proc r = hypic({"run", "--model", model(), "--prompt-file", prompt.string(), "--dtype", "f32",
                       "--max-tokens", "16", "--ignore-eos", "--json", "--stop", "zzz", "--stop", " again"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["text"], full.substr(0, full.find(" again")));
  EXPECT_EQ(j["finish_reason"], "stop");
  EXPECT_LT(j["completion_tokens"].get<int>(), 16);
}

TEST_F(CliTest, RunJsonWithAStopThatSplitsACharacterStillPrintsValidJson) {
  // The greedy text contains U+FFFD (EF BF BD); a stop string "\xBF\xBD" cuts after EF.
  const auto g = golden();
  const fs::path prompt = write("prompt.txt", g.at("prompt_text").get<std::string>());
  const Proc r = hypic({"run", "--model", model(), "--prompt-file", prompt.string(), "--dtype", "f32",
                       "--max-tokens", "16", "--ignore-eos", "--json", "--stop", "\xBF\xBD"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["finish_reason"], "stop");
  EXPECT_EQ(j["text"], "ouriz\xEF\xBF\xBD");  // the dangling EF byte became U+FFFD
}

TEST_F(CliTest, RunDefaultsAndSampling) {
  // bf16 default, greedy default: deterministic
  const Proc a = hypic({"run", "--model", model(), "--prompt", "The old clock", "--max-tokens", "8", "--json"});
  ASSERT_EQ(a.rc, 0) << a.err;
  const auto ja = nlohmann::json::parse(a.out);
  EXPECT_EQ(ja["dtype"], "bf16");
  EXPECT_GT(ja["prompt_tokens"].get<int>(), 0);
  EXPECT_LE(ja["completion_tokens"].get<int>(), 8);
  // seeded sampling is reproducible
  std::vector<std::string> args = {"run", "--model", model(), "--prompt", "The old clock", "--max-tokens",
                                   "8", "--temperature", "0.8", "--top-k", "50", "--top-p", "0.9",
                                   "--seed", "7", "--ignore-eos", "--json"};
  const Proc s1 = hypic(args), s2 = hypic(args);
  ASSERT_EQ(s1.rc, 0) << s1.err;
  EXPECT_EQ(nlohmann::json::parse(s1.out)["text"], nlohmann::json::parse(s2.out)["text"]);
  EXPECT_EQ(nlohmann::json::parse(s1.out)["completion_tokens"], 8);
}

TEST_F(CliTest, RunMaxTokensZero) {
  const Proc r = hypic({"run", "--model", model(), "--prompt", "hello", "--max-tokens", "0", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["text"], "");
  EXPECT_EQ(j["completion_tokens"], 0);
}

TEST_F(CliTest, RunHugeMaxTokensStopsAtTheContext) {
  // A copy of the model with a 40-position context: --max-tokens far beyond it must neither
  // reserve memory for it nor fail; generation ends with "length" when the context is full.
  const fs::path dir = tmp_ / "ctx40";
  fs::create_directory(dir);
  for (const char* f : {"model.safetensors", "tokenizer.json"}) fs::copy_file(fs::path(model()) / f, dir / f);
  auto cfg = nlohmann::json::parse(read_file(fs::path(model()) / "config.json"));
  cfg["text_config"]["max_position_embeddings"] = 40;
  write("ctx40/config.json", cfg.dump());
  const Proc r = hypic({"run", "--model", dir.string(), "--prompt", "The old clock", "--max-tokens",
                        "2000000000", "--ignore-eos", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["finish_reason"], "length");
  EXPECT_EQ(j["completion_tokens"].get<int>(), 40 - j["prompt_tokens"].get<int>() + 1);
}

TEST_F(CliTest, RunChat) {
  const std::vector<std::string> base = {"run", "--model", model(), "--prompt", "Hello there",
                                         "--max-tokens", "4", "--json"};
  const Proc plain = hypic(base);
  auto chat_args = base;
  chat_args.push_back("--chat");
  const Proc chat = hypic(chat_args);
  chat_args.insert(chat_args.end(), {"--system", "Be brief."});
  const Proc sys = hypic(chat_args);
  for (const Proc* r : {&plain, &chat, &sys}) ASSERT_EQ(r->rc, 0) << r->err;
  const int np = nlohmann::json::parse(plain.out)["prompt_tokens"];
  const int nc = nlohmann::json::parse(chat.out)["prompt_tokens"];
  const int ns = nlohmann::json::parse(sys.out)["prompt_tokens"];
  // "<|im_start|>user\n" + prompt + "<|im_end|>\n<|im_start|>assistant\n": the prompt plus
  // 3 special tokens and the role words / newlines
  EXPECT_GE(nc, np + 5);
  EXPECT_GT(ns, nc + 3);
  // text mode too
  auto text_args = std::vector<std::string>(base.begin(), base.end() - 1);
  text_args.push_back("--chat");
  const Proc t = hypic(text_args);
  EXPECT_EQ(t.rc, 0) << t.err;
  EXPECT_FALSE(t.out.empty());
}

TEST_F(CliTest, RunOtherArchitectures) {
  for (const char* m : {"qwen3_next_moe", "qwen3_5_moe"}) {
    const auto g = nlohmann::json::parse(read_file(model(m) + "/golden.json"));
    const fs::path prompt = write("prompt.txt", g.at("prompt_text").get<std::string>());
    const Proc r = hypic({"run", "--model", model(m), "--prompt-file", prompt.string(), "--dtype", "f32",
                         "--max-tokens", "16", "--ignore-eos", "--json"});
    ASSERT_EQ(r.rc, 0) << m << ": " << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["text"], g["greedy_text"]) << m;
  }
}

TEST_F(CliTest, RunUsageErrors) {
  const std::string m = model();
  expect_error({"run", "--model", m, "--prompt", "hi", "--bogus"}, "unknown option --bogus", 2);
  expect_error({"run", "--prompt", "hi"}, "--model is required", 2);
  expect_error({"run", "--model", m}, "--prompt", 2);
  expect_error({"run", "--model", m, "--prompt", "a", "--prompt-file", "b"}, "exactly one", 2);
  expect_error({"run", "--model", m, "--prompt", "hi", "--temperature", "abc"}, "--temperature", 2);
  expect_error({"run", "--model", m, "--prompt", "hi", "--temperature", "-1"}, "--temperature", 2);
  expect_error({"run", "--model", m, "--prompt", "hi", "--temperature", "nan"}, "--temperature", 2);
  expect_error({"run", "--model", m, "--prompt", "hi", "--temperature", "inf"}, "--temperature", 2);
  expect_error({"run", "--model", m, "--prompt", "hi", "--temperature", ""}, "--temperature", 2);
  expect_error({"run", "--model", m, "--prompt", "hi", "--temperature"}, "needs a value", 2);
  expect_error({"run", "--model", m, "--prompt", "hi", "--top-p", "0"}, "--top-p", 2);
  expect_error({"run", "--model", m, "--prompt", "hi", "--top-p", "1.5"}, "--top-p", 2);
  expect_error({"run", "--model", m, "--prompt", "hi", "--top-k", "-3"}, "--top-k", 2);
  expect_error({"run", "--model", m, "--prompt", "hi", "--max-tokens", "-1"}, "--max-tokens", 2);
  expect_error({"run", "--model", m, "--prompt", "hi", "--max-tokens", "1e3"}, "--max-tokens", 2);
  expect_error({"run", "--model", m, "--prompt", "hi", "--max-tokens", "9999999999"}, "--max-tokens", 2);
  expect_error({"run", "--model", m, "--prompt", "hi", "--dtype", "fp16"}, "--dtype", 2);
  expect_error({"run", "--model", m, "--prompt", "hi", "--json=yes"}, "takes no value", 2);
  expect_error({"run", "--model", m, "--prompt", "hi", "stray"}, "unexpected argument 'stray'", 2);
}

TEST_F(CliTest, RunRuntimeErrors) {
  const std::string missing = (tmp_ / "no_such_model").string();
  expect_error({"run", "--model", missing, "--prompt", "hi"}, "model directory '" + missing + "' does not exist");
  expect_error({"run", "--model", model(), "--prompt-file", (tmp_ / "nope.txt").string()}, "nope.txt");
  expect_error({"run", "--model", model(), "--prompt", ""}, "empty");
  // a model directory without tokenizer.json
  const fs::path partial = tmp_ / "partial";
  fs::create_directory(partial);
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(fs::path(model()) / f, partial / f);
  expect_error({"run", "--model", partial.string(), "--prompt", "hi"}, "tokenizer.json");
  // ... and one without weights
  const fs::path noweights = tmp_ / "noweights";
  fs::create_directory(noweights);
  for (const char* f : {"config.json", "tokenizer.json"}) fs::copy_file(fs::path(model()) / f, noweights / f);
  expect_error({"run", "--model", noweights.string(), "--prompt", "hi"}, "model.safetensors");
  // a prompt longer than the context (4096 positions)
  std::string longp;
  for (int i = 0; i < 5000; ++i) longp += " a";
  const fs::path lp = write("long.txt", longp);
  expect_error({"run", "--model", model(), "--prompt-file", lp.string(), "--max-tokens", "1"}, "shorten");
}

// ---------------------------------------------------------------------------------------
// inspect, bench

TEST_F(CliTest, InspectPrintsTheLayerPattern) {
  const Proc r = hypic({"inspect", "--model", model()});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("pattern LLLF\xC3\x97" "2"), std::string::npos) << r.out;  // "LLLF×2"
  EXPECT_NE(r.out.find("Qwen3.5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("135 tensors"), std::string::npos) << r.out;
  const Proc n = hypic({"inspect", "--model", model("qwen3_next_moe"), "--load", "--dtype", "f32"});
  ASSERT_EQ(n.rc, 0) << n.err;
  EXPECT_NE(n.out.find("Qwen3-Next"), std::string::npos) << n.out;
  EXPECT_NE(n.out.find("pattern LLLF"), std::string::npos) << n.out;
  EXPECT_NE(n.out.find("loaded and validated"), std::string::npos) << n.out;
}

// A GGUF file: its header is shown; a file of an architecture hypic does not run is refused,
// naming it, everywhere a model is taken.
TEST_F(CliTest, InspectReadsAGgufHeader) {
  const std::string gguf = std::string(HYPIC_SOURCE_DIR) + "/tests/data/gguf/blocks.gguf";
  const Proc r = hypic({"inspect", "--model", gguf});
  EXPECT_EQ(r.rc, 1) << r.err;
  for (const char* want : {"GGUF version 3", "architecture hypic-test", "tensors: 21", "Q5_1", "Q2_K (not read by hypic)"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  const char* refusal = "holds a 'hypic-test' model, which hypic does not run";
  EXPECT_NE(r.err.find(refusal), std::string::npos) << r.err;
  expect_error({"run", "--model", gguf, "--prompt", "hi"}, refusal);
  expect_error({"serve", "--model", gguf, "--port", "0"}, refusal);
  expect_error({"eval", "--model", gguf, "--data", std::string(HYPIC_SOURCE_DIR) + "/tests/data/eval_sample.jsonl"},
               refusal);
  expect_error({"bench", "prefill", "--model", gguf}, refusal);
  const std::string cut = (tmp_ / "cut.gguf").string();
  {
    std::ifstream in(gguf, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, 700);
  }
  expect_error({"inspect", "--model", cut}, "truncated");
}

// The file llama.cpp's converter wrote of a golden checkpoint runs as the checkpoint does; quantize
// (hypic's own formats) says a GGUF file is served as it is.
TEST_F(CliTest, RunsAGgufModel) {
  const std::string gguf = std::string(HYPIC_SOURCE_DIR) + "/tests/data/gguf/models/qwen3_5_moe.f32.gguf";
  const Proc i = hypic({"inspect", "--model", gguf, "--load", "--dtype", "f32"});
  ASSERT_EQ(i.rc, 0) << i.err;
  for (const char* want : {"architecture qwen35moe", "Qwen3.5-MoE", "pattern LLLF", "loaded and validated"})
    EXPECT_NE(i.out.find(want), std::string::npos) << want << "\n" << i.out;
  const std::vector<std::string> args = {"--prompt", "Hello there", "--max-tokens", "8", "--dtype", "f32"};
  auto run = [&](const std::string& m) {
    std::vector<std::string> a = {"run", "--model", m};
    a.insert(a.end(), args.begin(), args.end());
    return hypic(a);
  };
  const Proc g = run(gguf), d = run(model("qwen3_5_moe"));
  ASSERT_EQ(g.rc, 0) << g.err;
  ASSERT_EQ(d.rc, 0) << d.err;
  EXPECT_EQ(g.out, d.out);
  EXPECT_NE(g.err.find("chat format 'qwen3.5'"), std::string::npos) << g.err;
  expect_error({"quantize", "--model", gguf, "--out", (tmp_ / "q").string()}, "is a GGUF file");
}

TEST_F(CliTest, InspectErrors) {
  expect_error({"inspect"}, "--model is required", 2);
  expect_error({"inspect", "--model", (tmp_ / "nothing").string()}, "config.json");
  expect_error({"inspect", "--model", model(), "--load", "--dtype", "f8"}, "--dtype", 2);
}

TEST_F(CliTest, BenchPrefillPrintsJson) {
  for (const char* dt : {"f32", "q4"}) {  // q4: the peak GEMM on the kernels' Q4T layout
    const Proc r = hypic({"bench", "prefill", "--model", model(), "--tokens", "32", "--dtype", dt});
    ASSERT_EQ(r.rc, 0) << dt << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    for (const char* k : {"tokens_per_s", "achieved_gflops", "gemm_peak_gflops", "ratio"}) {
      ASSERT_TRUE(j.contains(k)) << k;
      EXPECT_GT(j[k].get<double>(), 0.0) << k;
    }
    EXPECT_EQ(j["tokens"], 32);
  }
}

TEST_F(CliTest, BenchTtftReportsColdAndWarmRequests) {
  // Three requests over a pool of two documents, both in every request: the first finds the
  // caches empty (cold), the later ones hit both segments in hypic mode.
  const Proc r = hypic({"bench", "ttft", "--model", model(), "--dtype", "f32", "--docs", "2",
                        "--doc-tokens", "24", "--per-request", "2", "--requests", "2", "--warmup", "1",
                        "--modes", "full,hypic"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* mode : {"full", "hypic"}) {
    const auto& m = j["modes"][mode];
    for (const char* k : {"p50_ttft_ms", "p99_ttft_ms", "cold_ttft_ms"}) EXPECT_GT(m[k].get<double>(), 0.0) << k;
  }
  EXPECT_EQ(j["modes"]["full"]["segment_hit_rate"], 0.0);
  EXPECT_EQ(j["modes"]["hypic"]["segment_hit_rate"], 1.0);  // the measured requests: all warm
  EXPECT_LT(j["modes"]["hypic"]["mean_recomputed_tokens"].get<double>(),
            j["modes"]["full"]["mean_recomputed_tokens"].get<double>());
  EXPECT_GT(j["ratio_p50_full_over_hypic"].get<double>(), 0.0);
  EXPECT_TRUE(j.contains("system"));
}

TEST_F(CliTest, BenchDecodePrintsJson) {
  const Proc r = hypic({"bench", "decode", "--model", model(), "--dtype", "f32", "--batch", "1,3",
                        "--steps", "2", "--prompt", "4"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["steps"], 2);
  EXPECT_EQ(j["prompt"], 4);
  ASSERT_EQ(j["rows"].size(), 2u) << r.out;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(j["rows"][i]["B"], i == 0 ? 1 : 3);
    EXPECT_EQ(j["rows"][i]["gemv_kernel"], j["rows"][i]["separate_gemv_kernel"]);  // f32: one
    EXPECT_FALSE(j["rows"][i]["gemv_kernel"].get<std::string>().empty());
    EXPECT_GT(j["rows"][i]["batched_tps"].get<double>(), 0.0);
    EXPECT_GT(j["rows"][i]["separate_tps"].get<double>(), 0.0);
    // Every step reads the matrices: at least the lm_head [vocab, hidden] in f32.
    const auto tc = nlohmann::json::parse(read_file(model() + "/config.json"))["text_config"];
    EXPECT_GE(j["rows"][i]["weight_bytes_per_step"].get<double>(),
              tc["vocab_size"].get<double>() * tc["hidden_size"].get<double>() * 4)
        << r.out;
    EXPECT_GT(j["rows"][i]["batched_weight_GBps"].get<double>(), 0.0);
  }
  for (const char* k : {"read_GBps", "copy_GBps"}) {
    ASSERT_EQ(j[k].size(), 2u) << k;
    EXPECT_GT(j[k][0].get<double>(), 0.0) << k;
  }
  EXPECT_NE(r.err.find("B    3: batched"), std::string::npos) << r.err;  // progress per batch size
}

TEST_F(CliTest, BenchDecodeNamesTheQuantizedKernel) {
  const Proc r = hypic({"bench", "decode", "--model", model(), "--dtype", "q4", "--batch", "1",
                        "--steps", "1", "--prompt", "2"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string k = nlohmann::json::parse(r.out)["rows"][0]["gemv_kernel"];
  // Whatever tier the CPU (or an HYPIC_MAX_ISA cap on the run) gives: a quantized kernel's name.
  EXPECT_TRUE(k == "amx_int8" || k == "avx512_vnni" || k == "avx_vnni" || k == "avx2" || k == "generic") << k;
}

// ---------------------------------------------------------------------------------------
// requests made of parts

TEST_F(CliTest, RunSegmentsRepeatColdThenWarm) {
  const auto d1 = write("a.txt", std::string(400, 'a') + " alpha beta gamma delta epsilon\n");
  const auto d2 = write("b.txt", "Document two: the river runs north past the old mill, twice.\n");
  for (const char* mode : {"hypic", "naive", "prefix", "full"}) {
    const Proc r = hypic({"run", "--model", model(), "--dtype", "f32", "--segment", d1.string(),
                          "--segment", d2.string(), "--query", "What runs north?", "--mode", mode,
                          "--repeat", "3", "--shuffle", "--max-tokens", "4", "--seam", "4"});
    ASSERT_EQ(r.rc, 0) << mode << "\n" << r.err;
    std::istringstream lines(r.out);
    std::string line;
    int runs = 0;
    while (std::getline(lines, line)) {
      const auto j = nlohmann::json::parse(line);
      for (const char* k : {"ttft_ms", "segments_hit", "segments_missed", "prompt_tokens",
                            "reused_tokens", "recomputed_tokens", "text"})
        ASSERT_TRUE(j.contains(k)) << k;
      EXPECT_EQ(j["mode"], mode);
      if (std::string(mode) == "hypic" || std::string(mode) == "naive") {
        EXPECT_EQ(j["segments_hit"], runs == 0 ? 0 : 2) << mode << " run " << runs;
        EXPECT_EQ(j["segments_missed"], runs == 0 ? 2 : 0) << mode << " run " << runs;
        EXPECT_LT(j["recomputed_tokens"].get<int>(), j["prompt_tokens"].get<int>());
      }
      ++runs;
    }
    EXPECT_EQ(runs, 3) << mode;
  }
}

TEST_F(CliTest, RunSegmentsDebugDeviationAndErrors) {
  const auto d1 = write("a.txt", std::string(300, 'x') + " one two three four\n");
  const Proc r = hypic({"run", "--model", model(), "--dtype", "f32", "--segment", d1.string(),
                        "--query", "Why?", "--max-tokens", "2", "--debug-deviation"});
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("deviation"));
  EXPECT_EQ(j["deviation"]["hidden_per_layer"].size(), 8u);
  EXPECT_EQ(j["deviation"]["linear_state_per_linear_layer"].size(), 6u);
  expect_error({"run", "--model", model(), "--segment", d1.string()}, "--query", 2);
  expect_error({"run", "--model", model(), "--segment", d1.string(), "--query", "q", "--mode", "fast"},
               "--mode", 2);
  expect_error({"run", "--model", model(), "--segment", (tmp_ / "missing.txt").string(), "--query", "q"},
               "missing.txt");
  expect_error({"run", "--model", model(), "--prompt", "p", "--segment", d1.string(), "--query", "q"},
               "exclude", 2);
}

TEST_F(CliTest, ServeCorsOriginMustBeAnOrigin) {
  for (const char* bad : {"http://app.example/", "app.example", "http://", "ftp://app.example"})
    expect_error({"serve", "--model", model(), "--port", "0", "--cors-origin", bad}, "is not an origin", 2);
}

// A serve that cannot bind says where and why, and logs no drain (nothing was served).
TEST_F(CliTest, ServeThatCannotBindSaysSo) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string port = std::to_string(ntohs(addr.sin_port));
  const Proc r = hypic({"serve", "--model", model(), "--port", port, "--log-format", "json"});
  ::close(fd);
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_NE(r.err.find("cannot listen on 127.0.0.1:" + port), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("\"drain\""), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("{\"ts\":"), std::string::npos) << r.err;  // --log-format json
}

TEST_F(CliTest, BenchErrors) {
  expect_error({"bench", "prefill", "--tokens", "8"}, "--model", 2);
  expect_error({"bench", "prefill", "--model", model(), "--tokens", "0"}, "--tokens", 2);
  expect_error({"bench", "decode", "--steps", "2"}, "--model", 2);
  expect_error({"bench", "decode", "--model", model(), "--batch", "1,0"}, "--batch", 2);
  expect_error({"bench", "decode", "--model", model(), "--batch", ","}, "--batch", 2);
  expect_error({"bench", "decode", "--model", model(), "--steps", "0"}, "--steps", 2);
  expect_error({"bench", "decode", "--model", model(), "--dtype", "q3"}, "--dtype", 2);
  expect_error({"bench", "make-model", "--layers", "2"}, "--out", 2);
  expect_error({"bench", "make-model", "--shape", "no-such-shape", "--layers", "1", "--out",
                (tmp_ / "m").string()},
               "no-such-shape");
}

// The sample's gold answers are this checkpoint's own greedy f32 answers in full mode, so full
// scores 1; a seam covering whole segments is full again (exact), prefix reuses exact prefixes
// (exact), naive without a seam loses the answers.
TEST_F(CliTest, EvalScoresEveryModeAgainstFull) {
  const std::string data = std::string(HYPIC_SOURCE_DIR) + "/tests/data/eval_sample.jsonl";
  const Proc r = hypic({"eval", "--model", model(), "--data", data, "--dtype", "f32", "--max-tokens", "8",
                        "--seams", "0,1000", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("3/3 records"), std::string::npos) << r.err;  // progress
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["results"].size(), 6u);
  std::map<std::string, double> score;
  for (const auto& c : j["results"]) {
    const std::string name = c["mode"].get<std::string>() + (c["seam"].is_null() ? "" : std::to_string(c["seam"].get<int>()));
    score[name] = c["mean_exact_match"].get<double>();
    for (const char* t : {"single", "two_hop", "aggregate"}) {
      EXPECT_EQ(c["tasks"][t]["n"], 1) << name;
      EXPECT_GT(c["tasks"][t]["ttft_cold_ms"].get<double>(), 0) << name;
    }
  }
  EXPECT_EQ(score["full"], 1.0);
  EXPECT_EQ(score["prefix"], 1.0);
  EXPECT_EQ(score["hypic1000"], 1.0);
  EXPECT_EQ(score["naive1000"], 1.0);
  EXPECT_LT(score["naive0"], 1.0);
  std::map<std::string, nlohmann::json> by;
  for (const auto& c : j["results"])
    by[c["mode"].get<std::string>() + (c["seam"].is_null() ? "" : std::to_string(c["seam"].get<int>()))] = c;
  EXPECT_GT(by["naive0"]["relative_loss_vs_full"].get<double>(), 0);
  // The reference reply's NLL: a whole-segment seam recomputes everything, so it equals full's;
  // naive composition without seams makes the (full-mode) gold replies less likely.
  const double full_nll = by["full"]["mean_reply_nll"].get<double>();
  EXPECT_GT(full_nll, 0);
  EXPECT_NEAR(by["hypic1000"]["mean_reply_nll"].get<double>(), full_nll, 1e-4);
  EXPECT_NEAR(by["prefix"]["mean_reply_nll"].get<double>(), full_nll, 1e-4);
  EXPECT_GT(by["naive0"]["mean_reply_nll"].get<double>(), full_nll);
  EXPECT_TRUE(by["full"]["mean_agreement_with_full"].is_null()) << "full is the reference";
  for (const char* k : {"prefix", "hypic1000", "naive1000"}) EXPECT_EQ(by[k]["mean_agreement_with_full"], 1.0) << k;
  EXPECT_LT(by["naive0"]["mean_agreement_with_full"].get<double>(), 1.0);
}

// The tool eval end to end on the embedded model (its held-out tool records, the first 2 of
// each task, f32): every task scored and timed; prefix mode and hypic with a seam covering
// whole tools give full's replies exactly; with the tools in a new order and subset, hypic
// reuses them (most of the prompt) where prefix mode reuses only what precedes the first.
TEST_F(CliTest, EvalToolsThroughTheServerPath) {
  const std::string tiny = std::string(HYPIC_SOURCE_DIR) + "/models/hypic-tiny";
  const Proc r = hypic({"eval", "--model", tiny, "--tasks", "tools", "--n", "2", "--modes", "full,prefix,hypic",
                        "--seams", "0,1000", "--max-tokens", "24", "--dtype", "f32", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("8/8 records"), std::string::npos) << r.err;  // progress
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["results"].size(), 4u);
  std::map<std::string, nlohmann::json> by;
  for (const auto& c : j["results"]) {
    const std::string name = c["mode"].get<std::string>() + (c["seam"].is_null() ? "" : std::to_string(c["seam"].get<int>()));
    by[name] = c;
    for (const char* t : {"tool_direct", "tool_doc", "tool_two", "no_tool"}) {
      EXPECT_EQ(c["tasks"][t]["n"], 2) << name << " " << t;
      EXPECT_GT(c["tasks"][t]["ttft_cold_ms"].get<double>(), 0) << name << " " << t;
      EXPECT_EQ(c["tasks"][t]["name_accuracy"].is_null(), std::string(t) == "no_tool") << name << " " << t;
    }
    for (const char* k : {"mean_name_accuracy", "mean_args_accuracy", "mean_valid_call_rate", "mean_answer_accuracy"}) {
      EXPECT_GE(c[k].get<double>(), 0.0) << name << " " << k;
      EXPECT_LE(c[k].get<double>(), 1.0) << name << " " << k;
    }
  }
  EXPECT_TRUE(by["full"]["agreement_with_full"].is_null()) << "full is the reference";
  EXPECT_EQ(by["prefix"]["agreement_with_full"], 1.0);
  EXPECT_EQ(by["hypic1000"]["agreement_with_full"], 1.0);
  for (const char* k : {"mean_name_accuracy", "mean_args_accuracy", "mean_answer_accuracy"})
    EXPECT_EQ(by["prefix"][k], by["full"][k]) << k;
  const double hypic_reuse = by["hypic0"]["tasks"]["tool_direct"]["warm_reused_fraction"].get<double>();
  EXPECT_GT(hypic_reuse, 0.5);
  EXPECT_LT(by["prefix"]["tasks"]["tool_direct"]["warm_reused_fraction"].get<double>(), hypic_reuse);
}

TEST_F(CliTest, EvalErrors) {
  expect_help(hypic({"eval", "--help"}), {"usage: hypic eval", "--seams", "--modes", "--json"});
  const std::string data = std::string(HYPIC_SOURCE_DIR) + "/tests/data/eval_sample.jsonl";
  expect_error({"eval", "--data", data}, "--model", 2);
  expect_error({"eval", "--model", model(), "--data", data, "--modes", "fast"}, "fast", 2);
  expect_error({"eval", "--model", model(), "--data", data, "--seams", "x"}, "--seams", 2);
  expect_error({"eval", "--model", model(), "--data", data, "--tasks", "poetry"}, "poetry", 2);
  expect_error({"eval", "--model", model(), "--data", (tmp_ / "none.jsonl").string()}, "none.jsonl");
  const auto bad = write("bad.jsonl", "{\"id\": \"x\"}\n");
  expect_error({"eval", "--model", model(), "--data", bad.string()}, "bad.jsonl:1");
  expect_error({"eval", "--model", model(), "--data", bad.string(), "--tasks", "tools"}, "bad.jsonl:1");
  expect_error({"eval", "--model", model(), "--data", data, "--tasks", "tools"}, "not a tool-use record");
  expect_error({"eval", "--model", model(), "--data", data, "--tasks", "tool_direct,lyrics"}, "lyrics", 2);
}

}  // namespace
