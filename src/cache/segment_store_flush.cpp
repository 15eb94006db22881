// SegmentStore: writing resident entries to the disk tier without evicting them
// (persist: a registration's write-through; flush: the warm restart on shutdown).
#include "cache/segment_store_impl.h"

namespace hypic {

using namespace store_detail;

auto SegmentStore::Impl::write_resident(std::unique_lock<std::mutex>& lk, const std::string& key,
                                        Data* keep, Status* s, size_t* size) -> Reserve {
  *s = Status::ok();
  auto it = mem.find(key);
  if (it == mem.end()) {
    *s = not_found("segment entry '" + key + "' is not in memory");
    return Reserve::kNoRoom;
  }
  const MemEntry& v = it->second;
  const std::string stem = stem_of(key);
  const Reserve r = reserve_disk_locked(stem, file_size_bound(*v.data), v.cost, v.freq);
  if (r == Reserve::kNoRoom) {
    *s = Status(StatusCode::kResourceExhausted,
                "the disk tier has no room for segment entry '" + key + "' (raise --cache-disk)");
  }
  if (r != Reserve::kReserved) return r;
  const uint64_t version = disk.at(stem).version;
  *keep = v.data;  // the entry may be erased while it is written; released by the caller
  lk.unlock();
  write_file(stem, **keep, s, size);
  lk.lock();
  finish_write_locked(stem, version, s->is_ok(), *size);
  if (s->is_ok()) ++st.spills;
  return r;
}

Status SegmentStore::persist(const std::string& key) {
  Impl::Data keep;  // released after the lock
  Impl& i = *impl_;
  std::unique_lock<std::mutex> lk(i.mu);
  if (!i.disk_on) return Status::ok();
  Status s;
  size_t size = 0;
  i.write_resident(lk, key, &keep, &s, &size);
  return s;
}

SegmentStore::FlushReport SegmentStore::flush(std::chrono::steady_clock::time_point deadline,
                                              const std::function<void(size_t, size_t)>& progress) {
  FlushReport rep;
  Impl& i = *impl_;
  std::vector<std::pair<double, std::string>> todo;  // (priority, key), most valuable first
  {
    std::lock_guard<std::mutex> lk(i.mu);
    if (!i.disk_on) return rep;
    for (const auto& [key, v] : i.mem)
      if (!i.disk.count(stem_of(key))) todo.emplace_back(v.h, key);
  }
  std::sort(todo.begin(), todo.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  rep.candidates = todo.size();
  for (const auto& [h, key] : todo) {
    if (std::chrono::steady_clock::now() >= deadline) {
      rep.timed_out = true;
      break;
    }
    Impl::Data keep;  // released after the lock
    Status s;
    size_t size = 0;
    {
      std::unique_lock<std::mutex> lk(i.mu);
      if (!i.mem.count(key)) continue;  // evicted or erased meanwhile
      const auto r = i.write_resident(lk, key, &keep, &s, &size);
      if (r == Impl::Reserve::kPresent) continue;
      if (s.is_ok()) {
        ++rep.written;
        rep.bytes += size;
      } else {
        ++rep.failed;
      }
    }
    if (progress) progress(rep.written, rep.candidates);
  }
  return rep;
}

}  // namespace hypic
