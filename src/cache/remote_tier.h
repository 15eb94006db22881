// The shared tier below the disk (--segment-store redis://…): entries any instance built,
// found by every other one under the same content-addressed key (the SegmentStore's
// SHA-256 of model, dtype, seam, salt and tokens), so a document built on instance A is a
// hit on instance B.
//
// RemoteTier is the interface the cache owns; redis_tier() the implementation on kv::Redis.
// Layout: an entry's save_entry bytes (checksummed) are cut into values of at most
// chunk_bytes, keys "hypic:e:<stem>:<i>", and its manifest "hypic:e:<stem>" (magic, chunk
// count, total size, XXH64 of each chunk and of the whole), all in one MULTI / EXEC
// transaction, so a Redis that is full refuses the whole entry. A reader takes the
// manifest, the chunks, checks every checksum, parses the entry (its own checksum) and that
// it holds the requested key; anything else — a missing chunk (evicted by maxmemory), a
// truncated or altered value, another key's entry — is kCorrupt: the manifest is deleted,
// the caller builds the entry and its write-back replaces the value.
//
// Writes never block the caller: put() queues the entry (a bounded queue; when it is full the
// entry is dropped and counted) and one writer thread sends it. Redis down, slow or full:
// get() fails fast (kUnavailable, the client's backoff) and the caller builds locally; put()s
// fail and are counted; nothing is retried later (the next build of the entry writes it).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "core/status.h"
#include "entry/segment_entry.h"

namespace hypic {
namespace kv {
class Redis;
}

class RemoteTier {
 public:
  struct Stats {
    uint64_t hits = 0, misses = 0;  // get(): found and verified / not there
    uint64_t errors = 0;            // get()s without an answer (down, timeout)
    uint64_t corrupt = 0;           // values that failed their checks (deleted)
    uint64_t puts = 0;              // entries written
    uint64_t put_dropped = 0;       // writes dropped (queue full) or failed (down, full)
    uint64_t bytes_read = 0, bytes_written = 0;
    bool up = true;                 // the service answers (not in a backoff period)
  };
  virtual ~RemoteTier() = default;
  // The entry under `key`: kNotFound, kUnavailable (no answer) or kCorrupt otherwise.
  virtual Result<SegmentEntry> get(const std::string& key) = 0;
  // Queues `e` to be written under `key` (returns at once).
  virtual void put(const std::string& key, std::shared_ptr<const SegmentEntry> e) = 0;
  // Waits until the queued writes are done or `deadline` passes; true if done (tests, shutdown).
  virtual bool drain(std::chrono::steady_clock::time_point deadline) = 0;
  virtual Stats stats() const = 0;
  virtual std::string describe() const = 0;
};

struct RedisTierOptions {
  size_t chunk_bytes = size_t(1) << 20;     // largest value written
  int64_t ttl_seconds = 7 * 24 * 3600;      // every key's expiry (0: none)
  size_t max_queued = 16;                   // writes waiting for the writer (each holds a Pin)
};
Result<std::shared_ptr<RemoteTier>> redis_tier(const RedisTierOptions& opt, std::shared_ptr<kv::Redis> redis);

}  // namespace hypic
