#include "engine/generate.h"

#include <algorithm>

#include "core/timer.h"

namespace hypic {

std::string StopMatcher::push(const std::string& text) {
  if (stopped_) return {};
  pending_ += text;
  size_t cut = std::string::npos;
  for (const auto& s : stops_) {
    if (s.empty()) continue;
    const size_t p = pending_.find(s);
    if (p != std::string::npos) cut = std::min(cut, p);
  }
  if (cut != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, cut);
    pending_.clear();
    return out;
  }
  // Keep the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& s : stops_)
    for (size_t n = std::min(s.size() - (s.empty() ? 0 : 1), pending_.size()); n > hold; --n)
      if (pending_.compare(pending_.size() - n, n, s, 0, n) == 0) {
        hold = n;
        break;
      }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopMatcher::flush() {
  std::string out;
  out.swap(pending_);
  return stopped_ ? std::string() : out;
}

std::vector<int32_t> eos_ids(const ModelConfig& cfg, const Tokenizer& tok) {
  std::vector<int32_t> ids;
  for (int64_t e : cfg.eos_token_ids) ids.push_back(int32_t(e));
  for (const char* s : {"<|im_end|>", "<|endoftext|>"}) {
    const int32_t id = tok.token_id(s);
    if (id >= 0) ids.push_back(id);
  }
  return ids;
}

Result<GenerateResult> generate(const Model& model, const Tokenizer& tok,
                                const std::vector<int32_t>& prompt, const GenerateOptions& opt,
                                const TextCallback& on_text) {
  if (prompt.empty())
    return invalid_argument("the prompt is empty; give a prompt of at least one token");
  if (opt.max_tokens < 0) return invalid_argument("max_tokens must be >= 0");
  const int64_t ctx = model.config().max_position_embeddings;
  if (int64_t(prompt.size()) >= ctx)
    return out_of_range("prompt of " + std::to_string(prompt.size()) +
                        " tokens does not fit the model's context of " + std::to_string(ctx) +
                        " tokens (one position must remain for the answer); shorten it");
  GenerateResult r;
  r.prompt_tokens = int64_t(prompt.size());
  Timer t;
  // KV room for the whole request, but never more than the context (max_tokens may be huge).
  SeqState st = model.new_state(std::min(int64_t(prompt.size()) + opt.max_tokens + 1, ctx));
  std::vector<float> logits;
  HYPIC_RETURN_IF_ERROR(model.forward(st, prompt, LogitsFor::kLast, &logits));
  r.prefill_ms = t.ms();
  HYPIC_RETURN_IF_ERROR(decode(model, tok, st, std::move(logits), opt, on_text, t, &r));
  return r;
}

Status decode(const Model& model, const Tokenizer& tok, SeqState& st, std::vector<float> logits,
              const GenerateOptions& opt, const TextCallback& on_text, const Timer& start,
              GenerateResult* out) {
  GenerateResult& r = *out;
  const int64_t V = model.config().vocab_size;
  const int64_t ctx = model.config().max_position_embeddings;
  const auto eos = eos_ids(model.config(), tok);
  Sampler sampler(opt.sampling);
  StopMatcher stop(opt.stop);
  IncrementalDecoder dec(tok);
  r.finish_reason = "length";
  Timer td;
  bool cancelled = false;
  for (int i = 0; i < opt.max_tokens; ++i) {
    const int32_t id = sampler.sample(logits.data(), V);
    if (i == 0) {
      r.ttft_ms = start.ms();
      td.reset();
    }
    r.tokens.push_back(id);
    if (opt.stop_at_eos && std::find(eos.begin(), eos.end(), id) != eos.end()) {
      r.finish_reason = "stop";
      break;
    }
    const std::string piece = stop.push(dec.push(id));
    r.text += piece;
    if (on_text && !piece.empty() && !on_text(piece)) { cancelled = true; break; }
    if (stop.stopped()) {
      r.finish_reason = "stop";
      break;
    }
    if (i + 1 == opt.max_tokens || st.pos + 1 > ctx) break;
    HYPIC_RETURN_IF_ERROR(model.forward(st, {id}, LogitsFor::kLast, &logits));
  }
  if (!cancelled && !stop.stopped()) {
    const std::string rest = stop.push(dec.flush()) + stop.flush();
    r.text += rest;
    if (on_text && !rest.empty()) on_text(rest);
  }
  r.decode_ms = r.tokens.empty() ? 0 : td.ms();
  if (cancelled) return Status(StatusCode::kCancelled, "generation cancelled by the caller");
  return Status::ok();
}

}  // namespace hypic
