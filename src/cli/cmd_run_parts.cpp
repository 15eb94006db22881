// hypic run with --segment/--query: a request made of parts, run through a PIC mode, possibly
// several times in one process (first cold, then warm). One JSON object per run.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "engine/prompt.h"
#include "engine/runner.h"

namespace hypic::cli {

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return io_error("cannot read '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

namespace {

// ‖a − b‖ / ‖b‖ over one or more pairs of arrays (added in turn).
struct RelDev {
  double num = 0, den = 0;
  RelDev& add(const float* a, const float* b, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      num += double(a[i] - b[i]) * double(a[i] - b[i]);
      den += double(b[i]) * double(b[i]);
    }
    return *this;
  }
  double value() const { return den > 0 ? std::sqrt(num / den) : std::sqrt(num); }
};

double rel_dev(const float* a, const float* b, size_t n) { return RelDev().add(a, b, n).value(); }

// --debug-deviation: the request in `full` and in the chosen mode, both traced; per layer the
// relative deviation of the suffix tokens' hidden states, and of each recurrent layer's
// fixed-size state (all its LayerState::fixed tensors together) at the end of the prompt.
Result<nlohmann::json> deviation_from_full(const Runner& runner, const TokenizedRequest& req,
                                           const ComposeOptions& co,
                                           std::vector<std::vector<float>>* trace) {
  if (co.mode == PicMode::kPrefix || co.mode == PicMode::kFull)
    return invalid_argument("--debug-deviation compares hypic or naive with full");
  std::vector<std::vector<float>> ref;
  RunOptions fo;
  fo.compose = co;
  fo.compose.mode = PicMode::kFull;
  fo.compose.trace_suffix = &ref;
  HYPIC_ASSIGN_OR_RETURN(Prefilled f, runner.prefill(req, fo));
  RunOptions mo;
  mo.compose = co;
  trace->clear();
  mo.compose.trace_suffix = trace;
  HYPIC_ASSIGN_OR_RETURN(Prefilled m, runner.prefill(req, mo));
  const SeqState &sf = f.state, &sm = m.state;
  const std::vector<float> &lf = f.logits, &lm = m.logits;
  const size_t H = size_t(runner.model().config().hidden_size), n = req.suffix.size() * H;
  nlohmann::json hidden = nlohmann::json::array(), state = nlohmann::json::array();
  for (size_t l = 0; l < ref.size() && l < trace->size(); ++l)
    hidden.push_back(rel_dev((*trace)[l].data() + (*trace)[l].size() - n,
                             ref[l].data() + ref[l].size() - n, n));
  for (size_t l = 0; l < sf.layers.size(); ++l) {
    if (sf.layers[l].fixed.empty()) continue;
    RelDev d;
    for (size_t j = 0; j < sf.layers[l].fixed.size(); ++j) {
      const Tensor &a = sm.layers[l].fixed[j].t, &b = sf.layers[l].fixed[j].t;
      d.add(a.f32(), b.f32(), size_t(b.numel()));
    }
    state.push_back(d.value());
  }
  return nlohmann::json{{"hidden_per_layer", hidden},
                        {"linear_state_per_linear_layer", state},
                        {"logits", rel_dev(lm.data(), lf.data(), lf.size())}};
}

}  // namespace

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
  const Runner runner(model, store, prefix_cache);
  RunOptions ro;
  ro.compose = co;
  const ChatTemplate& chat = model_chat_template(model.config());
  std::mt19937 rng{static_cast<uint32_t>(*seed)};
  for (int64_t run = 0; run < *repeat; ++run) {
    if (run > 0 && a.flag("shuffle")) std::shuffle(docs.begin(), docs.end(), rng);
    const TokenizedRequest req =
        make_request(model, chat_parts(chat, tok, a.str("system"), docs, a.str("query")), co.seam, co.salt);
    nlohmann::json deviation;
    std::vector<std::vector<float>> trace;
    if (a.flag("debug-deviation")) {
      auto d = deviation_from_full(runner, req, co, &trace);
      if (!d) return report_error("run", d.status());
      deviation = d.value();
    }
    auto done = runner.generate(req, ro, tok, go);
    if (!done) return report_error("run", done.status());
    const GenerateResult& r = done->generation;
    const RequestFigures& f = done->figures;
    const ComposeStats& cs = f.compose;
    const auto ss = store->stats();
    nlohmann::json j = {
        {"run", run},
        {"mode", pic_mode_name(f.mode)},
        {"seam", co.seam},
        {"text", r.text},
        {"finish_reason", r.finish_reason},
        {"ttft_ms", f.ttft_ms},
        {"build_ms", cs.build_ms},
        {"prefill_ms", cs.prefill_ms},
        {"segments_hit", cs.segments_hit},
        {"segments_missed", cs.segments_missed},
        {"prompt_tokens", cs.prompt_tokens},
        {"reused_tokens", cs.reused_tokens},
        {"recomputed_tokens", cs.recomputed_tokens},
        {"seam_tokens", cs.seam_tokens},
        {"completion_tokens", f.completion_tokens},
        {"store_bytes", ss.mem_bytes},
    };
    if (!deviation.is_null()) j["deviation"] = deviation;
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace hypic::cli
