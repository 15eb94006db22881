// RemoteTier on Redis (layout and checks: remote_tier.h).
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "cache/remote_tier.h"
#include "core/bytes.h"
#include "core/hash.h"
#include "core/log.h"
#include "kv/redis.h"

namespace hypic {
namespace {

constexpr char kMagic[8] = {'H', 'Y', 'P', 'R', 'E', 'M', '0', '1'};
constexpr size_t kMaxChunks = size_t(1) << 20;

// magic | n | total | xxh64(all) | xxh64(chunk i)...
struct Manifest {
  uint64_t total = 0, whole = 0;
  std::vector<uint64_t> chunk_sums;
  std::string encode() const {
    std::string s(kMagic, sizeof kMagic);
    put_le(&s, uint64_t(chunk_sums.size()));
    put_le(&s, total);
    put_le(&s, whole);
    for (uint64_t c : chunk_sums) put_le(&s, c);
    return s;
  }
  static bool decode(const std::string& s, Manifest* m) {
    if (s.size() < 32 || std::memcmp(s.data(), kMagic, sizeof kMagic) != 0) return false;
    ByteReader r(std::string_view(s).substr(sizeof kMagic));
    uint64_t n = 0;
    if (!r.get(&n) || n == 0 || n > kMaxChunks || s.size() != 32 + 8 * n) return false;
    r.get(&m->total);
    r.get(&m->whole);
    m->chunk_sums.resize(n);
    for (uint64_t& c : m->chunk_sums) r.get(&c);
    return true;
  }
};

class RedisTier final : public RemoteTier {
 public:
  RedisTier(const RedisTierOptions& o, std::shared_ptr<kv::Redis> r) : opt_(o), redis_(std::move(r)) {
    writer_ = std::thread([this] { write_loop(); });
  }
  ~RedisTier() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    writer_.join();
  }

  Result<SegmentEntry> get(const std::string& key) override {
    const std::string base = base_key(key);
    auto m = redis_->command({"GET", base});
    if (!m) return fail(m.status());
    if (m->nil()) {
      bump(&Stats::misses);
      return not_found("no entry for '" + key + "' in " + describe());
    }
    Manifest man;
    if (m->type != kv::Reply::Type::kString || !Manifest::decode(m->str, &man))
      return reject(base, 0, "its manifest is damaged");
    std::vector<std::string> names(man.chunk_sums.size());
    std::vector<std::vector<std::string_view>> gets;
    for (size_t i = 0; i < names.size(); ++i) {
      names[i] = base + ":" + std::to_string(i);
      gets.push_back({"GET", names[i]});
    }
    auto chunks = redis_->pipeline(gets);
    if (!chunks) return fail(chunks.status());
    std::string bytes;
    bytes.reserve(man.total);
    for (size_t i = 0; i < chunks->size(); ++i) {
      kv::Reply& r = (*chunks)[i];
      if (r.type != kv::Reply::Type::kString) return reject(base, names.size(), "chunk " + std::to_string(i) + " is missing");
      if (Xxh64::hash(r.str.data(), r.str.size()) != man.chunk_sums[i])
        return reject(base, names.size(), "chunk " + std::to_string(i) + " fails its checksum");
      bytes += r.str;
      std::string().swap(r.str);  // freed as it goes: one chunk's bytes twice at most, not the entry's
    }
    if (bytes.size() != man.total || Xxh64::hash(bytes.data(), bytes.size()) != man.whole)
      return reject(base, names.size(), "its chunks do not add up to the entry");
    auto e = deserialize_entry(bytes);
    if (!e) return reject(base, names.size(), e.status().message());
    if (e->key != key) return reject(base, names.size(), "it holds the entry of another key");
    {
      std::lock_guard<std::mutex> l(mu_);
      ++st_.hits;
      st_.bytes_read += bytes.size();
    }
    return e;
  }

  void put(const std::string& key, std::shared_ptr<const SegmentEntry> e) override {
    std::lock_guard<std::mutex> l(mu_);
    if (queue_.size() >= opt_.max_queued) {
      ++st_.put_dropped;
      return;
    }
    queue_.push_back({key, std::move(e)});
    cv_.notify_all();
  }

  bool drain(std::chrono::steady_clock::time_point deadline) override {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_until(l, deadline, [this] { return queue_.empty() && !writing_; });
  }

  Stats stats() const override {
    Stats s;
    {
      std::lock_guard<std::mutex> l(mu_);
      s = st_;
    }
    s.up = redis_->up();
    return s;
  }

  std::string describe() const override { return redis_->describe(); }

 private:
  struct Job {
    std::string key;
    std::shared_ptr<const SegmentEntry> entry;
  };

  static std::string base_key(const std::string& key) {
    return "hypic:e:" + (key.size() == 64 ? key : Sha256::hex(key));
  }
  void bump(uint64_t Stats::*f) {
    std::lock_guard<std::mutex> l(mu_);
    ++(st_.*f);
  }
  Status fail(Status s) {
    bump(&Stats::errors);
    return s;
  }
  Status reject(const std::string& base, size_t chunks, const std::string& why) {
    bump(&Stats::corrupt);
    HYPIC_LOG_WARN("shared tier: dropping %s (it will be rebuilt): %s", base.c_str(), why.c_str());
    std::vector<std::string_view> del = {"DEL", base};
    std::vector<std::string> names;
    for (size_t i = 0; i < chunks; ++i) names.push_back(base + ":" + std::to_string(i));
    for (const std::string& n : names) del.push_back(n);
    (void)redis_->command(del);
    return corrupt("shared tier value " + base + ": " + why);
  }

  Status write(const Job& j) {
    auto bytes = serialize_entry(*j.entry);
    if (!bytes) return bytes.status();
    const std::string base = base_key(j.key);
    Manifest man;
    man.total = bytes->size();
    man.whole = Xxh64::hash(bytes->data(), bytes->size());
    const std::string ttl = std::to_string(opt_.ttl_seconds);
    std::vector<std::string> names;
    for (size_t off = 0; off < bytes->size() || names.empty(); off += opt_.chunk_bytes) {
      const size_t n = std::min(opt_.chunk_bytes, bytes->size() - off);
      man.chunk_sums.push_back(Xxh64::hash(bytes->data() + off, n));
      names.push_back(base + ":" + std::to_string(names.size()));
    }
    // One transaction: all of the entry or none of it (a Redis that is full refuses it whole).
    std::vector<std::vector<std::string_view>> cmds = {{"MULTI"}};
    for (size_t i = 0; i < names.size(); ++i) {
      const size_t off = i * opt_.chunk_bytes;
      std::string_view v(bytes->data() + off, std::min(opt_.chunk_bytes, bytes->size() - off));
      if (opt_.ttl_seconds > 0) cmds.push_back({"SET", names[i], v, "EX", ttl});
      else cmds.push_back({"SET", names[i], v});
    }
    const std::string m = man.encode();
    if (opt_.ttl_seconds > 0) cmds.push_back({"SET", base, m, "EX", ttl});
    else cmds.push_back({"SET", base, m});
    cmds.push_back({"EXEC"});
    auto r = redis_->pipeline(cmds);
    if (!r) return r.status();
    const kv::Reply& exec = r->back();
    bool ok = exec.type == kv::Reply::Type::kArray;
    for (const kv::Reply& x : exec.elements) ok = ok && x.type != kv::Reply::Type::kError;
    if (!ok) {
      std::string why = exec.str;
      for (const kv::Reply& x : *r)
        if (x.type == kv::Reply::Type::kError) why = x.str;
      return Status(StatusCode::kResourceExhausted, "redis refused a write: " + why);
    }
    std::lock_guard<std::mutex> l(mu_);
    ++st_.puts;
    st_.bytes_written += bytes->size();
    return Status::ok();
  }

  void write_loop() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      cv_.wait(l, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      Job j = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
      l.unlock();
      const Status s = write(j);
      if (!s) HYPIC_LOG_DEBUG("shared tier: entry %s not written: %s", j.key.c_str(), s.to_string().c_str());
      j.entry.reset();
      l.lock();
      if (!s) ++st_.put_dropped;
      writing_ = false;
      cv_.notify_all();
    }
  }

  const RedisTierOptions opt_;
  const std::shared_ptr<kv::Redis> redis_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool writing_ = false, stop_ = false;
  Stats st_;
  std::thread writer_;
};

}  // namespace

Result<std::shared_ptr<RemoteTier>> redis_tier(const RedisTierOptions& opt, std::shared_ptr<kv::Redis> redis) {
  if (!redis) return invalid_argument("shared tier: no Redis client");
  if (opt.chunk_bytes < 4096 || opt.chunk_bytes > (size_t(512) << 20))
    return invalid_argument("shared tier: chunk size must be between 4 KiB and 512 MiB");
  return std::shared_ptr<RemoteTier>(std::make_shared<RedisTier>(opt, std::move(redis)));
}

}  // namespace hypic
