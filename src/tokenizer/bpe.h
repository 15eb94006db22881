// Byte-level BPE model: the GPT-2 byte <-> character mapping, the merge table and per-word
// merging with a cache. Internal to src/tokenizer.
//
// The model works on raw bytes: a vocab entry such as "Ġthe" is keyed by the bytes " the"
// it stands for, so encoding never builds the byte-level strings.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace hypic::bpe {

// GPT-2 bytes_to_unicode: the character that stands for each byte in vocab strings.
const std::array<uint32_t, 256>& byte_to_char();
// The byte a vocab character stands for, or -1 when it is not one of the 256.
int char_to_byte(uint32_t cp);
// Raw bytes of a byte-level vocab string; false when it holds other characters.
bool bytelevel_to_bytes(std::string_view token, std::string* bytes);
std::string bytes_to_bytelevel(std::string_view bytes);

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using StringMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// Open-addressing map (left id, right id) -> (rank, merged id).
class MergeTable {
 public:
  struct Entry {
    uint64_t key;
    int32_t rank, id;
  };
  void reserve(size_t n);
  // Later inserts of the same pair overwrite earlier ones (as HF's HashMap collect does).
  void insert(int32_t a, int32_t b, int32_t rank, int32_t id);
  const Entry* find(int32_t a, int32_t b) const {
    if (slots_.empty()) return nullptr;
    uint64_t key = pack(a, b);
    for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      const Entry& e = slots_[i];
      if (e.key == key) return &e;
      if (e.key == kEmpty) return nullptr;
    }
  }
  size_t size() const { return size_; }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  static uint64_t pack(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  static size_t hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDull;
    return size_t(k ^ (k >> 33));
  }
  void rehash(size_t cap);
  std::vector<Entry> slots_;
  size_t mask_ = 0, size_ = 0;
};

// Cache of word -> ids for short words: a direct-mapped table (a new word evicts the one in
// its slot), split into shards with one mutex each. Entries are stored inline, so neither a
// hit nor a miss allocates. Safe for concurrent use.
class WordCache {
 public:
  static constexpr size_t kMaxWordBytes = 46;  // longer words are not cached
  static constexpr size_t kMaxIds = 10;        // nor words of more tokens

  WordCache();
  bool lookup(std::string_view word, size_t hash, std::vector<int32_t>& out) const;
  void insert(std::string_view word, size_t hash, const int32_t* ids, size_t n) const;
  void clear() const;

 private:
  static constexpr size_t kShards = 16;
  static constexpr size_t kSlotsPerShard = 2048;
  struct Slot {
    uint32_t tag = 0;  // upper hash bits; 0 = empty
    uint8_t key_len = 0, n_ids = 0;
    char key[kMaxWordBytes];
    int32_t ids[kMaxIds];
  };
  struct Shard {
    mutable std::mutex mu;
    std::unique_ptr<Slot[]> slots;
  };
  std::array<Shard, kShards> shards_;
};

struct Model {
  StringMap bytes_to_id;                 // raw bytes of every byte-level vocab entry
  std::array<int32_t, 256> byte_id{};    // id of each single byte, -1 when absent
  MergeTable merges;
  bool ignore_merges = false;
  // tiktoken's rule instead of a merge list: repeatedly merge the adjacent pair whose
  // concatenation is a token of lowest rank (leftmost on ties); the rank is the token's id.
  // Used with ignore_merges (a word that is a token is that token, as tiktoken does).
  bool rank_merges = false;
  int32_t unk_id = -1;                   // -1: none (bytes without a token are dropped)
  bool fuse_unk = false;
  WordCache cache;

  // Appends the ids of one pre-token given as raw bytes.
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

 private:
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  void merge_word_by_rank(std::string_view word, std::vector<int32_t>& out) const;
};

}  // namespace hypic::bpe
