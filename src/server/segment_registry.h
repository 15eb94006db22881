// Registered segments (POST /v1/segments): id -> tokens + a pinned cache entry, per tenant.
//
// A registration holds a SegmentStore::Pin, so its entry stays in memory until the
// registration ends (DELETE, or its TTL passing) and requests that reference it (or repeat
// its text inline with the same cache_salt and seam) hit. Pinned bytes are bounded here
// (max_bytes, plus max_segments registrations) so registrations cannot take the cache away
// from requests: add() refuses what would exceed either bound.
//
// Tenant isolation: every lookup names the cache_salt; a registration under another salt is
// indistinguishable from an unknown id (find / erase return nothing, list() omits it).
//
// Expiry is lazy: every method first drops the registrations whose deadline has passed
// (their Pins are released), so an expired id is never returned; sweep() does the same and
// says which ids went (for the log). Time is passed in (`now`, steady clock) so tests can
// step it.
//
// Durability (--cache-dir): with Options::records every registration is also a record there
// (kv/segment_records.h), written after the registration is admitted in memory and before
// add() returns; a record that cannot be written undoes the admission (kUnavailable), so a
// client is never given an id that a restart would lose. erase() deletes the record first
// and changes nothing in memory when that fails. Expired records are deleted by sweep()
// (and skipped by a restart's load). The record I/O runs outside the mutex.
//
// Shared records (--segment-store redis://…, records->shared()): the registry of all
// instances. find() of an id this instance does not hold returns the record's registration
// (no Pin: the entry comes from the store's tiers or is built); find() of one it holds checks
// that the record still exists (a DELETE through another instance, or its TTL, ends it here
// too); erase() deletes any instance's registration; list() lists all of them. When the
// records do not answer, find() and list() fall back to this instance's registrations (find()
// says so for the others: the caller answers 503, not 404) and erase() is kUnavailable. A
// registration deleted through another instance keeps its pin here until this instance
// looks it up or its caps would refuse a registration (then every held id is checked).
//
// Threading: a dedicated mutex (the server's only lock outside the scheduler module, see
// STYLE "Serving code"); every method may be called from any thread. Registrations are
// immutable once added and handed out as shared_ptr<const>, so a caller may keep using one
// after it was erased.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kv/segment_records.h"
#include "cache/segment_store.h"

namespace hypic::server {

struct RegisteredSegment {
  using Clock = std::chrono::steady_clock;
  std::string id;    // "seg_" + 32 random hex digits
  std::string salt;  // cache_salt it was registered under
  int seam = 8;
  std::vector<int32_t> tokens;
  SegmentStore::Pin pin;  // null: too short to have an entry (recomputed when used)
  size_t bytes = 0;       // pin's SegmentEntry::bytes(), 0 without one
  int64_t created = 0;      // unix seconds
  std::optional<int64_t> expires_at;    // unix seconds; none: until DELETE
  std::optional<Clock::time_point> deadline;  // steady-clock twin of expires_at
};

class SegmentRegistry {
 public:
  using Clock = RegisteredSegment::Clock;
  using Ptr = std::shared_ptr<const RegisteredSegment>;
  struct Options {
    size_t max_bytes = 0;  // pinned bytes of all registrations together
    int max_segments = 1024;
    std::shared_ptr<SegmentRecords> records;  // null: registrations end with the process
    std::string model;  // the records' model field (the model's fingerprint)
    // Called when writing a record failed for lack of space (kResourceExhausted); frees some
    // (the disk tier's files: SegmentStore::shed_disk) and returns the bytes freed. The write is
    // retried while it frees something. Null: no retry.
    std::function<size_t()> make_room;
  };
  // kUnavailable: the durable record could not be written (nothing registered).
  enum class Admit { kOk, kTooMany, kTooManyBytes, kUnavailable };
  enum class Erased { kOk, kUnknown, kUnavailable };
  struct Totals {
    size_t count = 0, bytes = 0;
    uint64_t store_forgot = 0;   // times the shared records were found to have forgotten everything
    uint64_t republished = 0;    // registrations written again after that
  };

  explicit SegmentRegistry(Options opt) : opt_(opt) {}
  SegmentRegistry(const SegmentRegistry&) = delete;
  SegmentRegistry& operator=(const SegmentRegistry&) = delete;

  const Options& options() const { return opt_; }
  // A fresh id from the OS's random source (not guessable; ids are capabilities too).
  static std::string new_id();

  // Adds `s` (its id must be new) unless it would exceed max_segments or max_bytes, and
  // writes its record (unless `restored`: it came from the records). *error says why a
  // record could not be written.
  Admit add(Ptr s, Clock::time_point now, Status* error = nullptr, bool restored = false);
  // Whether one more registration of `bytes` would fit now (a cheap check before building).
  Admit would_admit(size_t bytes, Clock::time_point now);
  // The registration `id` under `salt`; nullptr if unknown, expired or another tenant's, or
  // (*unavailable set) if the shared records do not answer and this instance does not hold it.
  Ptr find(const std::string& id, const std::string& salt, Clock::time_point now,
           Status* unavailable = nullptr);
  // Removes it (record first); kUnknown exactly when find() would have returned nullptr.
  Erased erase(const std::string& id, const std::string& salt, Clock::time_point now,
               Status* error = nullptr);
  // The tenant's registrations, oldest first.
  std::vector<Ptr> list(const std::string& salt, Clock::time_point now);
  Totals totals(Clock::time_point now);
  // Drops expired registrations (and their records); returns their ids.
  std::vector<std::string> sweep(Clock::time_point now);
  // Shared records: when they forgot everything since the last look (records->forgot(): a
  // Redis restarted without persistence), writes the record of every registration this
  // instance holds again, logging how many and each id it could not write. Callers that find
  // a record absent call it before taking the absence for a deletion, and the server every
  // second. Serialised: a caller waits while another re-publishes. False: nothing forgotten,
  // or the records do not answer.
  bool republish_if_forgotten(Clock::time_point now);
  // The durable form of a registration, and back (without a Pin: the caller adds one).
  SegmentRecord record_of(const RegisteredSegment& s) const;
  static std::shared_ptr<RegisteredSegment> from_record(const SegmentRecord& r, Clock::time_point now);

 private:
  // Moves the expired registrations into *dropped (callers destroy them after unlocking:
  // releasing a Pin takes the store's lock).
  std::vector<std::string> sweep_locked(Clock::time_point now, std::vector<Ptr>* dropped);
  Admit admit_locked(size_t bytes) const;
  // admit_locked, retried after drop_erased_elsewhere() (lk released meanwhile) if refused.
  Admit admit_or_reclaim(std::unique_lock<std::mutex>& lk, size_t bytes);
  Ptr find_local(const std::string& id, const std::string& salt, Clock::time_point now);
  // Shared records: drops this instance's registrations whose record is gone (deleted through
  // another instance); how many. Called when the caps refuse a registration.
  size_t drop_erased_elsewhere();
  void drop_local(const Ptr& s);
  // A record write (put / erase), retried after make_room() while the storage is full and
  // room can be made.
  Status write_record(const std::function<Status()>& write);
  // The shared records' registration `id` of `salt` and this model (nullptr: none);
  // nullopt and *error when they do not answer.
  std::optional<Ptr> find_shared(const std::string& id, const std::string& salt, Clock::time_point now,
                                 Status* error);
  struct Slot {
    Ptr seg;
    uint64_t seq = 0;  // insertion order, for list()
  };
  const Options opt_;
  std::mutex republish_mu_;  // held across forgot() and the writes that follow it
  std::atomic<uint64_t> store_forgot_{0}, republished_{0};
  std::mutex mu_;
  // Guarded by mu_:
  std::map<std::string, Slot> by_id_;
  size_t bytes_ = 0;  // Σ seg->bytes over by_id_
  uint64_t next_seq_ = 0;
};

}  // namespace hypic::server
