#include "server/segment_registry.h"

#include <algorithm>
#include <ctime>
#include <random>

#include "core/log.h"

namespace hypic::server {

std::string SegmentRegistry::new_id() {
  std::random_device rd;  // /dev/urandom on Linux
  static const char* hex = "0123456789abcdef";
  std::string id = "seg_";
  for (int i = 0; i < 4; ++i) {
    const uint32_t v = rd();
    for (int k = 0; k < 8; ++k) id += hex[(v >> (4 * k)) & 15];
  }
  return id;
}

std::vector<std::string> SegmentRegistry::sweep_locked(Clock::time_point now,
                                                       std::vector<Ptr>* dropped) {
  std::vector<std::string> gone;
  for (auto it = by_id_.begin(); it != by_id_.end();) {
    const auto& d = it->second.seg->deadline;
    if (d && *d <= now) {
      bytes_ -= it->second.seg->bytes;
      gone.push_back(it->first);
      dropped->push_back(std::move(it->second.seg));
      it = by_id_.erase(it);
    } else {
      ++it;
    }
  }
  return gone;
}

SegmentRegistry::Admit SegmentRegistry::admit_locked(size_t bytes) const {
  if (int64_t(by_id_.size()) + 1 > int64_t(opt_.max_segments)) return Admit::kTooMany;
  if (bytes > opt_.max_bytes || bytes_ > opt_.max_bytes - bytes) return Admit::kTooManyBytes;
  return Admit::kOk;
}

size_t SegmentRegistry::drop_erased_elsewhere() {
  if (!opt_.records || !opt_.records->shared()) return 0;
  std::vector<Ptr> mine;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& [id, slot] : by_id_) mine.push_back(slot.seg);
  }
  size_t n = 0;
  const int64_t unix_now = int64_t(std::time(nullptr));
  republish_if_forgotten(Clock::now());  // absent records may be a Redis that lost its data
  for (const Ptr& p : mine) {
    auto r = opt_.records->get(p->id, unix_now);
    if (!r) return n;  // no answer: keep everything
    if (!*r) {
      drop_local(p);
      ++n;
    }
  }
  return n;
}

SegmentRegistry::Admit SegmentRegistry::admit_or_reclaim(std::unique_lock<std::mutex>& lk, size_t bytes) {
  const Admit a = admit_locked(bytes);
  if (a == Admit::kOk || !opt_.records || !opt_.records->shared()) return a;
  lk.unlock();  // room held by ids deleted through other instances?
  const size_t freed = drop_erased_elsewhere();
  lk.lock();
  return freed ? admit_locked(bytes) : a;
}

SegmentRegistry::Admit SegmentRegistry::add(Ptr s, Clock::time_point now, Status* error, bool restored) {
  std::vector<Ptr> dropped;  // released after the lock (unpinning takes the store's lock)
  {
    std::unique_lock<std::mutex> lk(mu_);
    sweep_locked(now, &dropped);
    const Admit a = admit_or_reclaim(lk, s->bytes);
    if (a != Admit::kOk) return a;
    bytes_ += s->bytes;
    Slot& slot = by_id_[s->id];
    if (slot.seg) {  // a reused id (never, with new_id()): the newer registration wins
      bytes_ -= slot.seg->bytes;
      dropped.push_back(std::move(slot.seg));
    }
    slot = Slot{s, next_seq_++};
  }
  if (!opt_.records || restored) return Admit::kOk;
  // Nobody knows the new id until add() returns, so it being visible meanwhile is harmless.
  Status st = write_record([&] { return opt_.records->put(record_of(*s)); });
  if (st) return Admit::kOk;
  if (error) *error = st;
  std::lock_guard<std::mutex> lk(mu_);
  if (auto it = by_id_.find(s->id); it != by_id_.end() && it->second.seg == s) {
    bytes_ -= s->bytes;
    dropped.push_back(std::move(it->second.seg));
    by_id_.erase(it);
  }
  return Admit::kUnavailable;
}

Status SegmentRegistry::write_record(const std::function<Status()>& write) {
  Status st = write();
  while (st.code() == StatusCode::kResourceExhausted && opt_.make_room && opt_.make_room() > 0) st = write();
  return st;
}

SegmentRecord SegmentRegistry::record_of(const RegisteredSegment& s) const {
  SegmentRecord r;
  r.id = s.id;
  r.salt = s.salt;
  r.model = opt_.model;
  r.seam = s.seam;
  r.tokens = s.tokens;
  r.created = s.created;
  r.expires_at = s.expires_at;
  return r;
}

SegmentRegistry::Admit SegmentRegistry::would_admit(size_t bytes, Clock::time_point now) {
  std::vector<Ptr> dropped;  // released after the lock (unpinning takes the store's lock)
  std::unique_lock<std::mutex> lk(mu_);
  sweep_locked(now, &dropped);
  return admit_or_reclaim(lk, bytes);
}

std::shared_ptr<RegisteredSegment> SegmentRegistry::from_record(const SegmentRecord& r, Clock::time_point now) {
  auto seg = std::make_shared<RegisteredSegment>();
  seg->id = r.id;
  seg->salt = r.salt;
  seg->seam = r.seam;
  seg->tokens = r.tokens;
  seg->created = r.created;
  seg->expires_at = r.expires_at;
  if (r.expires_at) seg->deadline = now + std::chrono::seconds(*r.expires_at - int64_t(std::time(nullptr)));
  return seg;
}

SegmentRegistry::Ptr SegmentRegistry::find_local(const std::string& id, const std::string& salt,
                                                 Clock::time_point now) {
  std::vector<Ptr> dropped;  // released after the lock (unpinning takes the store's lock)
  std::lock_guard<std::mutex> lk(mu_);
  sweep_locked(now, &dropped);
  auto it = by_id_.find(id);
  if (it == by_id_.end() || it->second.seg->salt != salt) return nullptr;
  return it->second.seg;
}

void SegmentRegistry::drop_local(const Ptr& s) {
  std::vector<Ptr> dropped;  // released after the lock
  std::lock_guard<std::mutex> lk(mu_);
  if (auto it = by_id_.find(s->id); it != by_id_.end() && it->second.seg == s) {
    bytes_ -= s->bytes;
    dropped.push_back(std::move(it->second.seg));
    by_id_.erase(it);
  }
}

std::optional<SegmentRegistry::Ptr> SegmentRegistry::find_shared(const std::string& id, const std::string& salt,
                                                                 Clock::time_point now, Status* error) {
  auto r = opt_.records->get(id, int64_t(std::time(nullptr)));
  if (!r) {
    if (error) *error = r.status();
    return std::nullopt;
  }
  if (!*r || (*r)->model != opt_.model || (*r)->salt != salt) return Ptr();
  return Ptr(from_record(**r, now));
}

SegmentRegistry::Ptr SegmentRegistry::find(const std::string& id, const std::string& salt,
                                           Clock::time_point now, Status* unavailable) {
  Ptr local = find_local(id, salt, now);
  if (!opt_.records || !opt_.records->shared()) return local;
  // Shared records: another instance may have registered the id, or deleted it.
  Status why;
  const auto shared = find_shared(id, salt, now, &why);
  if (!shared) {  // the registry does not answer: what this instance knows stands
    HYPIC_LOG_DEBUG("segment registry: %s", why.to_string().c_str());
    if (!local && unavailable) *unavailable = why;
    return local;
  }
  if (local && !*shared) {  // deleted (or expired) elsewhere, unless the store forgot it
    if (republish_if_forgotten(now)) return local;  // written again
    // Another caller may have been re-publishing it meanwhile (serialised): look again.
    const auto again = find_shared(id, salt, now, &why);
    if (!again || *again) return local;
    drop_local(local);
    return nullptr;
  }
  return local ? local : *shared;
}

SegmentRegistry::Erased SegmentRegistry::erase(const std::string& id, const std::string& salt,
                                               Clock::time_point now, Status* error) {
  Ptr local = find_local(id, salt, now);
  if (!local && opt_.records && opt_.records->shared()) {  // registered through another instance?
    const auto shared = find_shared(id, salt, now, error);
    if (!shared) return Erased::kUnavailable;
    if (!*shared) return Erased::kUnknown;
  } else if (!local) {
    return Erased::kUnknown;
  }
  if (opt_.records) {
    if (Status st = write_record([&] { return opt_.records->erase(id); }); !st) {
      if (error) *error = st;
      return Erased::kUnavailable;
    }
  }
  if (local) drop_local(local);
  return Erased::kOk;
}

std::vector<SegmentRegistry::Ptr> SegmentRegistry::list(const std::string& salt,
                                                        Clock::time_point now) {
  std::vector<Ptr> out;
  {
    std::vector<const Slot*> slots;
    std::vector<Ptr> dropped;
    std::lock_guard<std::mutex> lk(mu_);
    sweep_locked(now, &dropped);
    for (const auto& [id, slot] : by_id_)
      if (slot.seg->salt == salt) slots.push_back(&slot);
    std::sort(slots.begin(), slots.end(), [](const Slot* a, const Slot* b) { return a->seq < b->seq; });
    out.reserve(slots.size());
    for (const Slot* s : slots) out.push_back(s->seg);
  }
  if (!opt_.records || !opt_.records->shared()) return out;
  // Shared records: every instance's registrations (those of this one keep their local form).
  auto all = opt_.records->load(opt_.model, int64_t(std::time(nullptr)));
  if (!all) {
    HYPIC_LOG_WARN("segment registry: listing this instance's registrations only: %s",
                   all.status().to_string().c_str());
    return out;
  }
  std::map<std::string, Ptr> mine;
  for (Ptr& p : out) mine[p->id] = std::move(p);
  out.clear();
  for (const SegmentRecord& r : *all) {
    if (r.salt != salt) continue;
    auto it = mine.find(r.id);
    out.push_back(it != mine.end() ? it->second : Ptr(from_record(r, now)));
  }
  return out;
}

SegmentRegistry::Totals SegmentRegistry::totals(Clock::time_point now) {
  std::vector<Ptr> dropped;  // released after the lock (unpinning takes the store's lock)
  std::lock_guard<std::mutex> lk(mu_);
  sweep_locked(now, &dropped);
  return Totals{by_id_.size(), bytes_, store_forgot_.load(), republished_.load()};
}

bool SegmentRegistry::republish_if_forgotten(Clock::time_point now) {
  if (!opt_.records || !opt_.records->shared()) return false;
  std::lock_guard<std::mutex> rlk(republish_mu_);
  auto forgot = opt_.records->forgot();
  if (!forgot || !*forgot) return false;
  ++store_forgot_;
  std::vector<Ptr> mine, dropped;
  {
    std::lock_guard<std::mutex> lk(mu_);
    sweep_locked(now, &dropped);
    for (const auto& [id, slot] : by_id_) mine.push_back(slot.seg);
  }
  size_t written = 0;
  for (const Ptr& p : mine) {
    if (Status st = opt_.records->put(record_of(*p)); !st) {
      HYPIC_LOG_ERROR("segment registry: could not re-publish '%s' to %s (it answers here only): %s", p->id.c_str(),
                      opt_.records->describe().c_str(), st.to_string().c_str());
      continue;
    }
    ++written;
  }
  republished_ += written;
  HYPIC_LOG_WARN("segment registry: %s forgot every registration (restarted without persistence, or flushed): "
                 "re-published the %zu of %zu this instance holds; registrations held only by instances that are "
                 "gone are lost",
                 opt_.records->describe().c_str(), written, mine.size());
  return true;
}

std::vector<std::string> SegmentRegistry::sweep(Clock::time_point now) {
  std::vector<Ptr> dropped;
  std::vector<std::string> gone;
  {
    std::lock_guard<std::mutex> lk(mu_);
    gone = sweep_locked(now, &dropped);
  }
  // Best effort: a record left behind has expired all the same (a restart skips and deletes it).
  if (opt_.records)
    for (const std::string& id : gone)
      if (Status st = opt_.records->erase(id); !st)
        HYPIC_LOG_WARN("segment registry: expired segment '%s' stays in %s: %s", id.c_str(),
                       opt_.records->describe().c_str(), st.to_string().c_str());
  return gone;
}

}  // namespace hypic::server
