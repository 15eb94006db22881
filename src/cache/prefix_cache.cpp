#include "cache/prefix_cache.h"

#include <algorithm>
#include <cstring>

namespace hypic {

PrefixCache::Node* PrefixCache::find_child(Node* n, const std::vector<int32_t>& part) {
  auto it = n->children.find(part);
  return it == n->children.end() ? nullptr : it->second.get();
}

int PrefixCache::restore(const std::string& ns, const std::vector<const std::vector<int32_t>*>& parts,
                         SeqState* st) {
  std::lock_guard<std::mutex> lk(mu_);
  Node* n = &roots_[ns];
  std::vector<Node*> path;
  for (const auto* p : parts) {
    Node* c = find_child(n, *p);
    if (!c) break;
    path.push_back(c);
    n = c;
  }
  if (path.empty()) {
    ++stats_.misses;
    return 0;
  }
  ++stats_.hits;
  HYPIC_CHECK(st->pos == 0 && (st->kv.empty() || st->kv[0].k.dim(0) >= path.back()->pos_end),
              "restore needs a fresh state with KV room for the matched prefix");
  int64_t pos = 0;
  for (Node* c : path) {
    c->last_used = ++tick_;
    for (size_t a = 0; a < c->kv.size(); ++a) {
      const KvCache& src = c->kv[a];
      KvCache& dst = st->kv[a];
      const size_t row = size_t(src.k.numel() / std::max<int64_t>(1, src.k.dim(0))) * sizeof(float);
      std::memcpy(static_cast<char*>(dst.k.raw()) + size_t(pos) * row, src.k.raw(), src.k.nbytes());
      std::memcpy(static_cast<char*>(dst.v.raw()) + size_t(pos) * row, src.v.raw(), src.v.nbytes());
    }
    pos = c->pos_end;
  }
  const Node* last = path.back();
  for (size_t l = 0; l < last->linear.size(); ++l) {
    std::memcpy(st->linear[l].conv.raw(), last->linear[l].conv.raw(), last->linear[l].conv.nbytes());
    std::memcpy(st->linear[l].ssm.raw(), last->linear[l].ssm.raw(), last->linear[l].ssm.nbytes());
  }
  st->pos = last->pos_end;
  return int(path.size());
}

void PrefixCache::insert(const std::string& ns, const std::vector<const std::vector<int32_t>*>& parts,
                         int i, const SeqState& st, int64_t pos0) {
  std::lock_guard<std::mutex> lk(mu_);
  Node* n = &roots_[ns];
  for (int j = 0; j < i; ++j) {
    n = find_child(n, *parts[size_t(j)]);
    if (!n) return;  // the path was evicted meanwhile: nothing to attach to
  }
  if (find_child(n, *parts[size_t(i)])) return;
  auto node = std::make_unique<Node>();
  node->parent = n;
  node->part = *parts[size_t(i)];
  node->pos_end = st.pos;
  const int64_t len = st.pos - pos0;
  for (const KvCache& c : st.kv) {
    const int64_t nkv = c.k.dim(1), hd = c.k.dim(2);
    KvCache s{Tensor::zeros_f32({len, nkv, hd}), Tensor::zeros_f32({len, nkv, hd})};
    std::memcpy(s.k.raw(), c.k.f32() + pos0 * nkv * hd, s.k.nbytes());
    std::memcpy(s.v.raw(), c.v.f32() + pos0 * nkv * hd, s.v.nbytes());
    node->bytes += s.k.nbytes() + s.v.nbytes();
    node->kv.push_back(std::move(s));
  }
  for (const LinearState& l : st.linear) {
    node->linear.push_back({l.conv.clone(), l.ssm.clone()});
    node->bytes += l.conv.nbytes() + l.ssm.nbytes();
  }
  if (node->bytes > budget_) return;
  evict_until(node->bytes, n);
  if (stats_.bytes + node->bytes > budget_) return;  // ancestors pinned by the path: skip
  node->last_used = ++tick_;
  stats_.bytes += node->bytes;
  ++stats_.nodes;
  n->children.emplace(node->part, std::move(node));
}

void PrefixCache::evict_until(size_t need, const Node* keep) {
  std::vector<const Node*> path;
  for (const Node* x = keep; x; x = x->parent) path.push_back(x);
  while (stats_.bytes + need > budget_) {
    // Least recently used leaf (a leaf's ancestors are needed by nothing else only once it
    // is gone, so leaves go first).
    Node* victim = nullptr;
    std::vector<Node*> stack;
    for (auto& [ns, root] : roots_) stack.push_back(&root);
    while (!stack.empty()) {
      Node* x = stack.back();
      stack.pop_back();
      for (auto& [k, c] : x->children) {
        if (c->children.empty()) {
          const bool kept = std::find(path.begin(), path.end(), c.get()) != path.end();
          if (!kept && (!victim || c->last_used < victim->last_used)) victim = c.get();
        } else {
          stack.push_back(c.get());
        }
      }
    }
    if (!victim) return;
    stats_.bytes -= victim->bytes;
    --stats_.nodes;
    ++stats_.evictions;
    victim->parent->children.erase(victim->part);
  }
}

PrefixCache::Stats PrefixCache::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

}  // namespace hypic
