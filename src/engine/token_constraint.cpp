#include "engine/token_constraint.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <numeric>
#include <string>

namespace hypic {

std::shared_ptr<const VocabTrie> VocabTrie::of(const Tokenizer& tok) {
  static std::mutex mu;
  static std::map<const void*, std::shared_ptr<const VocabTrie>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& t = cache[tok.identity()];
  if (!t) t = std::make_shared<const VocabTrie>(tok);
  return t;
}

VocabTrie::VocabTrie(const Tokenizer& tok) : tok_(tok) {
  std::vector<std::pair<std::string_view, int32_t>> toks;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    if (!tok.is_known(id) || tok.is_special(id)) continue;
    const std::string_view b = tok.token_bytes(id);
    if (!b.empty()) toks.emplace_back(b, id);
  }
  std::sort(toks.begin(), toks.end());
  // Node `n` holds the tokens toks[lo, hi) that share its prefix of length `depth`. A node's
  // edges are contiguous: its children are all created before any grandchild.
  nodes_.push_back({});
  struct Todo {
    int32_t node;
    size_t lo, hi, depth;
  };
  std::vector<Todo> todo{{0, 0, toks.size(), 0}};
  while (!todo.empty()) {
    const Todo t = todo.back();
    todo.pop_back();
    size_t i = t.lo;
    nodes_[size_t(t.node)].first_token = int32_t(tokens_.size());
    for (; i < t.hi && toks[i].first.size() == t.depth; ++i) tokens_.push_back(toks[i].second);
    nodes_[size_t(t.node)].tokens = int32_t(tokens_.size()) - nodes_[size_t(t.node)].first_token;
    nodes_[size_t(t.node)].first_edge = int32_t(edge_byte_.size());
    while (i < t.hi) {
      const uint8_t b = uint8_t(toks[i].first[t.depth]);
      size_t j = i;
      while (j < t.hi && uint8_t(toks[j].first[t.depth]) == b) ++j;
      const int32_t child = int32_t(nodes_.size());
      nodes_.push_back({});
      edge_byte_.push_back(b);
      edge_to_.push_back(child);
      todo.push_back({child, i, j, t.depth + 1});
      i = j;
    }
    nodes_[size_t(t.node)].edges = int32_t(edge_byte_.size()) - nodes_[size_t(t.node)].first_edge;
  }
}

TokenConstraint::TokenConstraint(std::shared_ptr<const grammar::Grammar> g, const Tokenizer& tok,
                                 std::vector<int32_t> eos, std::string trigger, std::string gate)
    : g_(std::move(g)), tok_(tok), trie_(VocabTrie::of(tok)), eos_(std::move(eos)), trigger_(std::move(trigger)),
      gate_(trigger_.empty() ? "" : std::move(gate)), active_(trigger_.empty()) {
  cur_ = intern(g_->start());
}

int32_t TokenConstraint::intern(grammar::Grammar::State s) {
  std::string key;
  for (const auto& st : s.stacks) {
    key.append(reinterpret_cast<const char*>(st.data()), st.size() * sizeof(int32_t));
    key.append(4, '\xff');  // no position is -1: a stack separator
  }
  if (auto it = ids_.find(key); it != ids_.end()) return it->second;
  DfaState d;
  d.next = g_->next_bytes(s);
  d.accepting = grammar::Grammar::accepting(s);
  d.to.assign(256, kUnknown);
  d.state = std::move(s);
  dfa_.push_back(std::move(d));
  const int32_t id = int32_t(dfa_.size() - 1);
  ids_.emplace(std::move(key), id);
  return id;
}

int32_t TokenConstraint::step(int32_t sid, uint8_t b) {
  int32_t to = dfa_[size_t(sid)].to[b];
  if (to != kUnknown) return to;
  to = dfa_[size_t(sid)].next.test(b) ? intern(g_->advance(dfa_[size_t(sid)].state, b)) : kDead;
  dfa_[size_t(sid)].to[b] = to;
  return to;
}

void TokenConstraint::bound_cache() {
  if (dfa_.size() <= kMaxStates) return;
  grammar::Grammar::State keep = std::move(dfa_[size_t(cur_)].state);
  dfa_.clear();
  ids_.clear();
  cur_ = intern(std::move(keep));
}

int32_t TokenConstraint::run(int32_t sid, std::string_view bytes) {
  for (char c : bytes) {
    sid = step(sid, uint8_t(c));
    if (sid < 0) return kDead;
  }
  return sid;
}

bool TokenConstraint::is_eos(int32_t id) const { return std::find(eos_.begin(), eos_.end(), id) != eos_.end(); }

bool TokenConstraint::allows(int32_t id) {
  bound_cache();
  if (id < 0 || id >= tok_.vocab_size()) return false;
  if (!active_) return true;
  if (is_eos(id)) return complete();
  if (tok_.is_special(id)) return false;
  const std::string_view b = tok_.token_bytes(id);
  return !b.empty() && run(cur_, b) >= 0;
}

void TokenConstraint::accept(int32_t id) {
  if (is_eos(id)) return;
  bound_cache();
  const std::string_view bytes = tok_.token_bytes(id);
  if (!active_) {  // free text: look for the gate, then the trigger, across token boundaries
    tail_ += bytes;
    if (!gate_.empty()) {
      const size_t g = tail_.find(gate_);
      if (g == std::string::npos) {
        if (tail_.size() >= gate_.size()) tail_.erase(0, tail_.size() - gate_.size() + 1);
        return;
      }
      tail_.erase(0, g + gate_.size());
      gate_.clear();
    }
    const size_t at = tail_.find(trigger_);
    if (at == std::string::npos) {
      if (tail_.size() >= trigger_.size()) tail_.erase(0, tail_.size() - trigger_.size() + 1);
      return;
    }
    const std::string rest = tail_.substr(at + trigger_.size());
    tail_.clear();
    const int32_t start = intern(g_->start());
    const int32_t next = run(start, rest);
    if (next < 0) return;  // this call already went astray: it stays free (and comes back as text)
    active_ = true;
    cur_ = next;
  } else {
    const int32_t next = run(cur_, bytes);
    HYPIC_CHECK(next >= 0, "TokenConstraint::accept: token " + std::to_string(id) + " is not allowed here");
    cur_ = next;
  }
  if (!trigger_.empty() && dfa_[size_t(cur_)].accepting && dfa_[size_t(cur_)].next.none()) active_ = false;  // call done
}

int32_t TokenConstraint::best_eos(const float* logits) const {
  int32_t best = -1;
  for (int32_t e : eos_)
    if (e >= 0 && e < tok_.vocab_size() && (best < 0 || logits[e] > logits[best])) best = e;
  return best;
}

void TokenConstraint::walk(int32_t node, int32_t sid, std::vector<uint8_t>* allowed) {
  const VocabTrie::Node& n = trie_->nodes()[size_t(node)];
  if (node != 0)
    for (int32_t i = 0; i < n.tokens; ++i) (*allowed)[size_t(trie_->token(n.first_token + i))] = 1;
  for (int32_t e = n.first_edge; e < n.first_edge + n.edges; ++e) {
    const uint8_t b = trie_->edge_byte(e);
    if (!dfa_[size_t(sid)].next.test(b)) continue;
    const int32_t to = step(sid, b);
    if (to >= 0) walk(trie_->edge_to(e), to, allowed);
  }
}

void TokenConstraint::allowed_mask(std::vector<uint8_t>* allowed, int64_t V) {
  bound_cache();
  if (!active_) {  // free text
    allowed->assign(size_t(V), 1);
    return;
  }
  allowed->assign(size_t(V), 0);
  walk(0, cur_, allowed);
  if (complete())
    for (int32_t e : eos_)
      if (e >= 0 && e < V) (*allowed)[size_t(e)] = 1;
}

int32_t TokenConstraint::masked_sample(Sampler& sampler, const float* logits, int64_t V) {
  ++full_masks_;
  allowed_mask(&allowed_, V);
  masked_.assign(logits, logits + V);
  bool any = false;
  for (int64_t i = 0; i < V; ++i) {
    if (!allowed_[size_t(i)]) masked_[size_t(i)] = -INFINITY;
    else any = true;
  }
  if (!any) return -1;
  const int32_t id = sampler.sample(masked_.data(), V);
  // Rounding at the end of a cumulative sum could land on a masked id: fall back to the best.
  return allowed_[size_t(id)] ? id : argmax(masked_.data(), V);
}

int32_t TokenConstraint::sample(Sampler& sampler, const SamplingParams& p, const float* logits, int64_t V) {
  if (!active_) return sampler.sample(logits, V);
  if (finished()) return best_eos(logits);
  if (p.temperature <= 0.0f) {
    const int32_t a = argmax(logits, V);
    if (allows(a)) return a;
    const size_t k = size_t(std::min<int64_t>(kRankedTries, V));
    order_.resize(size_t(V));
    std::iota(order_.begin(), order_.end(), 0);
    const auto better = [&](int32_t x, int32_t y) { return logits[x] > logits[y] || (logits[x] == logits[y] && x < y); };
    std::partial_sort(order_.begin(), order_.begin() + std::ptrdiff_t(k), order_.end(), better);
    for (size_t i = 1; i < k; ++i)
      if (allows(order_[i])) return order_[i];
  } else if (p.top_k <= 0 && p.top_p >= 1.0f) {
    return temperature_sample(sampler, p, logits, V);
  }
  return masked_sample(sampler, logits, V);
}

int32_t TokenConstraint::temperature_sample(Sampler& sampler, const SamplingParams& p, const float* logits, int64_t V) {
  // One pass of exp into a cumulative sum: each rejection draw is then a binary search, and
  // the masked draw after them reuses the weights.
  const float mx = logits[argmax(logits, V)];
  const double T = p.temperature;
  cdf_.resize(size_t(V));
  double total = 0;
  for (int64_t i = 0; i < V; ++i) cdf_[size_t(i)] = (total += std::exp((double(logits[i]) - mx) / T));
  for (int i = 0; i < kRejectionTries; ++i) {
    const double u = sampler.uniform() * total;
    const int32_t id = int32_t(std::min<int64_t>(V - 1, std::upper_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin()));
    if (allows(id)) return id;
  }
  ++full_masks_;
  allowed_mask(&allowed_, V);
  double kept = 0;
  for (int64_t i = 0; i < V; ++i)
    if (allowed_[size_t(i)]) kept += cdf_[size_t(i)] - (i ? cdf_[size_t(i) - 1] : 0.0);
  if (kept <= 0) return -1;
  double u = sampler.uniform() * kept;
  int32_t last = -1;
  for (int64_t i = 0; i < V; ++i) {
    if (!allowed_[size_t(i)]) continue;
    last = int32_t(i);
    if ((u -= cdf_[size_t(i)] - (i ? cdf_[size_t(i) - 1] : 0.0)) <= 0) return last;
  }
  return last;
}

}  // namespace hypic
