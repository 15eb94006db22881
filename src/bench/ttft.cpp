#include "bench/ttft.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

#include "bench/forward.h"
#include "core/log.h"
#include "core/timer.h"
#include "engine/runner.h"
#include "engine/sampler.h"

namespace hypic::bench {
namespace {

struct Trace {
  std::vector<int32_t> system, query;
  std::vector<std::vector<int32_t>> docs;
  std::vector<std::vector<int>> requests;  // document indices per request, in order
};

Trace make_trace(int64_t vocab, int n_docs, int doc_tokens, int per_request, int n_requests,
                 double zipf, uint32_t seed) {
  std::mt19937 g(seed);
  Trace t;
  t.system = random_tokens(g, 32, vocab);
  t.query = random_tokens(g, 16, vocab);
  for (int d = 0; d < n_docs; ++d) t.docs.push_back(random_tokens(g, doc_tokens, vocab));
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

Result<nlohmann::json> bench_ttft(const TtftBenchOptions& o) {
  LoadOptions lo;
  lo.compute = o.dtype;
  auto loaded = Model::load(o.model, lo);
  if (!loaded) return loaded.status();
  const Model& model = **loaded;
  const Trace trace = make_trace(model.config().vocab_size, o.docs, o.doc_tokens, o.per_request,
                                 o.warmup + o.requests, o.zipf, o.seed);
  nlohmann::json out = {{"docs", o.docs}, {"doc_tokens", o.doc_tokens}, {"per_request", o.per_request},
                        {"requests", o.requests}, {"warmup", o.warmup}, {"seam", o.seam},
                        {"zipf", o.zipf}, {"dtype", o.dtype_label}, {"modes", nlohmann::json::object()}};
  for (PicMode mode : o.modes) {
    SegmentStore::Options so;
    so.mem_budget_bytes = size_t(o.cache_mem_mib) << 20;
    auto opened = SegmentStore::open(so);
    if (!opened) return opened.status();
    std::shared_ptr<SegmentStore> store = std::move(opened).value();
    auto prefix_cache = std::make_shared<PrefixCache>(size_t(o.cache_mem_mib) << 20);
    const Runner runner(model, store, prefix_cache);
    RunOptions ro;
    ro.compose.mode = mode;
    ro.compose.seam = o.seam;
    std::vector<double> ttft;
    double cold_ms = 0;  // the trace's first request: empty caches, every segment missed
    int64_t hits = 0, misses = 0, recomputed = 0, prompt = 0;
    for (size_t r = 0; r < trace.requests.size(); ++r) {
      PromptParts p;
      p.prefix = trace.system;
      for (int d : trace.requests[r]) p.segments.push_back(trace.docs[size_t(d)]);
      p.suffix = trace.query;
      Timer t;
      const TokenizedRequest req = make_request(model, std::move(p), o.seam, "");
      HYPIC_ASSIGN_OR_RETURN(const Prefilled done, runner.prefill(req, ro));
      argmax(done.logits.data(), model.config().vocab_size);  // the first token
      const double ms = t.ms();
      const ComposeStats& cs = done.figures.compose;
      const bool measured = int64_t(r) >= o.warmup;
      if (r == 0) cold_ms = ms;
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
    auto& m = out["modes"][pic_mode_name(mode)];
    m = {{"p50_ttft_ms", percentile(ttft, 0.5)},
         {"p99_ttft_ms", percentile(ttft, 0.99)},
         {"cold_ttft_ms", cold_ms},
         {"segment_hit_rate", hits + misses ? double(hits) / double(hits + misses) : 0.0},
         {"mean_recomputed_tokens", double(recomputed) / double(ttft.size())},
         {"mean_prompt_tokens", double(prompt) / double(ttft.size())}};
    const auto ss = store->stats();
    if (ss.mem_entries > 0) {
      m["cached_entries"] = ss.mem_entries;
      m["bytes_per_entry"] = double(ss.mem_bytes) / double(ss.mem_entries);
    }
    const auto ps = prefix_cache->stats();
    if (ps.nodes > 0) {
      m["prefix_nodes"] = ps.nodes;
      m["prefix_cache_bytes"] = ps.bytes;
    }
  }
  if (out["modes"].contains("prefix") && out["modes"].contains("hypic"))
    out["ratio_p50_prefix_over_hypic"] = out["modes"]["prefix"]["p50_ttft_ms"].get<double>() /
                                         out["modes"]["hypic"]["p50_ttft_ms"].get<double>();
  if (out["modes"].contains("full") && out["modes"].contains("hypic"))
    out["ratio_p50_full_over_hypic"] = out["modes"]["full"]["p50_ttft_ms"].get<double>() /
                                       out["modes"]["hypic"]["p50_ttft_ms"].get<double>();
  return out;
}

}  // namespace hypic::bench
