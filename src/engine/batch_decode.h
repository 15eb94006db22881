// Continuous batching of decode: many prefilled sequences advance one token per step(),
// sharing one Model::decode_batch (the weights are read once per step, not once per
// sequence). Each sequence follows exactly decode()'s semantics (generate.h: DecodeCursor),
// so its tokens and text are those it would get decoded alone.
//
// Threading: none inside, no locks. The owner (the server scheduler) serialises all calls;
// on_text callbacks run inside step() on the calling thread, in the order sequences were
// added.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/generate.h"

namespace hypic {

class DecodeBatch {
 public:
  using Id = uint64_t;  // unique per DecodeBatch, never 0

  struct Finished {
    Id id = 0;
    // text, tokens, finish_reason, ttft_ms, decode_ms as decode() fills them; prompt_tokens
    // is the state's position when added (the prompt length).
    GenerateResult result;
    // ok; kCancelled when on_text returned false; or the model's error that ended it.
    Status status;
  };

  // model and tok must outlive the batch.
  DecodeBatch(const Model& model, const Tokenizer& tok);
  ~DecodeBatch();

  // Takes a prefilled sequence: first_logits ([V]) are its prompt's last-token logits; its
  // first token is sampled at the next step(). TTFT is measured from `start` (arrival).
  // Errors: logits of the wrong size, max_tokens < 0, a state of another model.
  Result<Id> add(SeqState state, std::vector<float> first_logits, GenerateOptions opt,
                 TextCallback on_text, Timer start);

  // One iteration: samples and streams the next token of every active sequence, retires
  // those that ended (to take_finished()), then runs one decode_batch over the rest.
  // A model error ends the sequences of that batch (reported with the error) and is returned.
  Status step();

  // Sequences that ended since the last call, in the order they ended.
  std::vector<Finished> take_finished();

  // Drops an active sequence (cancelled by its owner): no report, its state is freed, its
  // callback is not called again. False when no active sequence has this id.
  bool remove(Id id);
  // Ends an active sequence now (e.g. the server's drain deadline): its held-back text is
  // released, finish_reason is "abort", and take_finished() reports it with what it produced
  // so far and `status`. False when no active sequence has this id.
  bool end(Id id, Status status);

  size_t size() const { return active_.size(); }  // active sequences
  bool empty() const { return active_.empty(); }

 private:
  struct Seq;
  void retire(Seq& s, Status status);

  const Model& model_;
  const Tokenizer& tok_;
  std::vector<std::unique_ptr<Seq>> active_;  // in the order added
  std::vector<Finished> finished_;
  std::vector<float> logits_;  // [B, V] of the last decode_batch
  Id next_id_ = 1;
};

}  // namespace hypic
