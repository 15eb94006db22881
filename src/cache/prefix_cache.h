// Prefix caching for hybrid models, the baseline hypic is measured against (what SGLang's
// MambaRadixCache and vLLM's hybrid prefix caching do): a radix tree whose edges are prompt
// parts (token sequences). A node holds, per layer, the per-position rows of its part's tokens
// (K/V of attention layers) and a checkpoint of the fixed-size tensors at the part's end (the
// recurrent state of linear layers), so a request can resume after its longest cached prefix
// of whole parts. Recurrent states exist only at checkpoints, which is why a reordered or
// partially shared prompt misses. Generic over the mixers (model/state.h).
//
// Namespaces (the tenant's cache_salt) partition the tree: a prefix cached under one is never
// restored under another.
//
// Thread-safe: every method takes the one internal lock. Memory: exact byte accounting of
// node tensors; least-recently-used leaves are evicted to stay within the budget.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "model/state.h"

namespace hypic {

class PrefixCache {
 public:
  struct Stats {
    size_t bytes = 0, nodes = 0;
    uint64_t hits = 0, misses = 0, evictions = 0;
  };

  explicit PrefixCache(size_t budget_bytes) : budget_(budget_bytes) {}

  // Restores into `st` (fresh, KV capacity for the whole prompt: Model::reserve) the state after the longest
  // cached run of leading parts; returns how many parts that covers (0: nothing cached).
  int restore(const std::string& ns, const std::vector<const std::vector<int32_t>*>& parts,
              SeqState* st);

  // Records the state after parts[0..i], given that parts[0..i−1] are already in the tree
  // (restore() matched them or earlier insert() calls added them). `st` holds the rows of all
  // tokens so far and the fixed tensors after part i, which started at position `pos0`.
  void insert(const std::string& ns, const std::vector<const std::vector<int32_t>*>& parts, int i,
              const SeqState& st, int64_t pos0);

  Stats stats() const;
  size_t budget() const { return budget_; }

 private:
  struct Node {
    // Per layer: rows [n, ...] of this part's n tokens, fixed tensors after this part.
    std::vector<LayerState> layers;
    int64_t pos_end = 0;
    size_t bytes = 0;
    uint64_t last_used = 0;
    Node* parent = nullptr;
    std::vector<int32_t> part;
    std::map<std::vector<int32_t>, std::unique_ptr<Node>> children;
  };
  Node* find_child(Node* n, const std::vector<int32_t>& part);
  // Evicts LRU leaves until `need` more bytes fit; never a node on `keep`'s root path.
  void evict_until(size_t need, const Node* keep);

  mutable std::mutex mu_;
  size_t budget_;
  std::map<std::string, Node> roots_;  // one tree per namespace
  uint64_t tick_ = 0;
  Stats stats_;
};

}  // namespace hypic
