#include "engine/generate.h"

#include "engine/prompt.h"

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
    if (p != std::string::npos && p < cut) {
      cut = p;
      matched_ = s;
    }
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
  for (const std::string& s : model_chat_template(cfg).end_tokens()) {
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

DecodeCursor::DecodeCursor(const ModelConfig& cfg, const Tokenizer& tok,
                           const GenerateOptions& opt, TextCallback on_text, const Timer& start,
                           GenerateResult* out)
    : vocab_(cfg.vocab_size),
      context_(cfg.max_position_embeddings),
      opt_(opt),
      tok_(tok),
      eos_(eos_ids(cfg, tok)),
      sampler_(opt.sampling),
      stop_(opt.stop),
      dec_(tok),
      on_text_(std::move(on_text)),
      start_(start),
      out_(out) {
  out_->finish_reason = "length";
  ended_ = opt.max_tokens <= 0;
  if (opt.grammar) constraint_.emplace(opt.grammar, tok, eos_, opt.grammar_trigger, opt.grammar_gate);
}

int32_t DecodeCursor::sample(const float* logits) {
  const int32_t id = constraint_ ? constraint_->sample(sampler_, opt_.sampling, logits, vocab_)
                                 : sampler_.sample(logits, vocab_);
  if (id >= 0 && opt_.logprobs >= 0) pending_lp_ = logprobs_at(logits, vocab_, id, std::min(opt_.logprobs, kMaxTopLogprobs), tok_);
  return id;
}

bool DecodeCursor::accept(int32_t id, int64_t pos) {
  GenerateResult& r = *out_;
  if (id < 0) {  // under a grammar, no token is allowed: the text is complete
    r.finish_reason = "stop";
    return end();
  }
  if (sampled_++ == 0) {
    r.ttft_ms = start_.ms();
    decode_timer_.reset();
  }
  last_ = id;
  r.tokens.push_back(id);
  if (opt_.stop_at_eos && std::find(eos_.begin(), eos_.end(), id) != eos_.end()) {
    r.finish_reason = "stop";
    return end();
  }
  if (constraint_) constraint_->accept(id);
  if (opt_.logprobs >= 0) r.logprobs.push_back(std::move(pending_lp_));
  const std::string piece = stop_.push(dec_.push(id));
  r.text += piece;
  if (!piece.empty() && !emit(piece)) {
    cancelled_ = true;
    return end();
  }
  if (stop_.stopped()) {
    r.finish_reason = "stop";
    r.stop_sequence = stop_.matched();
    return end();
  }
  // The token still has to be fed, at position pos: it needs a free position.
  if (sampled_ == opt_.max_tokens || pos + 1 > context_) return end();
  return true;
}

bool DecodeCursor::emit(const std::string& piece) {
  std::vector<PositionLogprobs>& lp = out_->logprobs;
  if (opt_.on_logprobs && lp_sent_ < lp.size()) {  // the tokens this text came from
    opt_.on_logprobs(std::vector<PositionLogprobs>(lp.begin() + std::ptrdiff_t(lp_sent_), lp.end()));
    lp_sent_ = lp.size();
  }
  return !on_text_ || on_text_(piece);
}

Status DecodeCursor::finish() {
  GenerateResult& r = *out_;
  if (!cancelled_ && !stop_.stopped()) {
    const std::string rest = stop_.push(dec_.flush()) + stop_.flush();
    r.text += rest;
    if (!rest.empty()) emit(rest);
  }
  r.decode_ms = sampled_ == 0 ? 0 : decode_timer_.ms();
  if (constraint_) r.full_masks = constraint_->full_masks();
  if (cancelled_) return Status(StatusCode::kCancelled, "generation cancelled by the caller");
  return Status::ok();
}

Status decode(const Model& model, const Tokenizer& tok, SeqState& st, std::vector<float> logits,
              const GenerateOptions& opt, const TextCallback& on_text, const Timer& start,
              GenerateResult* out) {
  DecodeCursor cur(model.config(), tok, opt, on_text, start, out);
  while (cur.next(logits.data(), st.pos))
    HYPIC_RETURN_IF_ERROR(model.forward(st, {cur.token()}, LogitsFor::kLast, &logits));
  return cur.finish();
}

}  // namespace hypic
