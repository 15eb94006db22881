// SegmentStore: the memory tier (GDSF eviction, pins, spilling) and the operations.
#include "cache/segment_store_impl.h"

namespace hypic {

using namespace store_detail;

std::string SegmentStore::Impl::path_of_stem(const std::string& stem) const {
  return (fs::path(opt.disk_dir) / (stem + kSuffix)).string();
}

void SegmentStore::Impl::check_locked() const {
  HYPIC_CHECK(st.mem_bytes <= opt.mem_budget_bytes,
              "segment store over its memory budget: " + std::to_string(st.mem_bytes) + " > " +
                  std::to_string(opt.mem_budget_bytes));
  HYPIC_CHECK(st.pinned_bytes <= st.mem_bytes);
  HYPIC_CHECK(opt.disk_budget_bytes == 0 || st.disk_bytes <= opt.disk_budget_bytes,
              "segment store over its disk budget: " + std::to_string(st.disk_bytes));
}

void SegmentStore::Impl::recount_locked() const {
  size_t mb = 0, pb = 0, spill = 0;
  for (const auto& [k, e] : mem) {
    HYPIC_CHECK(e.bytes == e.data->bytes(), k);
    mb += e.bytes;
    if (e.pinned) pb += e.bytes;
    if (e.spilling) ++spill;
    HYPIC_CHECK(e.spilling != bool(prio.count({e.h, e.tick, k})), k);
  }
  HYPIC_CHECK(prio.size() + spill == mem.size());
  HYPIC_CHECK(spill <= spilling_count);  // jobs of erased entries may still be writing
  HYPIC_CHECK(mb == st.mem_bytes && mem.size() == st.mem_entries && pb == st.pinned_bytes,
              "memory totals " + std::to_string(st.mem_bytes) + " / " +
                  std::to_string(st.pinned_bytes) + " recount to " + std::to_string(mb) +
                  " / " + std::to_string(pb));
  size_t db = 0, wc = 0, wb = 0;
  for (const auto& [s, d] : disk) {
    db += d.bytes;
    if (d.writing) ++wc, wb += d.bytes;
    HYPIC_CHECK(d.writing != bool(disk_lru.count({d.tick, s})), s);
  }
  HYPIC_CHECK(db == st.disk_bytes && wc == writing_count && wb == writing_bytes &&
              disk.size() - wc == st.disk_entries);
  check_locked();
}

double SegmentStore::Impl::priority(const MemEntry& e) const {
  return clock + double(e.freq) * e.cost / double(std::max<size_t>(e.bytes, 1));
}

void SegmentStore::Impl::touch_locked(const std::string& key, MemEntry& e) {
  if (!e.spilling) prio.erase({e.h, e.tick, key});
  ++e.freq;
  e.tick = ++tick;
  e.h = priority(e);
  if (!e.spilling) prio.insert({e.h, e.tick, key});
}

auto SegmentStore::Impl::pin_locked(const std::string& key, MemEntry& e) -> Pin {
  if (Pin p = e.handle.lock()) return p;
  // No live handle (never pinned, or the last Pin is being released right now: its
  // release sees a newer generation and does nothing).
  e.pin_gen = ++gen;
  if (!e.pinned) {
    e.pinned = true;
    st.pinned_bytes += e.bytes;
  }
  Pin p(e.data.get(), PinRelease{weak_from_this(), key, e.pin_gen, e.data});
  e.handle = p;
  return p;
}

void SegmentStore::Impl::unpin(const std::string& key, uint64_t pin_gen) {
  std::lock_guard<std::mutex> lk(mu);
  auto it = mem.find(key);
  if (it == mem.end() || !it->second.pinned || it->second.pin_gen != pin_gen) return;
  it->second.pinned = false;
  st.pinned_bytes -= it->second.bytes;
  check_locked();
}

void SegmentStore::Impl::remove_mem_locked(std::unordered_map<std::string, MemEntry>::iterator it,
                                           Trash& trash) {
  MemEntry& e = it->second;
  if (!e.spilling) prio.erase({e.h, e.tick, it->first});
  st.mem_bytes -= e.bytes;
  if (e.pinned) st.pinned_bytes -= e.bytes;
  trash.push_back(std::move(e.data));
  mem.erase(it);
  st.mem_entries = mem.size();
}

double SegmentStore::Impl::estimate_cost(size_t bytes) const {
  const double per_byte =
      cost_bytes_seen > 0 ? cost_seconds_seen / cost_bytes_seen : kDefaultSecondsPerByte;
  return per_byte * double(bytes);
}

auto SegmentStore::Impl::admit(std::unique_lock<std::mutex>& lk, const std::string& key, Data data,
                               size_t bytes, double cost, uint64_t freq, Trash& trash) -> Pin {
  for (int round = 0; round < kMaxAdmitRounds; ++round) {
    if (auto it = mem.find(key); it != mem.end()) {  // another thread's copy won
      trash.push_back(std::move(data));
      return pin_locked(it->first, it->second);
    }
    if (bytes > opt.mem_budget_bytes) break;
    if (st.mem_bytes + bytes <= opt.mem_budget_bytes) {
      MemEntry& e = mem[key];
      e.data = std::move(data);
      e.bytes = bytes;
      e.cost = cost;
      e.freq = freq;
      e.tick = ++tick;
      e.id = ++gen;
      e.h = priority(e);
      prio.insert({e.h, e.tick, key});
      st.mem_bytes += bytes;
      st.mem_entries = mem.size();
      Pin p = pin_locked(key, e);
      check_locked();
      return p;
    }
    // Victims, lowest priority first, until the new entry fits.
    size_t room = opt.mem_budget_bytes - st.mem_bytes;
    std::vector<std::string> victims;
    for (const auto& [h, t, k] : prio) {
      if (room >= bytes) break;
      const MemEntry& v = mem.at(k);
      if (v.pinned) continue;
      victims.push_back(k);
      room += v.bytes;
    }
    if (room < bytes) {
      if (spilling_count == 0) break;  // only pinned entries stand in the way
      cv.wait(lk);                     // others' spills will free memory
      continue;
    }
    struct Job {
      std::string key, stem;
      uint64_t id, version;
      Data data;
      Status status;
      size_t size = 0;
    };
    std::vector<Job> jobs;
    for (const std::string& k : victims) {
      auto it = mem.find(k);
      MemEntry& v = it->second;
      clock = std::max(clock, v.h);
      const std::string stem = disk_on ? stem_of(k) : std::string();
      if (disk_on && reserve_disk_locked(stem, file_size_bound(*v.data), v.cost, v.freq) ==
                         Reserve::kReserved) {
        prio.erase({v.h, v.tick, k});
        v.spilling = true;
        ++spilling_count;
        jobs.push_back({k, stem, v.id, disk.at(stem).version, v.data, {}, 0});
      } else {  // already on disk, no disk tier, or no room there: just drop it
        ++st.evictions;
        remove_mem_locked(it, trash);
      }
    }
    check_locked();
    if (jobs.empty()) continue;
    lk.unlock();
    for (Job& j : jobs) write_file(j.stem, *j.data, &j.status, &j.size);
    lk.lock();
    for (Job& j : jobs) {
      finish_write_locked(j.stem, j.version, j.status.is_ok(), j.size);
      if (j.status.is_ok()) ++st.spills;
      --spilling_count;
      auto it = mem.find(j.key);
      if (it == mem.end() || it->second.id != j.id) continue;  // erased meanwhile
      MemEntry& v = it->second;
      v.spilling = false;
      if (v.pinned) {  // used again while it was being written: it stays
        prio.insert({v.h, v.tick, j.key});
      } else {
        ++st.evictions;
        remove_mem_locked(it, trash);
      }
    }
    cv.notify_all();
    check_locked();
  }
  ++st.rejected;
  if (disk_on) {
    const std::string stem = stem_of(key);
    if (reserve_disk_locked(stem, file_size_bound(*data), cost, freq) == Reserve::kReserved) {
      const uint64_t version = disk.at(stem).version;
      Status s;
      size_t size = 0;
      lk.unlock();
      write_file(stem, *data, &s, &size);
      lk.lock();
      finish_write_locked(stem, version, s.is_ok(), size);
      if (s.is_ok()) ++st.spills;
    }
  }
  check_locked();
  return Pin(std::move(data));
}

auto SegmentStore::Impl::lookup(const std::string& key) -> Pin {
  Pin out;  // declared before the lock: Pins and entries are released after unlocking
  std::shared_ptr<Inflight> fl;
  Trash trash;
  std::unique_lock<std::mutex> lk(mu);
  if (auto it = mem.find(key); it != mem.end()) {
    touch_locked(key, it->second);
    ++st.hits_mem;
    out = pin_locked(key, it->second);
    return out;
  }
  if (auto it = loading.find(key); it != loading.end()) {
    fl = it->second;
    cv.wait(lk, [&] { return fl->done; });
    out = fl->result;
    ++(out ? st.hits_disk : st.misses);
    return out;
  }
  const std::string stem = disk_on ? stem_of(key) : std::string();
  auto dit = disk_on ? disk.find(stem) : disk.end();
  if (dit == disk.end() || dit->second.writing) {
    if (opt.remote) return lookup_remote(lk, key, trash);
    ++st.misses;
    return out;
  }
  DiskEntry& d = dit->second;
  touch_file_locked(stem, d);
  const uint64_t version = d.version, freq = d.freq;
  const double cost = d.cost;
  fl = std::make_shared<Inflight>();
  loading[key] = fl;

  const std::string path = path_of_stem(stem);
  ++st.disk_reads;  // under the lock still
  lk.unlock();
  Result<SegmentEntry> r = load_entry(path);
  Status s = r.status();
  if (s.is_ok() && r->key != key)
    s = corrupt("'" + path + "' holds the entry of key '" + r->key + "', not '" + key + "'");
  Data data;
  size_t bytes = 0;
  if (s.is_ok()) {
    data = std::make_shared<const SegmentEntry>(std::move(r).value());
    bytes = data->bytes();
  }

  lk.lock();
  auto cur = disk.find(stem);
  const bool same_file = cur != disk.end() && cur->second.version == version;
  if (!s.is_ok()) {
    if (s.code() != StatusCode::kNotFound) {
      ++st.corrupt_dropped;
      HYPIC_LOG_WARN("segment store: dropping a damaged cache file (it will be recomputed): %s",
                     s.message().c_str());
    }
    if (same_file) drop_file_locked(cur);
    ++st.misses;
  } else {
    ++st.hits_disk;
    if (fl->cancelled) {  // erased while loading: the caller gets it, the store forgets it
      out = Pin(std::move(data));
    } else {
      out = admit(lk, key, std::move(data), bytes, cost >= 0 ? cost : estimate_cost(bytes),
                  freq + 1, trash);
    }
  }
  finish_load(key, fl, out);
  return out;
}

void SegmentStore::Impl::finish_load(const std::string& key, const std::shared_ptr<Inflight>& fl, const Pin& out) {
  fl->done = true;
  fl->result = out;
  if (auto it = loading.find(key); it != loading.end() && it->second == fl) loading.erase(it);
  cv.notify_all();
  check_locked();
}

auto SegmentStore::Impl::lookup_remote(std::unique_lock<std::mutex>& lk, const std::string& key,
                                       Trash& trash) -> Pin {
  auto fl = std::make_shared<Inflight>();
  loading[key] = fl;
  lk.unlock();
  const auto t0 = std::chrono::steady_clock::now();
  Result<SegmentEntry> r = opt.remote->get(key);  // verified: checksums and key
  Data data;
  if (r) data = std::make_shared<const SegmentEntry>(std::move(r).value());
  HYPIC_LOG_DEBUG("shared tier: %s %s in %.1f ms", r ? "fetched" : "no", key.substr(0, 16).c_str(),
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  lk.lock();
  Pin out;
  if (!data) {
    ++st.misses;
  } else {
    ++st.hits_remote;
    const size_t bytes = data->bytes();
    out = fl->cancelled ? Pin(std::move(data))
                        : admit(lk, key, std::move(data), bytes, estimate_cost(bytes), 1, trash);
  }
  finish_load(key, fl, out);
  return out;
}

auto SegmentStore::Impl::insert(const std::string& key, SegmentEntry&& e, double cost) -> Pin {
  HYPIC_CHECK(std::isfinite(cost) && cost >= 0, "recompute cost must be a finite number >= 0");
  if (e.key.empty()) e.key = key;
  HYPIC_CHECK(e.key == key, "entry key '" + e.key + "' inserted as '" + key + "'");
  const size_t bytes = e.bytes();
  Data data = std::make_shared<const SegmentEntry>(std::move(e));
  Pin out;
  Trash trash;
  std::unique_lock<std::mutex> lk(mu);
  cost_seconds_seen += cost;
  cost_bytes_seen += double(bytes);
  out = admit(lk, key, std::move(data), bytes, cost, 1, trash);
  lk.unlock();
  if (opt.remote) opt.remote->put(key, out);  // queued: the caller does not wait
  return out;
}

bool SegmentStore::Impl::erase_locked(const std::string& key, Trash& trash) {
  bool found = false;
  if (auto it = mem.find(key); it != mem.end()) {
    remove_mem_locked(it, trash);
    found = true;
  }
  if (auto it = loading.find(key); it != loading.end()) it->second->cancelled = true;
  if (disk_on) {
    if (auto it = disk.find(stem_of(key)); it != disk.end()) {
      if (it->second.writing)
        it->second.doomed = true;
      else
        drop_file_locked(it);
      found = true;
    }
  }
  return found;
}

bool SegmentStore::Impl::erase(const std::string& key) {
  Trash trash;
  std::lock_guard<std::mutex> lk(mu);
  const bool found = erase_locked(key, trash);
  check_locked();
  return found;
}

void SegmentStore::Impl::clear() {
  Trash trash;
  std::lock_guard<std::mutex> lk(mu);
  while (!mem.empty()) remove_mem_locked(mem.begin(), trash);
  for (auto& [k, f] : loading) f->cancelled = true;
  for (auto it = disk.begin(); it != disk.end();) {
    auto next = std::next(it);
    if (it->second.writing)
      it->second.doomed = true;
    else
      drop_file_locked(it);
    it = next;
  }
  check_locked();
}

// ---------------------------------------------------------------------------------------

SegmentStore::SegmentStore(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
SegmentStore::~SegmentStore() = default;

Result<std::unique_ptr<SegmentStore>> SegmentStore::open(const Options& opt) {
  auto impl = std::make_shared<Impl>();
  impl->opt = opt;
  impl->disk_on = !opt.disk_dir.empty();
  if (impl->disk_on) HYPIC_RETURN_IF_ERROR(impl->scan_dir());
  return std::unique_ptr<SegmentStore>(new SegmentStore(std::move(impl)));
}

SegmentStore::Pin SegmentStore::lookup(const std::string& key) { return impl_->lookup(key); }

SegmentStore::Pin SegmentStore::insert(const std::string& key, SegmentEntry&& e,
                                       double recompute_cost_seconds) {
  return impl_->insert(key, std::move(e), recompute_cost_seconds);
}

bool SegmentStore::erase(const std::string& key) { return impl_->erase(key); }
void SegmentStore::clear() { impl_->clear(); }

size_t SegmentStore::shed_disk(size_t bytes) { return impl_->disk_on ? impl_->shed(bytes) : 0; }

SegmentStore::Stats SegmentStore::stats() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->st;
}

const SegmentStore::Options& SegmentStore::options() const { return impl_->opt; }

bool SegmentStore::in_memory(const std::string& key) const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->mem.count(key) > 0;
}

bool SegmentStore::on_disk(const std::string& key) const {
  if (!impl_->disk_on) return false;
  std::lock_guard<std::mutex> lk(impl_->mu);
  auto it = impl_->disk.find(stem_of(key));
  return it != impl_->disk.end() && !it->second.writing;
}

void SegmentStore::check_invariants() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  impl_->recount_locked();
}

std::string SegmentStore::file_path(const std::string& key) const {
  return impl_->disk_on ? impl_->path_of_stem(stem_of(key)) : std::string();
}

}  // namespace hypic
