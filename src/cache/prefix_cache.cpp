#include "cache/prefix_cache.h"

#include <algorithm>
#include <cstring>

namespace hypic {
namespace {

// Bytes of one position of a per-position tensor [capacity, ...].
size_t row_bytes(const Tensor& t) {
  return t.dim(0) == 0 ? 0 : t.nbytes() / size_t(t.dim(0));
}

}  // namespace

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
  HYPIC_CHECK(st->pos == 0 && st->capacity() >= path.back()->pos_end &&
                  st->layers.size() == path.back()->layers.size(),
              "restore needs a fresh state of this model with room for the matched prefix");
  int64_t pos = 0;
  for (Node* c : path) {
    c->last_used = ++tick_;
    for (size_t l = 0; l < c->layers.size(); ++l)
      for (size_t j = 0; j < c->layers[l].rows.size(); ++j) {
        const Tensor& src = c->layers[l].rows[j].t;
        const Tensor& dst = st->layers[l].rows[j].t;
        std::memcpy(static_cast<char*>(dst.raw()) + size_t(pos) * row_bytes(dst), src.raw(),
                    src.nbytes());
      }
    pos = c->pos_end;
  }
  const Node* last = path.back();
  for (size_t l = 0; l < last->layers.size(); ++l)
    for (size_t j = 0; j < last->layers[l].fixed.size(); ++j)
      std::memcpy(st->layers[l].fixed[j].t.raw(), last->layers[l].fixed[j].t.raw(),
                  last->layers[l].fixed[j].t.nbytes());
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
  for (const LayerState& l : st.layers) {
    LayerState part;
    for (const NamedTensor& r : l.rows) {
      Shape shape = r.t.shape();
      shape[0] = len;
      Tensor t = Tensor::zeros(r.t.dtype(), shape);
      std::memcpy(t.raw(), static_cast<const char*>(r.t.raw()) + size_t(pos0) * row_bytes(r.t),
                  t.nbytes());
      part.rows.push_back({r.name, std::move(t)});
    }
    for (const NamedTensor& f : l.fixed) part.fixed.push_back({f.name, f.t.clone()});
    node->bytes += part.bytes();
    node->layers.push_back(std::move(part));
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
