#include "grammar/grammar.h"

#include <algorithm>
#include <cassert>
#include <stdexcept>

namespace hypic::grammar {

namespace {
// Deeper expansion than this is a left-recursive grammar (the builder cannot make one; the
// guard keeps a bug from recursing without end).
constexpr int kMaxExpandDepth = 4096;
}  // namespace

int32_t Builder::add_rule(std::vector<std::vector<Expr>> alts) {
  rules_.push_back(std::move(alts));
  defined_.push_back(true);
  return int32_t(rules_.size() - 1);
}

Builder::Expr Builder::bytes(const ByteSet& s) {
  classes_.push_back(s);
  return Expr{false, int32_t(classes_.size() - 1)};
}

Builder::Expr Builder::byte(uint8_t b) {
  ByteSet s;
  s.set(b);
  return bytes(s);
}

Builder::Expr Builder::range(uint8_t lo, uint8_t hi) {
  ByteSet s;
  for (int b = lo; b <= hi; ++b) s.set(size_t(b));
  return bytes(s);
}

Builder::Expr Builder::literal(std::string_view text) {
  if (text.size() == 1) return byte(uint8_t(text[0]));
  std::vector<Expr> seq;
  for (char c : text) seq.push_back(byte(uint8_t(c)));
  return Expr{true, add_rule({std::move(seq)})};
}

Builder::Expr Builder::seq(const std::vector<Expr>& items) {
  if (items.size() == 1) return items[0];
  return Expr{true, add_rule({items})};
}

Builder::Expr Builder::alt(const std::vector<Expr>& options) {
  if (options.size() == 1) return options[0];
  std::vector<std::vector<Expr>> alts;
  for (const Expr& o : options) alts.push_back({o});
  return Expr{true, add_rule(std::move(alts))};
}

Builder::Expr Builder::epsilon() { return Expr{true, add_rule({{}})}; }

Builder::Expr Builder::opt(Expr e) { return Expr{true, add_rule({{e}, {}})}; }

Builder::Expr Builder::star(Expr e) {
  // R ::= e R | epsilon (right recursion: the recogniser's tail call keeps stacks flat).
  Expr r = declare();
  define(r, {{e, r}, {}});
  return r;
}

Builder::Expr Builder::plus(Expr e) { return seq({e, star(e)}); }

Builder::Expr Builder::declare() {
  rules_.emplace_back();
  defined_.push_back(false);
  return Expr{true, int32_t(rules_.size() - 1)};
}

void Builder::define(Expr rule, const std::vector<std::vector<Expr>>& alternatives) {
  if (!rule.is_rule || defined_.at(size_t(rule.index)))
    throw std::logic_error("grammar::Builder::define: not a declared, undefined rule");
  rules_[size_t(rule.index)] = alternatives;
  defined_[size_t(rule.index)] = true;
}

std::shared_ptr<const Grammar> Builder::build(Expr root) {
  if (!root.is_rule) root = Expr{true, add_rule({{root}})};
  for (bool d : defined_)
    if (!d) throw std::logic_error("grammar::Builder::build: a declared rule was never defined");
  auto g = std::make_shared<Grammar>();
  g->classes_ = std::move(classes_);
  g->alts_.resize(rules_.size());
  for (size_t r = 0; r < rules_.size(); ++r)
    for (const auto& alt : rules_[r]) {
      g->alts_[r].push_back(int32_t(g->elems_.size()));
      for (const Expr& e : alt)
        g->elems_.push_back({e.is_rule ? Grammar::Kind::kRule : Grammar::Kind::kBytes, e.index});
      g->elems_.push_back({Grammar::Kind::kEnd, 0});
    }
  g->root_ = root.index;
  *this = Builder{};
  return g;
}

void Grammar::expand(std::vector<int32_t> stack, std::vector<std::vector<int32_t>>* out, int depth) const {
  for (;;) {
    if (stack.empty() || depth > kMaxExpandDepth) {
      if (stack.empty()) out->push_back(std::move(stack));
      return;
    }
    const int32_t p = stack.back();
    const Elem& e = elems_[size_t(p)];
    if (e.kind == Kind::kBytes) {
      out->push_back(std::move(stack));
      return;
    }
    stack.pop_back();
    if (e.kind == Kind::kEnd) continue;  // an empty alternative: go on with what follows
    if (elems_[size_t(p) + 1].kind != Kind::kEnd) stack.push_back(p + 1);  // else a tail call
    const auto& alts = alts_[size_t(e.index)];
    for (size_t i = 0; i + 1 < alts.size(); ++i) {
      std::vector<int32_t> s = stack;
      s.push_back(alts[i]);
      expand(std::move(s), out, depth + 1);
    }
    if (alts.empty()) return;
    stack.push_back(alts.back());
    ++depth;
  }
}

void Grammar::normalise(State* s) {
  std::sort(s->stacks.begin(), s->stacks.end());
  s->stacks.erase(std::unique(s->stacks.begin(), s->stacks.end()), s->stacks.end());
}

Grammar::State Grammar::start() const {
  State s;
  for (int32_t a : alts_[size_t(root_)]) expand({a}, &s.stacks, 0);
  normalise(&s);
  return s;
}

Grammar::State Grammar::advance(const State& s, uint8_t b) const {
  State out;
  for (const auto& st : s.stacks) {
    if (st.empty()) continue;
    const int32_t p = st.back();
    if (!classes_[size_t(elems_[size_t(p)].index)].test(b)) continue;
    std::vector<int32_t> next(st.begin(), st.end() - 1);
    if (elems_[size_t(p) + 1].kind != Kind::kEnd) next.push_back(p + 1);
    expand(std::move(next), &out.stacks, 0);
  }
  normalise(&out);
  return out;
}

Grammar::State Grammar::advance(const State& s, std::string_view text) const {
  State cur = s;
  for (char c : text) {
    cur = advance(cur, uint8_t(c));
    if (cur.dead()) break;
  }
  return cur;
}

bool Grammar::accept(State* s, std::string_view text) const {
  State next = advance(*s, text);
  if (next.dead()) return false;
  *s = std::move(next);
  return true;
}

bool Grammar::accepting(const State& s) {
  return std::any_of(s.stacks.begin(), s.stacks.end(), [](const auto& st) { return st.empty(); });
}

bool Grammar::can_continue(const State& s) const { return next_bytes(s).any(); }

ByteSet Grammar::next_bytes(const State& s) const {
  ByteSet out;
  for (const auto& st : s.stacks)
    if (!st.empty()) out |= classes_[size_t(elems_[size_t(st.back())].index)];
  return out;
}

bool Grammar::matches(std::string_view text) const {
  State s = start();
  return accept(&s, text) && accepting(s);
}

}  // namespace hypic::grammar
