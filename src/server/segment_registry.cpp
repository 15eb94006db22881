#include "server/segment_registry.h"

#include <algorithm>
#include <random>

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

SegmentRegistry::Admit SegmentRegistry::add(Ptr s, Clock::time_point now) {
  std::vector<Ptr> dropped;  // released after the lock (unpinning takes the store's lock)
  std::lock_guard<std::mutex> lk(mu_);
  sweep_locked(now, &dropped);
  const Admit a = admit_locked(s->bytes);
  if (a != Admit::kOk) return a;
  bytes_ += s->bytes;
  Slot& slot = by_id_[s->id];
  if (slot.seg) {  // a reused id (never, with new_id()): the newer registration wins
    bytes_ -= slot.seg->bytes;
    dropped.push_back(std::move(slot.seg));
  }
  slot = Slot{std::move(s), next_seq_++};
  return Admit::kOk;
}

SegmentRegistry::Admit SegmentRegistry::would_admit(size_t bytes, Clock::time_point now) {
  std::vector<Ptr> dropped;  // released after the lock (unpinning takes the store's lock)
  std::lock_guard<std::mutex> lk(mu_);
  sweep_locked(now, &dropped);
  return admit_locked(bytes);
}

SegmentRegistry::Ptr SegmentRegistry::find(const std::string& id, const std::string& salt,
                                           Clock::time_point now) {
  std::vector<Ptr> dropped;  // released after the lock (unpinning takes the store's lock)
  std::lock_guard<std::mutex> lk(mu_);
  sweep_locked(now, &dropped);
  auto it = by_id_.find(id);
  if (it == by_id_.end() || it->second.seg->salt != salt) return nullptr;
  return it->second.seg;
}

bool SegmentRegistry::erase(const std::string& id, const std::string& salt,
                            Clock::time_point now) {
  std::vector<Ptr> dropped;  // released after the lock (unpinning takes the store's lock)
  std::lock_guard<std::mutex> lk(mu_);
  sweep_locked(now, &dropped);
  auto it = by_id_.find(id);
  if (it == by_id_.end() || it->second.seg->salt != salt) return false;
  bytes_ -= it->second.seg->bytes;
  dropped.push_back(std::move(it->second.seg));
  by_id_.erase(it);
  return true;
}

std::vector<SegmentRegistry::Ptr> SegmentRegistry::list(const std::string& salt,
                                                        Clock::time_point now) {
  std::vector<const Slot*> slots;
  std::vector<Ptr> dropped;
  std::lock_guard<std::mutex> lk(mu_);
  sweep_locked(now, &dropped);
  for (const auto& [id, slot] : by_id_)
    if (slot.seg->salt == salt) slots.push_back(&slot);
  std::sort(slots.begin(), slots.end(), [](const Slot* a, const Slot* b) { return a->seq < b->seq; });
  std::vector<Ptr> out;
  out.reserve(slots.size());
  for (const Slot* s : slots) out.push_back(s->seg);
  return out;
}

SegmentRegistry::Totals SegmentRegistry::totals(Clock::time_point now) {
  std::vector<Ptr> dropped;  // released after the lock (unpinning takes the store's lock)
  std::lock_guard<std::mutex> lk(mu_);
  sweep_locked(now, &dropped);
  return Totals{by_id_.size(), bytes_};
}

std::vector<std::string> SegmentRegistry::sweep(Clock::time_point now) {
  std::vector<Ptr> dropped;
  std::lock_guard<std::mutex> lk(mu_);
  return sweep_locked(now, &dropped);
}

}  // namespace hypic::server
