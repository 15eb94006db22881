#include "engine/batch_decode.h"

#include <algorithm>
#include <cstring>

#include "core/parallel.h"

namespace hypic {

// One active sequence. Not movable once made: the cursor writes into `result`.
struct DecodeBatch::Seq {
  Seq(Id id_, SeqState st, std::vector<float> l, const ModelConfig& cfg, const Tokenizer& tok,
      const GenerateOptions& opt, TextCallback on_text, const Timer& start)
      : id(id_),
        state(std::move(st)),
        logits(std::move(l)),
        cursor(cfg, tok, opt, std::move(on_text), start, &result) {}
  Id id;
  SeqState state;
  std::vector<float> logits;  // [V]: those of the last token the state consumed
  GenerateResult result;
  DecodeCursor cursor;
  int32_t sampled = -1;  // this step's token
};

DecodeBatch::DecodeBatch(const Model& model, const Tokenizer& tok) : model_(model), tok_(tok) {}
DecodeBatch::~DecodeBatch() = default;

Result<DecodeBatch::Id> DecodeBatch::add(SeqState state, std::vector<float> first_logits,
                                         GenerateOptions opt, TextCallback on_text, Timer start) {
  const auto& c = model_.config();
  if (int64_t(first_logits.size()) != c.vocab_size)
    return invalid_argument("DecodeBatch::add: " + std::to_string(first_logits.size()) +
                            " logits, the model's vocabulary has " +
                            std::to_string(c.vocab_size) + "; pass the prompt's last row");
  if (opt.max_tokens < 0) return invalid_argument("max_tokens must be >= 0");
  if (Status s = model_.check_state(state); !s.is_ok())
    return s.with_context("DecodeBatch::add");
  const Id id = next_id_++;
  const int64_t prompt = state.pos;
  active_.push_back(std::make_unique<Seq>(id, std::move(state), std::move(first_logits), c, tok_,
                                          opt, std::move(on_text), start));
  active_.back()->result.prompt_tokens = prompt;
  return id;
}

void DecodeBatch::retire(Seq& s, Status status) {
  finished_.push_back({s.id, std::move(s.result), std::move(status)});
}

Status DecodeBatch::step() {
  const size_t n = active_.size();
  // Sampling is per sequence and independent (each cursor has its own sampler), so it runs
  // in parallel; what it streams and decides runs in order.
  parallel_for(int64_t(n), [&](int64_t i) {
    Seq& s = *active_[size_t(i)];
    if (!s.cursor.ended()) s.sampled = s.cursor.sample(s.logits.data());
  });
  std::vector<std::unique_ptr<Seq>> going;
  for (auto& p : active_) {
    Seq& s = *p;
    if (!s.cursor.ended() && s.cursor.accept(s.sampled, s.state.pos)) {
      going.push_back(std::move(p));
    } else {
      Status st = s.cursor.finish();
      retire(s, std::move(st));
    }
  }
  active_ = std::move(going);
  if (active_.empty()) return Status::ok();
  std::vector<SeqState*> states;
  std::vector<int32_t> tokens;
  for (auto& p : active_) {
    states.push_back(&p->state);
    tokens.push_back(p->cursor.token());
  }
  if (Status st = model_.decode_batch(states, tokens, &logits_); !st) {
    for (auto& p : active_) retire(*p, st);
    active_.clear();
    return st;
  }
  const size_t V = size_t(model_.config().vocab_size);
  for (size_t b = 0; b < active_.size(); ++b)
    std::memcpy(active_[b]->logits.data(), logits_.data() + b * V, V * sizeof(float));
  return Status::ok();
}

std::vector<DecodeBatch::Finished> DecodeBatch::take_finished() {
  std::vector<Finished> out;
  out.swap(finished_);
  return out;
}

bool DecodeBatch::remove(Id id) {
  auto it =
      std::find_if(active_.begin(), active_.end(), [&](const auto& p) { return p->id == id; });
  if (it == active_.end()) return false;
  active_.erase(it);
  return true;
}

bool DecodeBatch::end(Id id, Status status) {
  auto it =
      std::find_if(active_.begin(), active_.end(), [&](const auto& p) { return p->id == id; });
  if (it == active_.end()) return false;
  Seq& s = **it;
  static_cast<void>(s.cursor.finish());
  s.result.finish_reason = "abort";
  retire(s, std::move(status));
  active_.erase(it);
  return true;
}

}  // namespace hypic
