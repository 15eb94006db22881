#include "bench/eval_run.h"

#include <algorithm>
#include <cmath>

#include "core/timer.h"
#include "engine/generate.h"
#include "engine/model_tokenizer.h"

namespace hypic::bench {
namespace {

// −log softmax(logits)[target], in double.
double nll(const float* logits, int64_t V, int32_t target) {
  const float mx = *std::max_element(logits, logits + V);
  double z = 0;
  for (int64_t v = 0; v < V; ++v) z += std::exp(double(logits[v]) - mx);
  return std::log(z) + mx - double(logits[target]);
}

double reused_fraction(const ComposeStats& cs) {
  return cs.prompt_tokens > 0 ? double(cs.reused_tokens) / double(cs.prompt_tokens) : 0;
}

}  // namespace

Result<EvalModel> load_eval_model(const EvalOptions& o) {
  LoadOptions lo;
  lo.compute = o.dtype;
  lo.progress = false;
  auto model = Model::load(o.model, lo);
  if (!model) return model.status();
  auto tok = load_model_tokenizer(o.model);
  if (!tok) return tok.status();
  return EvalModel{std::move(model).value(), std::move(tok).value()};
}

Result<std::unique_ptr<Runner>> fresh_runner(const Model& m, const EvalOptions& o) {
  SegmentStore::Options so;
  so.mem_budget_bytes = size_t(o.cache_mem_mib) << 20;
  auto store = SegmentStore::open(so);
  if (!store) return store.status();
  return std::make_unique<Runner>(m, std::shared_ptr<SegmentStore>(std::move(store).value()),
                                  std::make_shared<PrefixCache>(size_t(o.cache_mem_mib) << 20));
}

nlohmann::json eval_document(const EvalOptions& o, const std::map<std::string, int>& per_task, nlohmann::json results) {
  return nlohmann::json{{"model", o.model},           {"data", o.data},
                        {"dtype", o.dtype_label},     {"records_per_task", per_task},
                        {"max_tokens", o.max_tokens}, {"results", std::move(results)}};
}

Result<EvalRun> eval_run_cold(const Runner& runner, const Tokenizer& tok, const PromptParts& parts,
                              const RunOptions& ro, int max_tokens, const std::vector<int32_t>& reply) {
  const Model& model = runner.model();
  GenerateOptions go;
  go.max_tokens = max_tokens;
  RunOptions o = ro;
  o.decode_tokens = max_tokens;
  const Timer t;
  const TokenizedRequest req = make_request(model, parts, ro.compose.seam, ro.compose.salt);
  HYPIC_ASSIGN_OR_RETURN(Prefilled p, runner.prefill(req, o));
  const double prefill_ms = t.ms();
  double reply_nll = 0;
  if (!reply.empty()) {
    const int64_t V = model.config().vocab_size;
    reply_nll = nll(p.logits.data(), V, reply[0]);
    if (reply.size() > 1) {
      SeqState fork = p.state.copy();
      std::vector<float> all;
      const std::vector<int32_t> in(reply.begin(), reply.end() - 1);
      HYPIC_RETURN_IF_ERROR(model.forward(fork, in, LogitsFor::kAll, &all));
      for (size_t i = 1; i < reply.size(); ++i) reply_nll += nll(all.data() + (i - 1) * V, V, reply[i]);
    }
    reply_nll /= double(reply.size());
  }
  const Timer t_decode;
  GenerateResult g;
  HYPIC_RETURN_IF_ERROR(decode(model, tok, p.state, std::move(p.logits), go, {}, t_decode, &g));
  EvalRun r;
  r.text = g.text;
  r.ttft_ms = prefill_ms + g.ttft_ms;
  r.reply_nll = reply_nll;
  r.reused_fraction = reused_fraction(p.figures.compose);
  return r;
}

Result<EvalRun> eval_run_warm(const Runner& runner, const Tokenizer& tok, const PromptParts& parts,
                              const RunOptions& ro) {
  GenerateOptions go;
  go.max_tokens = 1;
  const Timer t;
  const TokenizedRequest req = make_request(runner.model(), parts, ro.compose.seam, ro.compose.salt);
  const double key_ms = t.ms();
  HYPIC_ASSIGN_OR_RETURN(Completion c, runner.generate(req, ro, tok, go));
  EvalRun r;
  r.ttft_ms = key_ms + c.figures.ttft_ms;
  r.reused_fraction = reused_fraction(c.figures.compose);
  return r;
}

}  // namespace hypic::bench
