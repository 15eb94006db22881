#include "engine/logprobs.h"

#include <algorithm>
#include <cmath>

namespace hypic {

PositionLogprobs logprobs_at(const float* logits, int64_t V, int32_t chosen, int top, const Tokenizer& tok) {
  // log-sum-exp in double, shifted by the maximum.
  float mx = -INFINITY;
  for (int64_t i = 0; i < V; ++i) mx = std::max(mx, logits[i]);
  double sum = 0;
  for (int64_t i = 0; i < V; ++i) sum += std::exp(double(logits[i]) - mx);
  const double lse = double(mx) + std::log(sum);
  auto entry = [&](int32_t id) {
    TokenLogprob t;
    t.id = id;
    t.bytes = std::string(tok.token_bytes(id));
    t.logprob = float(double(logits[id]) - lse);
    return t;
  };
  PositionLogprobs out;
  out.chosen = entry(chosen);
  // The `top` largest in one pass: a small sorted list (k <= 20), most cases rejected by one compare.
  const auto before = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::vector<int32_t> best;
  best.reserve(size_t(top) + 1);
  for (int64_t i = 0; i < V && top > 0; ++i) {
    const int32_t id = int32_t(i);
    if (int(best.size()) == top && !before(id, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), id, before), id);
    if (int(best.size()) > top) best.pop_back();
  }
  for (int32_t id : best) out.top.push_back(entry(id));
  return out;
}

Status score_prompt(const Model& model, const Tokenizer& tok, SeqState& st, const std::vector<int32_t>& prompt, int top,
                    std::vector<PositionLogprobs>* out, std::vector<float>* last_logits,
                    const std::function<bool()>& cancelled) {
  constexpr size_t kChunk = 64;  // rows of logits held at once: kChunk × vocabulary floats
  const int64_t V = model.config().vocab_size;
  out->clear();
  out->reserve(prompt.size());
  if (prompt.empty()) return invalid_argument("nothing to score: the prompt is empty");
  PositionLogprobs first;
  first.chosen = {prompt[0], std::string(tok.token_bytes(prompt[0])), std::nanf("")};
  out->push_back(std::move(first));
  std::vector<float> logits;
  for (size_t p = 0; p < prompt.size(); p += kChunk) {
    if (cancelled && cancelled()) return Status(StatusCode::kCancelled, "the prefill was cancelled");
    const std::vector<int32_t> chunk(prompt.begin() + std::ptrdiff_t(p),
                                     prompt.begin() + std::ptrdiff_t(std::min(prompt.size(), p + kChunk)));
    HYPIC_RETURN_IF_ERROR(model.forward(st, chunk, LogitsFor::kAll, &logits));
    for (size_t j = 0; j < chunk.size() && p + j + 1 < prompt.size(); ++j)
      out->push_back(logprobs_at(logits.data() + j * size_t(V), V, prompt[p + j + 1], top, tok));
    if (p + kChunk >= prompt.size())
      last_logits->assign(logits.end() - V, logits.end());
  }
  return Status::ok();
}

}  // namespace hypic
