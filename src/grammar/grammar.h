// Context-free grammars over bytes and their incremental matcher: what constrained decoding
// checks a token's bytes against (engine/token_constraint.h) and what JSON schemas compile to
// (grammar/json_schema.h).
//
// A grammar is a set of rules; a rule is a list of alternatives; an alternative is a sequence
// of elements, each a byte class (256-bit set) or a reference to a rule. The matcher is a
// pushdown recogniser in the style of llama.cpp's grammar sampler: its state is a set of
// stacks of positions (the next element to match), expanded until every top is a byte class;
// a byte advances every stack whose top admits it. Repetition is right recursion with
// tail-call elimination, so stacks stay as deep as the nesting of the text, not its length.
// Left recursion is not allowed (the builder's forms cannot make it).
//
// Invariants: State::stacks is sorted and free of duplicates; an empty stack means the text so
// far is a complete sentence (accepting()). Grammars are immutable once built: one is shared
// by every sequence that uses it, each with its own State.
#pragma once

#include <bitset>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace hypic::grammar {

using ByteSet = std::bitset<256>;

class Grammar;

// Builds a grammar. An Expr is one element: a byte class or a rule reference; the helpers
// make new rules as needed. Rules may refer to rules defined later (declare() then define()).
class Builder {
 public:
  struct Expr {
    bool is_rule = false;
    int32_t index = 0;  // rule id or byte-class id
  };

  Expr bytes(const ByteSet& s);                 // one byte of s
  Expr byte(uint8_t b);                         // exactly b
  Expr range(uint8_t lo, uint8_t hi);           // one byte in [lo, hi]
  Expr literal(std::string_view text);          // exactly text ("" matches nothing: epsilon)
  Expr seq(const std::vector<Expr>& items);     // items in order
  Expr alt(const std::vector<Expr>& options);   // one of options
  Expr opt(Expr e);                             // e or nothing
  Expr star(Expr e);                            // e repeated zero or more times
  Expr plus(Expr e);                            // e repeated one or more times
  Expr epsilon();                               // the empty string

  // A rule defined later (for recursion): declare, refer to it, then define it once.
  Expr declare();
  void define(Expr rule, const std::vector<std::vector<Expr>>& alternatives);

  // The grammar whose sentences are those of `root`. The builder is left empty.
  std::shared_ptr<const Grammar> build(Expr root);
  size_t rule_count() const { return rules_.size(); }

 private:
  int32_t add_rule(std::vector<std::vector<Expr>> alts);
  std::vector<ByteSet> classes_;
  std::vector<std::vector<std::vector<Expr>>> rules_;
  std::vector<bool> defined_;
};

class Grammar {
 public:
  struct State {
    std::vector<std::vector<int32_t>> stacks;  // positions; top at the back
    bool dead() const { return stacks.empty(); }
  };

  // The state before any byte.
  State start() const;
  // The state after byte b; dead() when no sentence starts with the text so far plus b.
  State advance(const State& s, uint8_t b) const;
  // advance() for each byte of text, stopping early once dead.
  State advance(const State& s, std::string_view text) const;
  // In place: false (and *s unchanged) when text does not continue any sentence.
  bool accept(State* s, std::string_view text) const;
  // The text so far is a whole sentence.
  static bool accepting(const State& s);
  // Some byte continues the text (false: accepting() and nothing may follow).
  bool can_continue(const State& s) const;
  // The bytes that may come next.
  ByteSet next_bytes(const State& s) const;
  // Whole text is a sentence.
  bool matches(std::string_view text) const;

 private:
  friend class Builder;
  enum class Kind : uint8_t { kEnd, kRule, kBytes };
  struct Elem {
    Kind kind;
    int32_t index;
  };
  // Expands the top of `stack` until it is a byte class (or the stack is empty), adding each
  // result to *out.
  void expand(std::vector<int32_t> stack, std::vector<std::vector<int32_t>>* out, int depth) const;
  static void normalise(State* s);

  std::vector<ByteSet> classes_;
  std::vector<Elem> elems_;                 // every alternative, each ended by kEnd
  std::vector<std::vector<int32_t>> alts_;  // rule -> its alternatives' first positions
  int32_t root_ = 0;
};

}  // namespace hypic::grammar
