// SegmentStore internals (cache-internal): the state both tiers share, under one mutex.
// Memory tier and operations: segment_store.cpp; disk tier: segment_store_disk.cpp.
#pragma once

#include "cache/segment_store.h"

#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>
#include "core/log.h"
#include "core/hash.h"

namespace hypic {
namespace store_detail {

namespace fs = std::filesystem;

constexpr const char* kSuffix = ".seg.safetensors";
constexpr int kMaxAdmitRounds = 64;
constexpr double kDefaultSecondsPerByte = 1e-9;  // 1 s per GB, before any cost is known

inline bool is_hex64(const std::string& s) {
  return s.size() == 64 &&
         std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

inline std::string stem_of(const std::string& key) { return is_hex64(key) ? key : Sha256::hex(key); }

// Upper bound of save_entry()'s file size: tensor data plus its header (fixed fields, the
// key (JSON-escaped: up to 6 bytes a character), base64 token ids, ~160 bytes per layer
// description and ~160 per tensor entry (its name twice: header and layer list), rounded up).
inline size_t file_size_bound(const SegmentEntry& e) {
  size_t n_tensors = 0;
  for (const SegmentEntry::Layer& l : e.layers) n_tensors += bool(l.T) + l.tensors.size();
  return e.bytes() + 512 + 6 * e.key.size() + 6 * e.tokens.size() + 160 * e.layers.size() +
         256 * n_tensors;
}

}  // namespace store_detail

struct SegmentStore::Impl : std::enable_shared_from_this<SegmentStore::Impl> {
  using Data = std::shared_ptr<const SegmentEntry>;
  // Entries whose last reference is dropped after the lock is released (freeing 100 MB
  // is not free).
  using Trash = std::vector<Data>;
  struct MemEntry {
    Data data;
    size_t bytes = 0;
    double cost = 0;  // seconds to recompute
    uint64_t freq = 1;
    double h = 0;       // GDSF priority
    uint64_t tick = 0;  // last use
    uint64_t id = 0;    // unique per admission
    bool pinned = false;
    uint64_t pin_gen = 0;        // identifies the live pin handle
    std::weak_ptr<const SegmentEntry> handle;
    bool spilling = false;       // being written to disk before leaving memory
  };
  struct DiskEntry {
    size_t bytes = 0;  // file size; a reserved upper bound while writing
    uint64_t tick = 0;
    uint64_t version = 0;  // unique per file written / indexed
    double cost = -1;      // unknown
    uint64_t freq = 0;
    bool writing = false;
    bool doomed = false;   // erased while being written: delete when the write ends
  };
  struct Inflight {
    bool done = false, cancelled = false;
    Pin result;
  };
  // The deleter of a pin handle: unpins when the last copy of the Pin goes.
  struct PinRelease {
    std::weak_ptr<Impl> store;
    std::string key;
    uint64_t gen;
    Data keep;
    void operator()(const SegmentEntry*) {
      if (auto s = store.lock()) s->unpin(key, gen);
      keep.reset();
    }
  };
  enum class Reserve { kReserved, kPresent, kNoRoom };
  Options opt;
  bool disk_on = false;
  mutable std::mutex mu;
  std::condition_variable cv;
  std::unordered_map<std::string, MemEntry> mem;
  std::set<std::tuple<double, uint64_t, std::string>> prio;  // resident, not spilling
  std::unordered_map<std::string, DiskEntry> disk;           // by file stem
  std::set<std::pair<uint64_t, std::string>> disk_lru;       // complete files
  std::unordered_map<std::string, std::shared_ptr<Inflight>> loading;
  double clock = 0;
  uint64_t tick = 0, gen = 0;
  size_t spilling_count = 0;  // spill writes in flight (their entries may have been erased)
  size_t writing_count = 0, writing_bytes = 0;
  double cost_seconds_seen = 0, cost_bytes_seen = 0;
  Stats st;
  std::string path_of_stem(const std::string& stem) const;

  // ---- invariants ----------------------------------------------------------------------

  void check_locked() const;
  void recount_locked() const;

  // ---- memory tier ---------------------------------------------------------------------

  double priority(const MemEntry& e) const;
  void touch_locked(const std::string& key, MemEntry& e);

  // A Pin of a resident entry; pins it if it was not.
  Pin pin_locked(const std::string& key, MemEntry& e);
  void unpin(const std::string& key, uint64_t pin_gen);
  void remove_mem_locked(std::unordered_map<std::string, MemEntry>::iterator it, Trash& trash);
  double estimate_cost(size_t bytes) const;

  // Admits `data` to memory, evicting (and spilling) unpinned entries as needed; may release
  // the lock while writing files. Returns a tracked Pin, or an untracked one if it could not
  // be admitted (written to disk directly then).
  Pin admit(std::unique_lock<std::mutex>& lk, const std::string& key, Data data, size_t bytes,
            double cost, uint64_t freq, Trash& trash);

  // ---- disk tier -----------------------------------------------------------------------

  // Writes the file (lock not held); on a full disk, sheds files (shed()) and tries once more.
  void write_file(const std::string& stem, const SegmentEntry& e, Status* s, size_t* size);
  // The disk is full: deletes least recently used complete files until `want` bytes are freed
  // or none is left (takes the lock); bytes freed.
  size_t shed(size_t want);
  void unlink_locked(const std::string& stem);

  // Drops a complete file from the index and deletes it.
  void drop_file_locked(std::unordered_map<std::string, DiskEntry>::iterator it);

  // Deletes least recently used files until `extra` more bytes fit; false if they cannot.
  bool make_disk_room_locked(size_t extra);
  Reserve reserve_disk_locked(const std::string& stem, size_t bound, double cost, uint64_t freq);
  void finish_write_locked(const std::string& stem, uint64_t version, bool ok, size_t size);
  void touch_file_locked(const std::string& stem, DiskEntry& d);
  Status scan_dir();
  // Writes a resident entry's file under the lock's protocol (reserve, write unlocked,
  // finish); kPresent: it had one.
  Reserve write_resident(std::unique_lock<std::mutex>& lk, const std::string& key, Data* keep,
                         Status* s, size_t* size);

  // ---- operations ----------------------------------------------------------------------

  Pin lookup(const std::string& key);
  // The shared tier's part of a lookup (memory and disk missed): `lk` is released while it
  // asks; concurrent lookups of `key` wait for this one.
  Pin lookup_remote(std::unique_lock<std::mutex>& lk, const std::string& key, Trash& trash);
  // Under the lock: the load of `key` tracked by `fl` ended with `out`; its waiters wake.
  void finish_load(const std::string& key, const std::shared_ptr<Inflight>& fl, const Pin& out);
  Pin insert(const std::string& key, SegmentEntry&& e, double cost);
  bool erase_locked(const std::string& key, Trash& trash);
  bool erase(const std::string& key);
  void clear();
};

}  // namespace hypic
