// SegmentRecords in Redis (the shared registry; layout: kv/segment_records.h).
#include <algorithm>
#include <cstring>
#include <mutex>
#include <random>

#include "core/bytes.h"
#include "core/hash.h"
#include "core/log.h"
#include "kv/redis.h"
#include "kv/segment_records.h"

namespace hypic {
namespace {

constexpr char kMagic[8] = {'H', 'Y', 'P', 'R', 'E', 'G', '0', '1'};
constexpr char kPrefix[] = "hypic:r:";
constexpr char kEpochKey[] = "hypic:epoch";
constexpr size_t kMaxField = 1 << 16;        // id, salt, model
constexpr uint64_t kMaxTokens = 1ull << 26;  // far above any context
constexpr int64_t kMaxSeam = 1 << 20;

// magic | id | salt | model | seam i64 | created i64 | has_expiry u8 | expires i64 |
// n u64 | n × i32 | XXH64 of everything before it
std::string encode(const SegmentRecord& r) {
  std::string s(kMagic, sizeof kMagic);
  put_bytes(&s, r.id);
  put_bytes(&s, r.salt);
  put_bytes(&s, r.model);
  put_le(&s, int64_t(r.seam));
  put_le(&s, r.created);
  put_le(&s, uint8_t(r.expires_at.has_value()));
  put_le(&s, r.expires_at.value_or(0));
  put_le(&s, uint64_t(r.tokens.size()));
  for (int32_t t : r.tokens) put_le(&s, t);
  put_le(&s, Xxh64::hash(s.data(), s.size()));
  return s;
}

bool decode(std::string_view s, SegmentRecord* r) {
  if (s.size() < sizeof kMagic + 8 || std::memcmp(s.data(), kMagic, sizeof kMagic) != 0) return false;
  const std::string_view body = s.substr(0, s.size() - 8);
  uint64_t sum = 0;
  ByteReader tail(s.substr(body.size()));
  if (!tail.get(&sum) || sum != Xxh64::hash(body.data(), body.size())) return false;
  ByteReader b(body.substr(sizeof kMagic));
  int64_t seam = 0, expires = 0;
  uint8_t has_expiry = 0;
  uint64_t n = 0;
  if (!b.bytes(&r->id, kMaxField) || !b.bytes(&r->salt, kMaxField) || !b.bytes(&r->model, kMaxField) ||
      !b.get(&seam) || !b.get(&r->created) || !b.get(&has_expiry) || !b.get(&expires) || !b.get(&n))
    return false;
  if (seam < 0 || seam > kMaxSeam || has_expiry > 1 || n == 0 || n > kMaxTokens || b.left() != 4 * n) return false;
  r->seam = int(seam);
  if (has_expiry) r->expires_at = expires;
  r->tokens.resize(n);
  for (int32_t& t : r->tokens) b.get(&t);
  return true;
}

class RedisRecords final : public SegmentRecords {
 public:
  explicit RedisRecords(std::shared_ptr<kv::Redis> r) : redis_(std::move(r)) {}

  Status put(const SegmentRecord& r) override {
    {  // the marker exists before any record does, so that losing both is seen
      std::lock_guard<std::mutex> lk(mu_);
      if (epoch_.empty())
        if (Result<bool> f = claim_epoch_locked(); !f) return f.status();
    }
    const std::string key = kPrefix + r.id, value = encode(r);
    std::vector<std::string_view> cmd = {"SET", key, value};
    const std::string at = r.expires_at ? std::to_string(*r.expires_at) : std::string();
    if (r.expires_at) cmd.insert(cmd.end(), {"EXAT", at});  // Redis drops it when the TTL passes
    auto rep = redis_->command(cmd);
    if (!rep) return rep.status().with_context("segment registry " + describe());
    if (rep->type == kv::Reply::Type::kError)
      return Status(StatusCode::kResourceExhausted, "segment registry " + describe() + " refused a write: " + rep->str);
    return Status::ok();
  }

  Status erase(const std::string& id) override {
    auto rep = redis_->command({"DEL", kPrefix + id});
    if (!rep) return rep.status().with_context("segment registry " + describe());
    if (rep->type == kv::Reply::Type::kError)
      return Status(StatusCode::kUnavailable, "segment registry " + describe() + " refused a delete: " + rep->str);
    return Status::ok();
  }

  Result<std::optional<SegmentRecord>> get(const std::string& id, int64_t now) override {
    const std::string key = kPrefix + id;
    auto rep = redis_->command({"GET", key});
    if (!rep) return rep.status().with_context("segment registry " + describe());
    if (rep->type == kv::Reply::Type::kError)
      return Status(StatusCode::kUnavailable, "segment registry " + describe() + ": " + rep->str);
    std::optional<SegmentRecord> out;
    if (rep->nil()) return out;
    SegmentRecord r;
    if (!checked(key, rep->str, &r)) return out;
    if (r.expires_at && *r.expires_at <= now) return out;
    out = std::move(r);
    return out;
  }

  Result<std::vector<SegmentRecord>> load(const std::string& model, int64_t now) override {
    std::vector<SegmentRecord> out;
    std::string cursor = "0";
    const std::string match = std::string(kPrefix) + "*";
    do {
      auto scan = redis_->command({"SCAN", cursor, "MATCH", match, "COUNT", "1000"});
      if (!scan) return scan.status().with_context("segment registry " + describe());
      if (scan->type != kv::Reply::Type::kArray || scan->elements.size() != 2)
        return Status(StatusCode::kUnavailable, "segment registry " + describe() + ": SCAN answered " +
                                                    (scan->type == kv::Reply::Type::kError ? scan->str : "something else"));
      cursor = scan->elements[0].str;
      std::vector<std::vector<std::string_view>> gets;
      for (const kv::Reply& k : scan->elements[1].elements) gets.push_back({"GET", k.str});
      if (gets.empty()) continue;
      auto vals = redis_->pipeline(gets);
      if (!vals) return vals.status().with_context("segment registry " + describe());
      for (size_t i = 0; i < vals->size(); ++i) {
        SegmentRecord r;
        const kv::Reply& v = (*vals)[i];
        if (v.type != kv::Reply::Type::kString || !checked(std::string(gets[i][1]), v.str, &r)) continue;
        if (r.model == model && (!r.expires_at || *r.expires_at > now)) out.push_back(std::move(r));
      }
    } while (cursor != "0");
    std::stable_sort(out.begin(), out.end(),
                     [](const SegmentRecord& a, const SegmentRecord& b) { return a.created < b.created; });
    return out;
  }

  bool shared() const override { return true; }
  std::string describe() const override { return redis_->describe(); }

  Result<bool> forgot() override {
    std::lock_guard<std::mutex> lk(mu_);
    auto rep = redis_->command({"GET", kEpochKey});
    if (!rep) return rep.status().with_context("segment registry " + describe());
    if (rep->type == kv::Reply::Type::kString && !epoch_.empty() && rep->str == epoch_) return false;
    return claim_epoch_locked();
  }

 private:
  // Sets the marker unless another process did, and adopts the value there; true when this
  // process had adopted another before (the store forgot it).
  Result<bool> claim_epoch_locked() {
    std::random_device rd;
    std::string fresh;
    for (int i = 0; i < 4; ++i) fresh += std::to_string(rd()) + ".";
    std::vector<std::vector<std::string_view>> cmds = {{"SET", kEpochKey, fresh, "NX"}, {"GET", kEpochKey}};
    auto reps = redis_->pipeline(cmds);
    if (!reps) return reps.status().with_context("segment registry " + describe());
    const kv::Reply& got = (*reps)[1];
    if (got.type != kv::Reply::Type::kString)
      return Status(StatusCode::kUnavailable, "segment registry " + describe() + ": cannot read " + kEpochKey +
                                                  (got.type == kv::Reply::Type::kError ? ": " + got.str : ""));
    const bool had = !epoch_.empty();
    epoch_ = got.str;
    return had;
  }


  // Decodes `value` of `key`; a damaged one (or one filed under another id) is deleted.
  bool checked(const std::string& key, const std::string& value, SegmentRecord* r) {
    if (decode(value, r) && kPrefix + r->id == key) return true;
    HYPIC_LOG_WARN("segment registry %s: dropping %s: a damaged record", describe().c_str(), key.c_str());
    (void)redis_->command({"DEL", key});
    return false;
  }

  const std::shared_ptr<kv::Redis> redis_;
  std::mutex mu_;
  std::string epoch_;  // the marker's value last seen (guarded by mu_); empty: not yet
};

}  // namespace

std::unique_ptr<SegmentRecords> open_redis_records(std::shared_ptr<kv::Redis> redis) {
  return std::make_unique<RedisRecords>(std::move(redis));
}

}  // namespace hypic
