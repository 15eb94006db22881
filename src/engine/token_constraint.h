// Constrained decoding: a byte grammar (grammar/grammar.h) restricts which tokens a sequence
// may sample, so that its text is always a sentence of the grammar (JSON of a schema, tool
// calls). A token is allowed when its bytes continue the text so far; the end-of-sequence
// tokens are allowed when the text is a whole sentence, and are the only ones once nothing
// may follow; other special tokens never are.
//
// Sampling under the mask without computing it for the whole vocabulary when it need not be:
//   greedy:                 candidates in descending logit order, the first allowed one
//                           (exact: the masked argmax); after kRankedTries, the full mask;
//   temperature, no top-k / top-p: rejection sampling, up to kRejectionTries draws (binary
//                           searches in one cumulative sum of the weights) from the
//                           unmasked distribution (exact: the accepted draw follows the masked
//                           distribution), then the full mask;
//   top-k or top-p:         the full mask, then the usual sampler (they apply after the mask).
// The full mask walks a byte trie of the vocabulary (VocabTrie, built once per tokenizer)
// with the grammar state, pruning every subtree whose first byte the grammar refuses. Grammar
// states are interned as they are met and their byte transitions memoised (a DFA built
// lazily, per sequence; past kMaxStates states it starts over, between two calls), so a walk is mostly
// table lookups: inside a JSON string almost every byte leads back to the same state.
// Reported logprobs stay those of the model's logits (before the mask), as vLLM's default.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/sampler.h"
#include "grammar/grammar.h"
#include "tokenizer/tokenizer.h"

namespace hypic {

// The non-special tokens of a vocabulary as a trie over their bytes. Immutable; shared.
class VocabTrie {
 public:
  // Built on first use per tokenizer and kept for the program's life.
  static std::shared_ptr<const VocabTrie> of(const Tokenizer& tok);
  explicit VocabTrie(const Tokenizer& tok);

  struct Node {
    int32_t first_edge = 0, edges = 0;    // into edge_byte_ / edge_to_
    int32_t first_token = 0, tokens = 0;  // into tokens_: the ids whose bytes end here
  };
  const std::vector<Node>& nodes() const { return nodes_; }
  uint8_t edge_byte(int32_t e) const { return edge_byte_[size_t(e)]; }
  int32_t edge_to(int32_t e) const { return edge_to_[size_t(e)]; }
  int32_t token(int32_t i) const { return tokens_[size_t(i)]; }

 private:
  Tokenizer tok_;  // keeps the tokenizer (and so the cache key) alive
  std::vector<Node> nodes_;  // nodes_[0]: the root (the empty string)
  std::vector<uint8_t> edge_byte_;
  std::vector<int32_t> edge_to_, tokens_;
};

class TokenConstraint {
 public:
  static constexpr int kRankedTries = 64;
  static constexpr int kRejectionTries = 16;
  static constexpr size_t kMaxStates = 2048;  // 1 KiB of transitions each

  // With a `trigger` the constraint is lazy: text is free until it contains the trigger; the
  // bytes after it then follow the grammar until a sentence of it is complete, and the text
  // is free again (tool_choice "auto": free text, but every call the model starts is valid).
  // A token that carries the trigger and bytes the grammar refuses leaves that one free.
  // With a `gate` as well, the trigger counts only after the gate's text (a reasoning block's
  // close: a call written while thinking is part of the thought, not a call).
  TokenConstraint(std::shared_ptr<const grammar::Grammar> g, const Tokenizer& tok, std::vector<int32_t> eos,
                  std::string trigger = "", std::string gate = "");

  bool allows(int32_t id);
  // The next token under the mask (see above); -1 when no token is allowed (the grammar is
  // complete and the model has no end-of-sequence token).
  int32_t sample(Sampler& sampler, const SamplingParams& p, const float* logits, int64_t V);
  // Advances past an allowed token (an end-of-sequence token changes nothing).
  void accept(int32_t id);
  // The full mask: allowed[id] = 1 for each allowed id ([V]).
  void allowed_mask(std::vector<uint8_t>* allowed, int64_t V);
  // The text so far is a whole sentence / nothing may follow it.
  bool complete() const { return !active_ || dfa_[size_t(cur_)].accepting; }
  bool finished() const { return active_ && complete() && dfa_[size_t(cur_)].next.none(); }
  // The grammar applies now (always, without a trigger).
  bool active() const { return active_; }

  // Tokens sampled under the grammar that took the full mask (benchmarks, GenerateResult).
  int64_t full_masks() const { return full_masks_; }

 private:
  // One interned grammar state: its byte transitions (kUnknown until computed, kDead) and
  // what the mask needs of it.
  static constexpr int32_t kUnknown = -2, kDead = -1;
  struct DfaState {
    grammar::Grammar::State state;
    grammar::ByteSet next;  // bytes that continue it
    bool accepting = false;
    std::vector<int32_t> to;  // [256]
  };
  int32_t intern(grammar::Grammar::State s);
  int32_t step(int32_t sid, uint8_t b);  // kDead when b does not continue it
  int32_t run(int32_t sid, std::string_view bytes);
  // Past kMaxStates: forgets every state but the current one (ids held by a caller are then
  // stale: called only on entry to allows / accept / allowed_mask).
  void bound_cache();
  bool is_eos(int32_t id) const;
  int32_t best_eos(const float* logits) const;
  void walk(int32_t node, int32_t sid, std::vector<uint8_t>* allowed);
  int32_t masked_sample(Sampler& sampler, const float* logits, int64_t V);
  int32_t temperature_sample(Sampler& sampler, const SamplingParams& p, const float* logits, int64_t V);

  std::shared_ptr<const grammar::Grammar> g_;
  Tokenizer tok_;
  std::shared_ptr<const VocabTrie> trie_;
  std::vector<int32_t> eos_;
  std::vector<DfaState> dfa_;
  std::unordered_map<std::string, int32_t> ids_;  // a state's stacks, serialised -> its id
  int32_t cur_ = 0;  // the state after the text so far
  std::string trigger_, gate_;  // gate_: cleared once seen
  bool active_ = true;
  std::string tail_;  // lazy, inactive: the last bytes of the text (a trigger across tokens)
  std::vector<uint8_t> allowed_;  // scratch for the full mask
  std::vector<float> masked_;
  std::vector<int32_t> order_;
  std::vector<double> cdf_;  // cumulative sampling weights (temperature without top-k / top-p)
  int64_t full_masks_ = 0;
};

}  // namespace hypic
