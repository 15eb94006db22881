// hypic bench ttft: a synthetic RAG trace through every mode in one process.
// A pool of N documents (random token ids, L each) with Zipf popularity; each request draws
// K distinct documents in random order, after a shared system prefix and before a short
// query. Per mode: fresh caches, `warmup` requests, then `requests` measured ones.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/log.h"
#include "core/timer.h"
#include "engine/compose.h"
#include "engine/sampler.h"

namespace hypic::cli {
namespace {

struct Trace {
  std::vector<int32_t> system, query;
  std::vector<std::vector<int32_t>> docs;
  std::vector<std::vector<int>> requests;  // document indices per request, in order
};

Trace make_trace(int64_t vocab, int n_docs, int doc_tokens, int per_request, int n_requests,
                 double zipf, uint32_t seed) {
  std::mt19937 g(seed);
  auto ids = [&](int n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = int32_t(g() % uint32_t(std::min<int64_t>(vocab, 1 << 30)));
    return t;
  };
  Trace t;
  t.system = ids(32);
  t.query = ids(16);
  for (int d = 0; d < n_docs; ++d) t.docs.push_back(ids(doc_tokens));
  std::vector<double> w(static_cast<size_t>(n_docs));
  for (int d = 0; d < n_docs; ++d) w[size_t(d)] = 1.0 / std::pow(d + 1.0, zipf);
  for (int r = 0; r < n_requests; ++r) {
    std::vector<double> ww = w;
    std::vector<int> pick;
    for (int k = 0; k < per_request; ++k) {
      std::discrete_distribution<int> dist(ww.begin(), ww.end());
      const int d = dist(g);
      pick.push_back(d);
      ww[size_t(d)] = 0;  // without replacement
    }
    std::shuffle(pick.begin(), pick.end(), g);
    t.requests.push_back(pick);
  }
  return t;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const double idx = p * double(v.size() - 1);
  const size_t lo = size_t(std::floor(idx)), hi = size_t(std::ceil(idx));
  return v[lo] + (v[hi] - v[lo]) * (idx - double(lo));
}

}  // namespace

int bench_ttft(int argc, char** argv) {
  Args a("hypic bench ttft --model DIR [--docs N --doc-tokens L --per-request K --requests R]",
         "Time to first token of a synthetic RAG trace (Zipf document popularity, random order)\n"
         "in every mode, one process, after warm-up requests. Prints one JSON object.");
  a.opt("model", "DIR", "model directory")
      .opt("docs", "N", "documents in the pool", "20")
      .opt("doc-tokens", "L", "tokens per document", "1000")
      .opt("per-request", "K", "documents per request", "10")
      .opt("requests", "R", "measured requests per mode", "8")
      .opt("warmup", "W", "warm-up requests per mode (same trace distribution)", "4")
      .opt("zipf", "S", "Zipf exponent of document popularity", "1.0")
      .opt("seam", "W", "hypic / naive seam width", "8")
      .opt("modes", "LIST", "comma-separated modes", "full,prefix,hypic,naive")
      .opt("cache-mem", "MiB", "cache budget per mode", "8192")
      .opt("dtype", "bf16|f32", "matrix weight type", "bf16")
      .opt("seed", "S", "trace seed", "1")
      .opt("json", "", "print JSON (the default)");
  if (Status s = a.parse(argc, argv); !s) return report_error("bench ttft", s);
  if (a.help_requested()) return std::printf("%s", a.help().c_str()), 0;
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
  std::vector<PicMode> modes;
  {
    std::string list = a.str("modes") + ",";
    for (size_t p = 0, q; (q = list.find(',', p)) != std::string::npos; p = q + 1) {
      PicMode m;
      if (!parse_pic_mode(list.substr(p, q - p), &m))
        return report_error("bench ttft", invalid_argument("unknown mode in --modes"));
      modes.push_back(m);
    }
  }
  LoadOptions lo;
  lo.compute = *dt;
  auto loaded = Model::load(a.str("model"), lo);
  if (!loaded) return report_error("bench ttft", loaded.status());
  const Model& model = **loaded;
  const Trace trace = make_trace(model.config().vocab_size, int(*n_docs), int(*doc_tokens),
                                 int(*per), int(*warm + *reqs), *zipf, uint32_t(*seed));
  nlohmann::json out = {{"docs", *n_docs}, {"doc_tokens", *doc_tokens}, {"per_request", *per},
                        {"requests", *reqs}, {"warmup", *warm}, {"seam", *seam},
                        {"zipf", *zipf}, {"dtype", a.str("dtype")}, {"modes", nlohmann::json::object()}};
  for (PicMode mode : modes) {
    SegmentStore::Options so;
    so.mem_budget_bytes = size_t(*mem) << 20;
    auto opened = SegmentStore::open(so);
    if (!opened) return report_error("bench ttft", opened.status());
    std::shared_ptr<SegmentStore> store = std::move(opened).value();
    auto prefix_cache = std::make_shared<PrefixCache>(size_t(*mem) << 20);
    Composer composer(model, store, prefix_cache);
    ComposeOptions co;
    co.mode = mode;
    co.seam = int(*seam);
    std::vector<double> ttft;
    int64_t hits = 0, misses = 0, recomputed = 0, prompt = 0;
    for (size_t r = 0; r < trace.requests.size(); ++r) {
      PromptParts p;
      p.prefix = trace.system;
      for (int d : trace.requests[r]) p.segments.push_back(trace.docs[size_t(d)]);
      p.suffix = trace.query;
      Timer t;
      SeqState st = model.new_state(p.total_tokens() + 1);
      std::vector<float> logits;
      ComposeStats cs;
      if (Status s = composer.prefill(p, co, &st, &logits, &cs); !s) return report_error("bench ttft", s);
      argmax(logits.data(), model.config().vocab_size);  // the first token
      const double ms = t.ms();
      const bool measured = int64_t(r) >= *warm;
      HYPIC_LOG_INFO("bench ttft: %s request %zu/%zu%s: %.1f ms, %d hit / %d missed, %lld recomputed",
                     pic_mode_name(mode), r + 1, trace.requests.size(), measured ? "" : " (warm-up)",
                     ms, cs.segments_hit, cs.segments_missed, (long long)cs.recomputed_tokens);
      if (!measured) continue;
      ttft.push_back(ms);
      hits += cs.segments_hit;
      misses += cs.segments_missed;
      recomputed += cs.recomputed_tokens;
      prompt += cs.prompt_tokens;
    }
    out["modes"][pic_mode_name(mode)] = {
        {"p50_ttft_ms", percentile(ttft, 0.5)},
        {"p99_ttft_ms", percentile(ttft, 0.99)},
        {"segment_hit_rate", hits + misses ? double(hits) / double(hits + misses) : 0.0},
        {"mean_recomputed_tokens", double(recomputed) / double(ttft.size())},
        {"mean_prompt_tokens", double(prompt) / double(ttft.size())}};
    const auto ss = store->stats();
    if (ss.mem_entries > 0) {
      out["modes"][pic_mode_name(mode)]["cached_entries"] = ss.mem_entries;
      out["modes"][pic_mode_name(mode)]["bytes_per_entry"] = double(ss.mem_bytes) / double(ss.mem_entries);
    }
    const auto ps = prefix_cache->stats();
    if (ps.nodes > 0) {
      out["modes"][pic_mode_name(mode)]["prefix_nodes"] = ps.nodes;
      out["modes"][pic_mode_name(mode)]["prefix_cache_bytes"] = ps.bytes;
    }
  }
  if (out["modes"].contains("prefix") && out["modes"].contains("hypic"))
    out["ratio_p50_prefix_over_hypic"] = out["modes"]["prefix"]["p50_ttft_ms"].get<double>() /
                                         out["modes"]["hypic"]["p50_ttft_ms"].get<double>();
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace hypic::cli
