// SegmentStore: the cache of segment entries (SPEC §4): a memory tier with an exact byte
// budget and an optional local-disk tier that evicted entries spill to.
//
// Pins (a request's transaction with the cache). lookup() and insert() return a Pin, a
// shared reference to an immutable entry. While any copy of a Pin is alive the entry is not
// evicted from memory and its bytes stay counted (pinned_bytes); dropping the last copy
// unpins it. A request holds the Pins of all its segments from planning to the end of its
// forward pass, so nothing it composes can disappear underneath it. An entry that is not
// admitted to memory (larger than the budget, or fitting it would need pinned entries
// evicted) still comes back as a Pin, but one the store does not track: the memory is the
// caller's until it drops the Pin (the entry was written to the disk tier if there is one).
// Pins may outlive the store.
//
// Memory eviction: GreedyDual-Size-Frequency (L. Cherkasova, "Improving WWW proxies
// performance with Greedy-Dual-Size-Frequency caching policy", HP Labs TR-98-69, 1998).
// Every resident entry has a priority
//     H = clock + frequency × recompute_cost_seconds / bytes,
// the compute time that keeping it saves per byte it occupies, weighted by how often it was
// used, on top of the clock at its last use. The unpinned entry with the lowest H goes first
// and the clock rises to that H. So a large entry that is cheap to recompute per byte goes
// before a small expensive one; a hit recomputes H from the current clock (frequency + 1),
// while an entry nobody uses keeps its old H and falls behind the rising clock until it is
// the cheapest to lose (recency, without a separate LRU). Ties go least recently used first.
// New entries are always admitted when unpinned entries can make room (the request that
// built one is about to use it). The cost is the caller's measured or estimated seconds of
// the standalone prefill; for an entry reloaded from a file of an earlier run (cost
// unknown), cost = bytes × the mean seconds per byte inserted so far (1 s/GB before any).
// An evicted entry's frequency and cost are kept in the disk index; a reload resumes them.
//
// Accounting. mem_bytes = Σ SegmentEntry::bytes() over the entries the store holds in memory
// (tensor data, exact), pinned ones and ones being written to disk included; it never
// exceeds mem_budget_bytes (HYPIC_CHECK after every mutation). disk_bytes = Σ file sizes,
// plus reservations for files being written (an upper bound, settled when the write ends);
// it never exceeds disk_budget_bytes when that is set.
//
// Disk tier (optional): one file per entry, <disk_dir>/<key>.seg.safetensors in the
// save_entry() format (keys that are not 64 lowercase hex digits are SHA-256'd for the file
// name). An entry evicted from memory is written there unless its file exists already; an
// entry not admitted to memory is written there directly. Writes are atomic (temporary
// file, fsync, rename). A disk hit loads and verifies the whole file (structure, checksum,
// and that it holds the requested key); a file that fails is deleted, logged, counted in
// corrupt_dropped and the lookup is a miss, so the caller recomputes. Files stay after a
// reload (a later eviction of that entry costs no write). Files are evicted least recently
// used (written or loaded). open() indexes the files already in disk_dir (unverified until
// loaded; oldest mtime = least recent) and deletes temporary files of interrupted writes.
// One store per directory.
//
// Thread safety: every public method may be called from any number of threads at once; all
// locking is inside. One mutex guards the indexes and counters. File reads and writes run
// with it released: a lookup loading a file does not block memory hits of other threads,
// and concurrent lookups of a key being loaded wait for that single load instead of reading
// the file again. Only unlinking a file (disk eviction, a corrupt file) happens under it.
// insert() and a disk-hit lookup() may write evicted entries to disk before they return;
// those entries stay counted in memory until their file is complete, so the budget covers
// every byte the store holds.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "cache/remote_tier.h"
#include "core/status.h"
#include "entry/segment_entry.h"

namespace hypic {

class SegmentStore {
 public:
  struct Options {
    size_t mem_budget_bytes = 0;   // --cache-mem (MiB on the command line)
    std::string disk_dir;          // --cache-dir; empty: no disk tier
    size_t disk_budget_bytes = 0;  // 0: unlimited
    // The shared tier below disk (--segment-store; cache/remote_tier.h): a lookup that misses
    // memory and disk asks it; an inserted entry is written back to it (queued, not waited for).
    std::shared_ptr<RemoteTier> remote;
  };
  struct Stats {
    size_t mem_bytes = 0, mem_entries = 0, pinned_bytes = 0;
    size_t disk_bytes = 0, disk_entries = 0;  // disk_entries: complete files
    uint64_t hits_mem = 0, hits_disk = 0, hits_remote = 0, misses = 0;  // one per lookup()
    uint64_t disk_reads = 0;       // files read (concurrent lookups of one key share a read)
    uint64_t evictions = 0;        // entries removed from memory to make room
    uint64_t spills = 0;           // files written (evicted, not admitted, persisted, flushed)
    uint64_t corrupt_dropped = 0;  // files that failed verification and were deleted
    uint64_t rejected = 0;         // entries not admitted to memory
    uint64_t disk_shed = 0;        // files deleted because the disk was full (shed_disk)
  };
  using Pin = std::shared_ptr<const SegmentEntry>;

  // Creates disk_dir if needed and indexes the files in it.
  static Result<std::unique_ptr<SegmentStore>> open(const Options& opt);
  ~SegmentStore();
  SegmentStore(const SegmentStore&) = delete;
  SegmentStore& operator=(const SegmentStore&) = delete;

  // Memory hit, else a verified disk hit, else a verified hit of the shared tier (either
  // admitted to memory if it fits), else nullptr.
  Pin lookup(const std::string& key);
  // Adds a freshly computed entry (e.key is set to `key` if empty, else must equal it) and
  // returns it pinned. If `key` is already resident the resident entry is returned and `e`
  // dropped. May evict (and spill) unpinned entries; never evicts pinned ones.
  Pin insert(const std::string& key, SegmentEntry&& e, double recompute_cost_seconds);
  // Forgets `key` in both tiers (its file is deleted); outstanding Pins stay valid but their
  // bytes are no longer the store's. True if it was in either tier.
  bool erase(const std::string& key);
  // erase() of everything.
  void clear();

  // Writes `key`'s resident entry to the disk tier unless its file exists (write-through for
  // what must survive a crash: registrations). OK when there is no disk tier; not-found when
  // the key is not resident; an error when the disk budget has no room or the write failed.
  Status persist(const std::string& key);
  // Warm restart: writes every resident entry that has no file to the disk tier, the most
  // valuable (GDSF priority) first, until `deadline`; progress(written, total) after each
  // file. Entries stay resident. A no-op without a disk tier.
  struct FlushReport {
    size_t candidates = 0, written = 0, failed = 0, bytes = 0;
    bool timed_out = false;  // the deadline came before every candidate was written
  };
  FlushReport flush(std::chrono::steady_clock::time_point deadline,
                    const std::function<void(size_t written, size_t total)>& progress = {});

  // The file system under disk_dir is full (a write of the store's or of someone else's
  // failed with ENOSPC): deletes least recently used complete files until `bytes` are freed
  // or none is left; returns the bytes freed (0 without a disk tier). The store does this
  // itself when one of its own writes hits a full disk; callers sharing the file system
  // (the registry's database) call it when theirs do. A log line says what was deleted.
  size_t shed_disk(size_t bytes);

  Stats stats() const;
  const Options& options() const;
  bool in_memory(const std::string& key) const;
  bool on_disk(const std::string& key) const;  // a complete file is indexed
  // Recounts every total from the indexes and aborts on any mismatch (tests, debugging).
  void check_invariants() const;

  // The disk tier's file for a key.
  std::string file_path(const std::string& key) const;

 private:
  struct Impl;
  explicit SegmentStore(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace hypic
