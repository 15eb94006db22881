// hypic run: one request from flags/files; prints the text, or a JSON report.
#include <climits>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "checkpoint/gguf_hf.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "engine/generate.h"
#include "engine/model_tokenizer.h"
#include "engine/prompt.h"

namespace hypic::cli {

int cmd_run(int argc, char** argv) {
  Args a("hypic run --model DIR (--prompt TEXT | --prompt-file FILE) [options]",
         "Runs one request through the engine and prints the generated text.");
  a.opt("model", "DIR|FILE.gguf", "model directory (config.json, *.safetensors, tokenizer.json or tiktoken.model), or a GGUF file (llama.cpp's; a split: its first part)")
      .opt("prompt", "TEXT", "the prompt text")
      .opt("prompt-file", "FILE", "read the prompt from FILE")
      .opt("chat", "", "wrap the prompt as a user message in the model's chat template (ChatML for Qwen, Bailing for Ring-linear, MiniMax's for MiniMax)")
      .opt("system", "TEXT", "system message (with --chat)")
      .opt("max-tokens", "N", "maximum tokens to generate (as the server's default max_tokens)", "256")
      .opt("temperature", "T", "sampling temperature; 0 = greedy, the default here: a run from the command line checks a model and repeats exactly (the server samples at 1, as OpenAI's API defines)", "0")
      .opt("top-k", "K", "sample among the K most likely tokens; 0 = all", "0")
      .opt("top-p", "P", "nucleus sampling mass", "1")
      .opt("seed", "S", "sampling seed", "0")
      .opt("stop", "STR", "stop string (repeatable)")
      .opt("ignore-eos", "", "keep generating past end-of-sequence tokens")
      .opt("dtype", kDtypeValues, kDtypeHelp, "bf16")
      .opt("json", "", "print one JSON object with the text and timings instead")
      .opt("segment", "FILE", "a document segment (repeatable); with --query: a PIC request")
      .opt("query", "TEXT", "the question after the segments")
      .opt("mode", "M", "full | prefix | hypic | naive (requests with segments)", "hypic")
      .opt("seam", "W", "seam window: tokens recomputed at each segment start", "8")
      .opt("salt", "S", "tenant cache salt (part of every segment key)")
      .opt("cache-mem", "MiB", "memory budget of the segment / prefix caches (as serve and eval)", "1024")
      .opt("cache-dir", "DIR", "disk tier for segment entries evicted from memory")
      .opt("repeat", "N", "run the request N times in one process (first cold, then warm)", "1")
      .opt("shuffle", "", "permute the segments between repeats")
      .opt("debug-deviation", "", "add per-layer deviation of hidden and linear states from full");
  if (auto done = parse_command(a, argc, argv, "run", {"model"})) return *done;
  const bool parts_mode = a.has("segment") || a.has("query");
  if (!parts_mode && a.has("prompt") == a.has("prompt-file"))
    return report_error("run", invalid_argument("give exactly one of --prompt and --prompt-file"));
  if (parts_mode && (a.has("prompt") || a.has("prompt-file")))
    return report_error("run", invalid_argument("--prompt/--prompt-file and --segment/--query exclude each other"));

  std::string prompt = a.str("prompt");
  if (a.has("prompt-file")) {
    auto r = read_text_file(a.str("prompt-file"));
    if (!r) return report_error("run", r.status());
    prompt = r.value();
  }
  GenerateOptions go;
  auto mt = a.integer("max-tokens");
  auto temp = a.number("temperature");
  auto tk = a.integer("top-k");
  auto tp = a.number("top-p");
  auto seed = a.integer("seed");
  auto dt = parse_dtype(a.str("dtype"));
  for (const Status* s : {&mt.status(), &temp.status(), &tk.status(), &tp.status(), &seed.status(), &dt.status()})
    if (!s->is_ok()) return report_error("run", *s);
  // Range checks (NaN fails every comparison, so the conditions are written to reject it).
  if (*mt < 0 || *mt > INT32_MAX)
    return report_error("run", invalid_argument("--max-tokens must be in [0, 2147483647], got '" + a.str("max-tokens") + "'"));
  if (!(*temp >= 0) || !std::isfinite(*temp))
    return report_error("run", invalid_argument("--temperature must be a finite number >= 0 (0 = greedy), got '" + a.str("temperature") + "'"));
  if (*tk < 0 || *tk > INT32_MAX)
    return report_error("run", invalid_argument("--top-k must be in [0, 2147483647] (0 = off), got '" + a.str("top-k") + "'"));
  if (!(*tp > 0 && *tp <= 1))
    return report_error("run", invalid_argument("--top-p must be in (0, 1], got '" + a.str("top-p") + "'"));
  go.max_tokens = int(*mt);
  go.sampling = {float(*temp), int(*tk), float(*tp), uint64_t(*seed)};
  go.stop = a.all("stop");
  go.stop_at_eos = !a.flag("ignore-eos");

  std::error_code ec;
  if (!std::filesystem::is_directory(a.str("model"), ec) && !is_gguf_path(a.str("model")))
    return report_error("run", not_found("model directory '" + a.str("model") + "' does not exist; "
                                         "--model takes a Hugging Face model directory (config.json, "
                                         "*.safetensors, tokenizer.json or tiktoken.model) or a GGUF file"));
  if (is_gguf_path(a.str("model")))  // an architecture hypic does not run: said before the vocabulary
    if (Status s = ModelConfig::from_dir(a.str("model")).status(); !s) return report_error("run", s);
  auto tok = load_model_tokenizer(a.str("model"));  // GGUF vocabulary, tokenizer.json or tiktoken.model
  if (!tok) return report_error("run", tok.status());
  LoadOptions lo;
  lo.compute = *dt;
  log_system_info("run");
  auto model = load_checked_model(a.str("model"), lo);
  if (!model) return report_error("run", model.status());
  log_chat_format(a.str("model"), (*model)->config());

  if (parts_mode) return run_parts(a, **model, *tok, go);
  if (a.flag("chat")) {
    std::vector<ChatMessage> msgs;
    if (a.has("system")) msgs.push_back({"system", a.str("system")});
    msgs.push_back({"user", prompt});
    prompt = model_chat_template((*model)->config()).render(msgs, /*add_generation_prompt=*/true);
  }
  const std::vector<int32_t> ids = tok->encode(prompt, /*parse_special=*/true);
  const bool json = a.flag("json");
  TextCallback stream;
  if (!json) stream = [](const std::string& s) { std::fwrite(s.data(), 1, s.size(), stdout); std::fflush(stdout); return true; };
  auto r = generate(**model, *tok, ids, go, stream);
  if (!r) return report_error("run", r.status());
  if (!json) {
    std::printf("\n");
    return 0;
  }
  const double n = double(r->tokens.size());
  nlohmann::json j = {
      {"text", r->text},
      {"finish_reason", r->finish_reason},
      {"prompt_tokens", r->prompt_tokens},
      {"completion_tokens", r->tokens.size()},
      {"ttft_ms", r->ttft_ms},
      {"prefill_ms", r->prefill_ms},
      {"decode_ms", r->decode_ms},
      {"prefill_tokens_per_s", r->prefill_ms > 0 ? 1e3 * double(r->prompt_tokens) / r->prefill_ms : 0.0},
      {"decode_tokens_per_s", (n > 1 && r->decode_ms > 0) ? 1e3 * (n - 1) / r->decode_ms : 0.0},
      {"dtype", a.str("dtype")},
  };
  // A stop string may cut the text inside a UTF-8 character: replace invalid bytes (U+FFFD)
  // instead of letting dump() throw.
  std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  return 0;
}

}  // namespace hypic::cli
