// hypic run with --segment/--query: a request made of parts, run through a PIC mode, possibly
// several times in one process (first cold, then warm). One JSON object per run.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/timer.h"
#include "engine/compose.h"
#include "engine/generate.h"
#include "engine/prompt.h"

namespace hypic::cli {

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return io_error("cannot read '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int run_parts(const Args& a, const Model& model, const Tokenizer& tok, const GenerateOptions& go) {
  ComposeOptions co;
  if (!parse_pic_mode(a.str("mode"), &co.mode))
    return report_error("run", invalid_argument("--mode must be full, prefix, hypic or naive"));
  auto seam = a.integer("seam");
  auto mem = a.integer("cache-mem");
  auto repeat = a.integer("repeat");
  auto seed = a.integer("seed");
  for (const Status* s : {&seam.status(), &mem.status(), &repeat.status(), &seed.status()})
    if (!s->is_ok()) return report_error("run", *s);
  if (*seam < 0 || *mem < 0 || *repeat < 1)
    return report_error("run", invalid_argument("need --seam >= 0, --cache-mem >= 0, --repeat >= 1"));
  if (!a.has("query")) return report_error("run", invalid_argument("--query is required with --segment"));
  co.seam = int(*seam);
  co.salt = a.str("salt");
  std::vector<std::string> docs;
  for (const auto& path : a.all("segment")) {
    auto t = read_text_file(path);
    if (!t) return report_error("run", t.status());
    docs.push_back(t.value());
  }
  SegmentStore::Options so;
  so.mem_budget_bytes = size_t(*mem) << 20;
  so.disk_dir = a.str("cache-dir");
  auto opened = SegmentStore::open(so);
  if (!opened) return report_error("run", opened.status());
  std::shared_ptr<SegmentStore> store = std::move(opened).value();
  auto prefix_cache = std::make_shared<PrefixCache>(size_t(*mem) << 20);
  Composer composer(model, store, prefix_cache);
  std::mt19937 rng{static_cast<uint32_t>(*seed)};
  for (int64_t run = 0; run < *repeat; ++run) {
    if (run > 0 && a.flag("shuffle")) std::shuffle(docs.begin(), docs.end(), rng);
    const PromptParts parts = chat_parts(tok, a.str("system"), docs, a.str("query"));
    Timer t;
    SeqState st = model.new_state(parts.total_tokens() + go.max_tokens + 1);
    std::vector<float> logits;
    ComposeStats cs;
    if (Status s = composer.prefill(parts, co, &st, &logits, &cs); !s) return report_error("run", s);
    GenerateResult r;
    r.prompt_tokens = parts.total_tokens();
    r.prefill_ms = t.ms();
    if (Status s = decode(model, tok, st, std::move(logits), go, {}, t, &r); !s)
      return report_error("run", s);
    const auto ss = store->stats();
    nlohmann::json j = {
        {"run", run},
        {"mode", pic_mode_name(co.mode)},
        {"seam", co.seam},
        {"text", r.text},
        {"finish_reason", r.finish_reason},
        {"ttft_ms", r.ttft_ms},
        {"build_ms", cs.build_ms},
        {"prefill_ms", cs.prefill_ms},
        {"segments_hit", cs.segments_hit},
        {"segments_missed", cs.segments_missed},
        {"prompt_tokens", cs.prompt_tokens},
        {"reused_tokens", cs.reused_tokens},
        {"recomputed_tokens", cs.recomputed_tokens},
        {"seam_tokens", cs.seam_tokens},
        {"completion_tokens", r.tokens.size()},
        {"store_bytes", ss.mem_bytes},
    };
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace hypic::cli
