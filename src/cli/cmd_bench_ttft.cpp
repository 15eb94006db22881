// hypic bench ttft: a synthetic RAG trace through every mode (bench/ttft.h).
#include <cstdio>
#include <string>

#include "bench/ttft.h"
#include "cli/args.h"
#include "cli/commands.h"

namespace hypic::cli {

int bench_ttft(int argc, char** argv) {
  Args a("hypic bench ttft --model DIR [--docs N --doc-tokens L --per-request K --requests R]",
         "Time to first token of a synthetic RAG trace (Zipf document popularity, random order)\n"
         "in every mode, one process, after warm-up requests. Prints one JSON object.");
  a.opt("model", "DIR|FILE.gguf", "model directory (Hugging Face), or a GGUF file (llama.cpp's; a split: its first part)")
      .opt("docs", "N", "documents in the pool", "20")
      .opt("doc-tokens", "L", "tokens per document", "1000")
      .opt("per-request", "K", "documents per request", "10")
      .opt("requests", "R", "measured requests per mode", "8")
      .opt("warmup", "W", "warm-up requests per mode (same trace distribution)", "4")
      .opt("zipf", "S", "Zipf exponent of document popularity", "1.0")
      .opt("seam", "W", "hypic / naive seam width", "8")
      .opt("modes", "LIST", "comma-separated modes", "full,prefix,hypic,naive")
      .opt("cache-mem", "MiB", "cache budget per mode", "8192")
      .opt("dtype", kDtypeValues, kDtypeHelp, "bf16")
      .opt("seed", "S", "trace seed", "1")
      .opt("json", "", "print JSON (the default)");
  if (auto done = parse_command(a, argc, argv, "bench ttft")) return *done;
  auto n_docs = a.integer("docs"), doc_tokens = a.integer("doc-tokens");
  auto per = a.integer("per-request"), reqs = a.integer("requests"), warm = a.integer("warmup");
  auto seam = a.integer("seam"), mem = a.integer("cache-mem"), seed = a.integer("seed");
  auto zipf = a.number("zipf");
  auto dt = parse_dtype(a.str("dtype"));
  for (const Status* s : {&n_docs.status(), &doc_tokens.status(), &per.status(), &reqs.status(),
                          &warm.status(), &seam.status(), &mem.status(), &seed.status(),
                          &zipf.status(), &dt.status()})
    if (!s->is_ok()) return report_error("bench ttft", *s);
  if (!a.has("model") || *n_docs < 1 || *per < 1 || *per > *n_docs || *reqs < 1 || *warm < 0 ||
      *doc_tokens < 1 || *seam < 0)
    return report_error("bench ttft", invalid_argument(
        "need --model DIR, 1 <= per-request <= docs, requests >= 1, warmup >= 0, seam >= 0"));
  bench::TtftBenchOptions o;
  {
    std::string list = a.str("modes") + ",";
    for (size_t p = 0, q; (q = list.find(',', p)) != std::string::npos; p = q + 1) {
      PicMode m;
      if (!parse_pic_mode(list.substr(p, q - p), &m))
        return report_error("bench ttft", invalid_argument("unknown mode in --modes"));
      o.modes.push_back(m);
    }
  }
  o.model = a.str("model");
  o.docs = int(*n_docs);
  o.doc_tokens = int(*doc_tokens);
  o.per_request = int(*per);
  o.requests = int(*reqs);
  o.warmup = int(*warm);
  o.zipf = *zipf;
  o.seam = int(*seam);
  o.cache_mem_mib = *mem;
  o.dtype = *dt;
  o.dtype_label = a.str("dtype");
  o.seed = uint32_t(*seed);
  auto out = bench::bench_ttft(o);
  if (!out) return report_error("bench ttft", out.status());
  print_bench_json(*out);
  return 0;
}

}  // namespace hypic::cli
