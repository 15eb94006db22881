// Durable records of registered segments (POST /v1/segments): what a restarted server needs
// to answer a segment id it handed out — the tokens and how they were keyed, not the entry
// (that is the SegmentStore's, rebuilt from the tokens when its file is gone).
//
// SegmentRecords is the interface; the server's SegmentRegistry writes through it.
// open_sqlite_records() is the embedded default (--cache-dir): one SQLite file, each put /
// erase one transaction in WAL mode with synchronous=FULL, so a process killed at any point
// leaves every record whole or absent, and a record put before the call returned survives a
// power cut. Why SQLite: atomic, crash-safe, in Debian, no server to run.
//
// open_redis_records() is the shared registry (--segment-store redis://…): every instance and
// the router read and write the same records, so an id registered through one instance is
// resolved by all. A record is one value "hypic:r:<id>" (magic, fields, XXH64 of them) whose
// Redis expiry is the segment's expires_at, so Redis drops it when the TTL passes; a value
// that fails its checks is deleted and treated as absent. "hypic:epoch" (a random value set
// once, SET NX, by whichever process comes first) tells a Redis that lost its data
// (forgot()). shared() is true: the records change under the server (it asks get() for ids
// it does not know and for ids it does, to see a DELETE made through another instance).
//
// Threading: every method may be called from any thread (implementations serialise).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace hypic {

struct SegmentRecord {
  std::string id;     // "seg_" + 32 hex digits
  std::string salt;   // the tenant's cache_salt
  std::string model;  // the model's fingerprint: tokens only mean something to its tokenizer
  int seam = 8;
  std::vector<int32_t> tokens;
  int64_t created = 0;                 // unix seconds
  std::optional<int64_t> expires_at;   // unix seconds; none: until erased
};

class SegmentRecords {
 public:
  virtual ~SegmentRecords() = default;
  // Adds or replaces the record `r.id`: all of it or nothing.
  virtual Status put(const SegmentRecord& r) = 0;
  // Removes `id`; an absent id is not an error.
  virtual Status erase(const std::string& id) = 0;
  // The records of `model` not expired at `now` (unix seconds), oldest first. Expired records
  // are deleted; a record that fails its checks (tokens not whole int32s, a seam out of range)
  // is skipped with a warning and deleted. Records of other models stay, untouched.
  virtual Result<std::vector<SegmentRecord>> load(const std::string& model, int64_t now) = 0;
  // The record `id` (of any model: callers check) unless absent or expired at `now`.
  virtual Result<std::optional<SegmentRecord>> get(const std::string& id, int64_t now) = 0;
  // Whether other processes add and erase these records (see above).
  virtual bool shared() const { return false; }
  // Shared records: whether the store forgot every record since the last call (a Redis
  // restarted without persistence, or flushed), so that absent records are not deletions and
  // the registrations each instance holds must be written again. The first call (or put())
  // claims a marker; later calls report it gone or replaced. Local records: always false.
  virtual Result<bool> forgot() { return false; }
  // Where the records live, for logs and errors.
  virtual std::string describe() const = 0;
};

// Opens (creating if needed) the SQLite database at `path`. A file that is not a database of
// this schema is an error naming the file (nothing is changed in it).
Result<std::unique_ptr<SegmentRecords>> open_sqlite_records(const std::string& path);

namespace kv {
class Redis;
}
// Records in Redis through `redis` (connected lazily; a Redis that is down makes every call
// fail with kUnavailable).
std::unique_ptr<SegmentRecords> open_redis_records(std::shared_ptr<kv::Redis> redis);

}  // namespace hypic
