// SegmentStore's disk tier: checked files, their index and LRU, the directory scan.
#include "cache/segment_store_impl.h"

namespace hypic {

using namespace store_detail;

void SegmentStore::Impl::write_file(const std::string& stem, const SegmentEntry& e, Status* s,
                                    size_t* size) {
  const std::string path = path_of_stem(stem);
  *s = save_entry(path, e);
  if (s->code() == StatusCode::kResourceExhausted && shed(file_size_bound(e)) > 0) *s = save_entry(path, e);
  if (s->is_ok()) {
    std::error_code ec;
    *size = size_t(fs::file_size(path, ec));
    if (ec) *s = io_error("cannot stat '" + path + "': " + ec.message());
  }
  if (!s->is_ok())
    HYPIC_LOG_WARN("segment store: could not write %s to the disk tier: %s", stem.c_str(),
                   s->to_string().c_str());
}

void SegmentStore::Impl::unlink_locked(const std::string& stem) {
  const std::string p = path_of_stem(stem);
  if (::unlink(p.c_str()) != 0 && errno != ENOENT)
    HYPIC_LOG_WARN("segment store: cannot delete '%s': %s", p.c_str(), std::strerror(errno));
}

void SegmentStore::Impl::drop_file_locked(std::unordered_map<std::string, DiskEntry>::iterator it) {
  HYPIC_CHECK(!it->second.writing);
  disk_lru.erase({it->second.tick, it->first});
  st.disk_bytes -= it->second.bytes;
  unlink_locked(it->first);
  disk.erase(it);
  st.disk_entries = disk.size() - writing_count;
}

size_t SegmentStore::Impl::shed(size_t want) {
  std::lock_guard<std::mutex> lk(mu);
  size_t freed = 0, files = 0;
  for (; freed < want && !disk_lru.empty(); ++files) {
    auto it = disk.find(disk_lru.begin()->second);
    freed += it->second.bytes;
    drop_file_locked(it);
  }
  st.disk_shed += files;
  if (files)
    HYPIC_LOG_WARN("segment store: the disk of %s is full: deleted the %zu least recently used entry files "
                   "(%.1f MiB) to make room", opt.disk_dir.c_str(), files, double(freed) / (1 << 20));
  else
    HYPIC_LOG_WARN("segment store: the disk of %s is full and the disk tier has no file left to delete",
                   opt.disk_dir.c_str());
  check_locked();
  return freed;
}

bool SegmentStore::Impl::make_disk_room_locked(size_t extra) {
  if (opt.disk_budget_bytes == 0) return true;
  if (extra > opt.disk_budget_bytes || writing_bytes + extra > opt.disk_budget_bytes)
    return false;
  while (st.disk_bytes + extra > opt.disk_budget_bytes) {
    HYPIC_CHECK(!disk_lru.empty());
    drop_file_locked(disk.find(disk_lru.begin()->second));
  }
  return true;
}

auto SegmentStore::Impl::reserve_disk_locked(const std::string& stem, size_t bound, double cost,
                                             uint64_t freq) -> Reserve {
  if (auto it = disk.find(stem); it != disk.end()) {
    if (!it->second.writing) {
      it->second.cost = cost;
      it->second.freq = std::max(it->second.freq, freq);
    }
    return Reserve::kPresent;
  }
  if (!make_disk_room_locked(bound)) return Reserve::kNoRoom;
  DiskEntry& d = disk[stem];
  d.bytes = bound;
  d.version = ++gen;
  d.cost = cost;
  d.freq = freq;
  d.writing = true;
  ++writing_count;
  writing_bytes += bound;
  st.disk_bytes += bound;
  check_locked();
  return Reserve::kReserved;
}

void SegmentStore::Impl::finish_write_locked(const std::string& stem, uint64_t version, bool ok,
                                             size_t size) {
  auto it = disk.find(stem);
  HYPIC_CHECK(it != disk.end() && it->second.writing && it->second.version == version, stem);
  DiskEntry& d = it->second;
  d.writing = false;
  --writing_count;
  writing_bytes -= d.bytes;
  st.disk_bytes -= d.bytes;
  if (!ok || d.doomed) {
    if (ok) unlink_locked(stem);
    disk.erase(it);
    st.disk_entries = disk.size() - writing_count;
    check_locked();
    return;
  }
  d.bytes = size;
  d.tick = ++tick;
  disk_lru.insert({d.tick, stem});
  st.disk_bytes += size;
  st.disk_entries = disk.size() - writing_count;
  // The bound is generous, so this deletes nothing unless it was wrong.
  if (opt.disk_budget_bytes)
    while (st.disk_bytes > opt.disk_budget_bytes)
      drop_file_locked(disk.find(disk_lru.begin()->second));
  check_locked();
}

void SegmentStore::Impl::touch_file_locked(const std::string& stem, DiskEntry& d) {
  disk_lru.erase({d.tick, stem});
  d.tick = ++tick;
  disk_lru.insert({d.tick, stem});
}

Status SegmentStore::Impl::scan_dir() {
  std::error_code ec;
  fs::create_directories(opt.disk_dir, ec);
  if (ec)
    return io_error("cannot create the cache directory '" + opt.disk_dir + "': " +
                    ec.message() + " (check --cache-dir and its permissions)");
  struct Found {
    fs::file_time_type mtime;
    std::string stem;
    size_t size;
  };
  std::vector<Found> found;
  for (fs::directory_iterator it(opt.disk_dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::error_code e2;
    if (!it->is_regular_file(e2)) continue;
    const std::string tmp_mark = std::string(kSuffix) + ".tmp.";
    if (name.size() > 1 && name[0] == '.' && name.find(tmp_mark) != std::string::npos) {
      fs::remove(it->path(), e2);  // an interrupted write
      continue;
    }
    const size_t sl = std::strlen(kSuffix);
    if (name.size() != 64 + sl || name.compare(64, sl, kSuffix) != 0) continue;
    const std::string stem = name.substr(0, 64);
    if (!is_hex64(stem)) continue;
    const uintmax_t size = it->file_size(e2);
    const fs::file_time_type mt = it->last_write_time(e2);
    if (e2) continue;
    found.push_back({mt, stem, size_t(size)});
  }
  if (ec)
    return io_error("cannot list the cache directory '" + opt.disk_dir + "': " + ec.message());
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    return a.mtime != b.mtime ? a.mtime < b.mtime : a.stem < b.stem;
  });
  std::lock_guard<std::mutex> lk(mu);
  for (const Found& f : found) {
    DiskEntry& d = disk[f.stem];
    d.bytes = f.size;
    d.tick = ++tick;
    d.version = ++gen;
    disk_lru.insert({d.tick, f.stem});
    st.disk_bytes += f.size;
  }
  st.disk_entries = disk.size();
  size_t dropped = 0;
  if (opt.disk_budget_bytes)
    for (; st.disk_bytes > opt.disk_budget_bytes; ++dropped)
      drop_file_locked(disk.find(disk_lru.begin()->second));
  if (!found.empty())
    HYPIC_LOG_INFO("segment store: indexed %zu entry files (%.1f MiB) in %s%s", disk.size(),
                   double(st.disk_bytes) / (1 << 20), opt.disk_dir.c_str(),
                   dropped ? (", deleted " + std::to_string(dropped) +
                              " least recently used to fit the disk budget").c_str()
                           : "");
  check_locked();
  return Status::ok();
}

}  // namespace hypic
