#include "tokenizer/bpe.h"

#include <algorithm>
#include <cstring>

#include "tokenizer/unicode.h"

namespace hypic::bpe {
namespace {

struct ByteTables {
  std::array<uint32_t, 256> to_char{};
  std::array<int16_t, 512> to_byte{};  // every byte-level character is below U+0200

  ByteTables() {
    to_byte.fill(-1);
    uint32_t n = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      to_char[b] = printable ? b : 256 + n++;
      to_byte[to_char[b]] = int16_t(b);
    }
  }
};

const ByteTables& byte_tables() {
  static const ByteTables t;
  return t;
}

}  // namespace

const std::array<uint32_t, 256>& byte_to_char() { return byte_tables().to_char; }

int char_to_byte(uint32_t cp) { return cp < 512 ? byte_tables().to_byte[cp] : -1; }

bool bytelevel_to_bytes(std::string_view token, std::string* bytes) {
  bytes->clear();
  if (unicode::valid_utf8_prefix(token) != token.size()) return false;
  for (size_t i = 0; i < token.size();) {
    int len;
    uint32_t cp = unicode::decode_valid(token.data(), i, &len);
    int b = char_to_byte(cp);
    if (b < 0) return false;
    bytes->push_back(char(b));
    i += size_t(len);
  }
  return true;
}

std::string bytes_to_bytelevel(std::string_view bytes) {
  std::string out;
  for (unsigned char b : bytes) unicode::append_utf8(byte_to_char()[b], out);
  return out;
}

// ---- MergeTable ----

void MergeTable::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  if (cap > slots_.size()) rehash(cap);
}

void MergeTable::rehash(size_t cap) {
  std::vector<Entry> old = std::move(slots_);
  slots_.assign(cap, Entry{kEmpty, 0, 0});
  mask_ = cap - 1;
  size_ = 0;
  for (const Entry& e : old)
    if (e.key != kEmpty) insert(int32_t(e.key >> 32), int32_t(uint32_t(e.key)), e.rank, e.id);
}

void MergeTable::insert(int32_t a, int32_t b, int32_t rank, int32_t id) {
  if ((size_ + 1) * 2 > slots_.size()) rehash(std::max<size_t>(16, slots_.size() * 2));
  uint64_t key = pack(a, b);
  for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
    Entry& e = slots_[i];
    if (e.key == key) {
      e.rank = rank;
      e.id = id;
      return;
    }
    if (e.key == kEmpty) {
      e = Entry{key, rank, id};
      ++size_;
      return;
    }
  }
}

// ---- WordCache ----

WordCache::WordCache() {
  for (Shard& s : shards_) s.slots = std::make_unique<Slot[]>(kSlotsPerShard);
}

namespace {
// Tag 0 marks an empty slot, so a real tag is never 0.
inline uint32_t cache_tag(size_t hash) { return uint32_t(hash >> 32) | 1u; }
}  // namespace

bool WordCache::lookup(std::string_view word, size_t hash, std::vector<int32_t>& out) const {
  const Shard& s = shards_[hash % kShards];
  std::lock_guard<std::mutex> lock(s.mu);
  const Slot& slot = s.slots[(hash / kShards) % kSlotsPerShard];
  if (slot.tag != cache_tag(hash) || slot.key_len != word.size() ||
      std::memcmp(slot.key, word.data(), word.size()) != 0)
    return false;
  out.insert(out.end(), slot.ids, slot.ids + slot.n_ids);
  return true;
}

void WordCache::insert(std::string_view word, size_t hash, const int32_t* ids, size_t n) const {
  if (word.size() > kMaxWordBytes || n > kMaxIds) return;
  const Shard& s = shards_[hash % kShards];
  std::lock_guard<std::mutex> lock(s.mu);
  Slot& slot = s.slots[(hash / kShards) % kSlotsPerShard];
  slot.tag = cache_tag(hash);
  slot.key_len = uint8_t(word.size());
  slot.n_ids = uint8_t(n);
  std::memcpy(slot.key, word.data(), word.size());
  std::memcpy(slot.ids, ids, n * sizeof(int32_t));
}

void WordCache::clear() const {
  for (const Shard& s : shards_) {
    std::lock_guard<std::mutex> lock(s.mu);
    for (size_t i = 0; i < kSlotsPerShard; ++i) s.slots[i].tag = 0;
  }
}

// ---- Model ----

void Model::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (word.size() == 1) {
    int32_t id = byte_id[static_cast<unsigned char>(word[0])];
    if (id >= 0) out.push_back(id);
    else if (unk_id >= 0) out.push_back(unk_id);
    return;
  }
  if (ignore_merges) {
    auto it = bytes_to_id.find(word);
    if (it != bytes_to_id.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() <= WordCache::kMaxWordBytes;
  const size_t hash = cacheable ? std::hash<std::string_view>{}(word) : 0;
  if (cacheable && cache.lookup(word, hash, out)) return;
  size_t before = out.size();
  if (rank_merges) merge_word_by_rank(word, out);
  else merge_word(word, out);
  if (cacheable) cache.insert(word, hash, out.data() + before, out.size() - before);
}

// HF BPE Word::merge_all: repeatedly apply the pair of lowest rank, leftmost first, using a
// heap of candidate pairs over a linked list of symbols (stale entries are skipped).
void Model::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  struct Sym {
    int32_t id, prev, next;
    bool alive;
  };
  struct Cand {
    int32_t rank, pos, id;
  };
  thread_local std::vector<Sym> syms;
  thread_local std::vector<Cand> heap;
  syms.clear();
  heap.clear();

  bool pending_unk = false;
  auto push_sym = [&](int32_t id) {
    int32_t i = int32_t(syms.size());
    syms.push_back(Sym{id, i - 1, -1, true});
    if (i > 0) syms[size_t(i - 1)].next = i;
  };
  for (unsigned char b : word) {
    int32_t id = byte_id[b];
    if (id >= 0) {
      if (pending_unk) push_sym(unk_id);
      pending_unk = false;
      push_sym(id);
    } else if (unk_id >= 0) {
      if (pending_unk && !fuse_unk) push_sym(unk_id);
      pending_unk = true;
    }
  }
  if (pending_unk) push_sym(unk_id);
  if (syms.empty()) return;

  auto lower_priority = [](const Cand& a, const Cand& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  auto push_cand = [&](int32_t pos) {
    const Sym& s = syms[size_t(pos)];
    const MergeTable::Entry* e = merges.find(s.id, syms[size_t(s.next)].id);
    if (!e) return;
    heap.push_back(Cand{e->rank, pos, e->id});
    std::push_heap(heap.begin(), heap.end(), lower_priority);
  };
  for (int32_t i = 0; i + 1 < int32_t(syms.size()); ++i) push_cand(i);

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), lower_priority);
    Cand top = heap.back();
    heap.pop_back();
    Sym& s = syms[size_t(top.pos)];
    if (!s.alive || s.next < 0) continue;
    Sym& right = syms[size_t(s.next)];
    const MergeTable::Entry* e = merges.find(s.id, right.id);
    if (!e || e->id != top.id) continue;  // expired candidate
    s.id = top.id;
    right.alive = false;
    s.next = right.next;
    if (s.next >= 0) syms[size_t(s.next)].prev = top.pos;
    if (s.prev >= 0) push_cand(s.prev);
    if (s.next >= 0) push_cand(top.pos);
  }
  for (int32_t i = 0; i >= 0; i = syms[size_t(i)].next) out.push_back(syms[size_t(i)].id);
  if (syms.capacity() > (1u << 16)) {  // do not keep a huge word's buffers per thread
    syms = {};
    heap = {};
  }
}

// tiktoken's byte_pair_merge (openai/tiktoken src/lib.rs): parts start as single bytes; while
// some adjacent pair's concatenation is a token, merge the pair whose token has the lowest
// rank, the leftmost one on ties. Same result as tiktoken's linear rescans, with a heap of
// candidates (rank, start byte) over a linked list of parts; a popped candidate is stale when
// either part has changed since it was pushed (their joint length tells).
void Model::merge_word_by_rank(std::string_view word, std::vector<int32_t>& out) const {
  struct Part {
    uint32_t start, len;
    int32_t id, next;
    bool alive;
  };
  struct Cand {
    int32_t rank, pos;
    uint32_t len;  // bytes of the merged token
  };
  thread_local std::vector<Part> parts;
  thread_local std::vector<Cand> heap;
  thread_local std::vector<int32_t> prev;  // part before each part, -1 for the first
  parts.clear();
  heap.clear();
  prev.clear();
  for (size_t i = 0; i < word.size(); ++i) {
    // Every byte has a rank (the loader checks), so a part always has an id.
    parts.push_back(Part{uint32_t(i), 1, byte_id[static_cast<unsigned char>(word[i])],
                         i + 1 < word.size() ? int32_t(i + 1) : -1, true});
  }
  auto lower_priority = [](const Cand& a, const Cand& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  auto push_cand = [&](int32_t pos) {
    const Part& p = parts[size_t(pos)];
    const Part& q = parts[size_t(p.next)];
    auto it = bytes_to_id.find(word.substr(p.start, p.len + q.len));
    if (it == bytes_to_id.end()) return;
    heap.push_back(Cand{it->second, pos, p.len + q.len});
    std::push_heap(heap.begin(), heap.end(), lower_priority);
  };
  for (int32_t i = 0; i + 1 < int32_t(parts.size()); ++i) push_cand(i);
  for (size_t i = 0; i < parts.size(); ++i) prev.push_back(int32_t(i) - 1);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), lower_priority);
    const Cand top = heap.back();
    heap.pop_back();
    Part& p = parts[size_t(top.pos)];
    if (!p.alive || p.next < 0) continue;
    Part& q = parts[size_t(p.next)];
    if (p.len + q.len != top.len) continue;  // a part grew since: stale
    p.id = top.rank;
    p.len = top.len;
    q.alive = false;
    p.next = q.next;
    if (p.next >= 0) prev[size_t(p.next)] = top.pos;
    if (prev[size_t(top.pos)] >= 0) push_cand(prev[size_t(top.pos)]);
    if (p.next >= 0) push_cand(top.pos);
  }
  for (int32_t i = 0; i >= 0; i = parts[size_t(i)].next) out.push_back(parts[size_t(i)].id);
  if (parts.capacity() > (1u << 16)) {
    parts = {};
    heap = {};
    prev = {};
  }
}

}  // namespace hypic::bpe
