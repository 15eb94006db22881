// SegmentRegistry stepped through time: tenant isolation, caps, expiry, delete.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <set>

#include "server/jobs.h"
#include "server/segment_registry.h"

namespace hypic::server {
namespace {

using Clock = SegmentRegistry::Clock;
using std::chrono::seconds;

SegmentRegistry::Ptr make(const std::string& salt, size_t bytes, Clock::time_point now,
                          std::optional<int> ttl = std::nullopt) {
  auto s = std::make_shared<RegisteredSegment>();
  s->id = SegmentRegistry::new_id();
  s->salt = salt;
  s->tokens = {1, 2, 3};
  s->bytes = bytes;
  if (ttl) {
    s->expires_at = 1000 + *ttl;
    s->deadline = now + seconds(*ttl);
  }
  return s;
}

SegmentRegistry::Options opts(size_t max_bytes, int max_segments,
                              std::shared_ptr<SegmentRecords> records = nullptr) {
  SegmentRegistry::Options o;
  o.max_bytes = max_bytes;
  o.max_segments = max_segments;
  o.records = std::move(records);
  o.model = "model-A";
  return o;
}

using Erased = SegmentRegistry::Erased;

TEST(SegmentRegistry, IdsAreRandomAndWellFormed) {
  std::set<std::string> ids;
  for (int i = 0; i < 200; ++i) {
    const std::string id = SegmentRegistry::new_id();
    ASSERT_EQ(id.size(), 4u + 32u);
    ASSERT_EQ(id.rfind("seg_", 0), 0u);
    for (size_t k = 4; k < id.size(); ++k) ASSERT_TRUE(std::isxdigit(uint8_t(id[k])) && !std::isupper(uint8_t(id[k])));
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 200u);
}

TEST(SegmentRegistry, TenantsAreIsolatedAndDeleteIsOnce) {
  SegmentRegistry reg(opts(1000, 10));
  const auto t0 = Clock::now();
  auto a = make("A", 10, t0), b = make("B", 20, t0), c = make("A", 30, t0);
  ASSERT_EQ(reg.add(a, t0), SegmentRegistry::Admit::kOk);
  ASSERT_EQ(reg.add(b, t0), SegmentRegistry::Admit::kOk);
  ASSERT_EQ(reg.add(c, t0), SegmentRegistry::Admit::kOk);
  EXPECT_EQ(reg.find(a->id, "A", t0), a);
  EXPECT_EQ(reg.find(a->id, "B", t0), nullptr);  // another tenant: as if unknown
  EXPECT_EQ(reg.find(a->id, "", t0), nullptr);
  EXPECT_EQ(reg.find("seg_nope", "A", t0), nullptr);
  auto la = reg.list("A", t0);
  ASSERT_EQ(la.size(), 2u);
  EXPECT_EQ(la[0], a);  // oldest first
  EXPECT_EQ(la[1], c);
  EXPECT_EQ(reg.list("B", t0).size(), 1u);
  EXPECT_TRUE(reg.list("", t0).empty());
  EXPECT_EQ(reg.erase(a->id, "B", t0), Erased::kUnknown);  // B cannot delete A's
  EXPECT_EQ(reg.totals(t0).count, 3u);
  EXPECT_EQ(reg.erase(a->id, "A", t0), Erased::kOk);
  EXPECT_EQ(reg.erase(a->id, "A", t0), Erased::kUnknown);  // twice: gone
  EXPECT_EQ(reg.totals(t0).count, 2u);
  EXPECT_EQ(reg.totals(t0).bytes, 50u);
  EXPECT_EQ(a->tokens.size(), 3u);  // a caller's copy stays valid after the erase
}

TEST(SegmentRegistry, CapsOnCountAndBytes) {
  SegmentRegistry reg(opts(100, 3));
  const auto t0 = Clock::now();
  EXPECT_EQ(reg.add(make("", 60, t0), t0), SegmentRegistry::Admit::kOk);
  EXPECT_EQ(reg.would_admit(41, t0), SegmentRegistry::Admit::kTooManyBytes);
  EXPECT_EQ(reg.add(make("", 41, t0), t0), SegmentRegistry::Admit::kTooManyBytes);
  EXPECT_EQ(reg.add(make("", 40, t0), t0), SegmentRegistry::Admit::kOk);
  EXPECT_EQ(reg.add(make("", 0, t0), t0), SegmentRegistry::Admit::kOk);
  EXPECT_EQ(reg.add(make("", 0, t0), t0), SegmentRegistry::Admit::kTooMany);
  EXPECT_EQ(reg.add(make("", size_t(-1), t0), t0), SegmentRegistry::Admit::kTooMany);
  EXPECT_EQ(reg.totals(t0).count, 3u);
  EXPECT_EQ(reg.totals(t0).bytes, 100u);
  SegmentRegistry big(opts(100, 3));
  EXPECT_EQ(big.add(make("", size_t(-1), t0), t0), SegmentRegistry::Admit::kTooManyBytes);  // no overflow
}

TEST(SegmentRegistry, ExpiryIsLazyAndSweepReportsIt) {
  SegmentRegistry reg(opts(100, 2));
  const auto t0 = Clock::now();
  auto short_lived = make("", 60, t0, 5);
  auto forever = make("", 10, t0);
  ASSERT_EQ(reg.add(short_lived, t0), SegmentRegistry::Admit::kOk);
  ASSERT_EQ(reg.add(forever, t0), SegmentRegistry::Admit::kOk);
  EXPECT_EQ(reg.find(short_lived->id, "", t0 + seconds(4)), short_lived);
  EXPECT_EQ(reg.add(make("", 0, t0), t0 + seconds(4)), SegmentRegistry::Admit::kTooMany);
  // At the deadline it is gone for every method, and its bytes are free again.
  EXPECT_EQ(reg.find(short_lived->id, "", t0 + seconds(5)), nullptr);
  EXPECT_EQ(reg.totals(t0 + seconds(5)).bytes, 10u);
  EXPECT_EQ(reg.add(make("", 90, t0), t0 + seconds(5)), SegmentRegistry::Admit::kOk);
  EXPECT_EQ(reg.find(forever->id, "", t0 + seconds(1000000)), forever);

  SegmentRegistry reg2(opts(100, 10));
  auto e = make("x", 1, t0, 1);
  ASSERT_EQ(reg2.add(e, t0), SegmentRegistry::Admit::kOk);
  EXPECT_TRUE(reg2.sweep(t0).empty());
  const auto gone = reg2.sweep(t0 + seconds(2));
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0], e->id);
  EXPECT_EQ(reg2.erase(e->id, "x", t0 + seconds(2)), Erased::kUnknown);
}

// Records in memory, with a switch that makes every call fail (a full or broken disk, Redis
// down); `is_shared` plays the shared registry of several instances.
class MemRecords final : public SegmentRecords {
 public:
  bool broken = false, is_shared = false;
  int full = 0;  // writes fail for lack of space while > 0 (make_room lowers it)
  int epoch = 0, seen_epoch = 0;  // ++epoch: the store forgot everything (a Redis restarted empty)
  int writes_refused = 0;
  std::map<std::string, SegmentRecord> rows;
  Status put(const SegmentRecord& r) override {
    if (Status s = check_write(); !s) return s;
    rows[r.id] = r;
    return Status::ok();
  }
  Status erase(const std::string& id) override {
    if (Status s = check_write(); !s) return s;
    rows.erase(id);
    return Status::ok();
  }
  Result<std::vector<SegmentRecord>> load(const std::string& model, int64_t) override {
    if (broken) return io_error("down");
    std::vector<SegmentRecord> out;
    for (const auto& [id, r] : rows)
      if (r.model == model) out.push_back(r);
    return out;
  }
  Result<std::optional<SegmentRecord>> get(const std::string& id, int64_t) override {
    if (broken) return io_error("down");
    auto it = rows.find(id);
    return it == rows.end() ? std::optional<SegmentRecord>() : std::optional<SegmentRecord>(it->second);
  }
  bool shared() const override { return is_shared; }
  std::string describe() const override { return "memory"; }
  Result<bool> forgot() override {
    if (broken) return io_error("down");
    const bool f = seen_epoch != epoch;
    seen_epoch = epoch;
    return f;
  }

 private:
  Status check_write() {
    if (broken) return io_error("disk broken");
    if (full > 0) {
      ++writes_refused;
      return Status(StatusCode::kResourceExhausted, "disk full");
    }
    return Status::ok();
  }
};

TEST(SegmentRegistry, SharedRecordsMakeEveryInstancesIdsResolvable) {
  auto rec = std::make_shared<MemRecords>();
  rec->is_shared = true;
  SegmentRegistry a(opts(1000, 10, rec)), b(opts(1000, 10, rec));
  auto other_model = opts(1000, 10, rec);
  other_model.model = "model-B";
  SegmentRegistry c(other_model);
  const auto t0 = Clock::now();
  auto s = make("T", 10, t0), t = make("T", 10, t0);
  ASSERT_EQ(a.add(s, t0), SegmentRegistry::Admit::kOk);
  ASSERT_EQ(b.add(t, t0), SegmentRegistry::Admit::kOk);

  // B resolves A's id from the records (the tokens, no pin), only for the same tenant and model.
  auto via_b = b.find(s->id, "T", t0);
  ASSERT_NE(via_b, nullptr);
  EXPECT_EQ(via_b->tokens, s->tokens);
  EXPECT_EQ(via_b->pin, nullptr);
  EXPECT_EQ(b.find(s->id, "other", t0), nullptr);
  EXPECT_EQ(c.find(s->id, "T", t0), nullptr);
  EXPECT_EQ(b.totals(t0).count, 1u);  // B holds only its own
  // Either instance lists both, oldest first.
  const auto listed = b.list("T", t0);
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(a.list("other", t0).size(), 0u);

  // The records do not answer: each instance serves what it holds and cannot delete.
  rec->broken = true;
  Status down;
  EXPECT_EQ(a.find(s->id, "T", t0, &down), s);
  EXPECT_TRUE(down.is_ok());
  EXPECT_EQ(a.find(t->id, "T", t0, &down), nullptr);
  EXPECT_FALSE(down.is_ok()) << "not held here and the records do not answer: unavailable, not unknown";
  EXPECT_EQ(a.list("T", t0).size(), 1u);
  Status why;
  EXPECT_EQ(b.erase(s->id, "T", t0, &why), Erased::kUnavailable);
  EXPECT_FALSE(why.is_ok());
  rec->broken = false;

  // B deletes A's registration: A stops answering it and drops its pin.
  EXPECT_EQ(b.erase(s->id, "other", t0), Erased::kUnknown);
  EXPECT_EQ(b.erase(s->id, "T", t0), Erased::kOk);
  EXPECT_EQ(rec->rows.count(s->id), 0u);
  EXPECT_EQ(a.find(s->id, "T", t0), nullptr);
  EXPECT_EQ(a.totals(t0).count, 0u);
  EXPECT_EQ(b.erase(s->id, "T", t0), Erased::kUnknown);

  // Ids deleted elsewhere give their room back when the caps would refuse a registration.
  SegmentRegistry small(opts(25, 10, rec));
  auto u = make("T", 10, t0), v = make("T", 10, t0), w = make("T", 10, t0);
  ASSERT_EQ(small.add(u, t0), SegmentRegistry::Admit::kOk);
  ASSERT_EQ(small.add(v, t0), SegmentRegistry::Admit::kOk);
  EXPECT_EQ(small.would_admit(10, t0), SegmentRegistry::Admit::kTooManyBytes);
  EXPECT_EQ(a.erase(u->id, "T", t0), Erased::kOk);  // through another instance
  EXPECT_EQ(small.totals(t0).bytes, 20u);
  EXPECT_EQ(small.add(w, t0), SegmentRegistry::Admit::kOk);
  EXPECT_EQ(small.totals(t0).count, 2u);
}

TEST(SegmentRegistry, RegistrationsAreRecordedAndAFailedRecordChangesNothing) {
  auto rec = std::make_shared<MemRecords>();
  SegmentRegistry reg(opts(1000, 10, rec));
  const auto t0 = Clock::now();
  auto a = make("A", 10, t0, 5), b = make("B", 20, t0);
  ASSERT_EQ(reg.add(a, t0), SegmentRegistry::Admit::kOk);
  ASSERT_EQ(reg.add(b, t0), SegmentRegistry::Admit::kOk);
  ASSERT_EQ(rec->rows.size(), 2u);
  const SegmentRecord& ra = rec->rows.at(a->id);
  EXPECT_EQ(ra.salt, "A");
  EXPECT_EQ(ra.model, "model-A");
  EXPECT_EQ(ra.tokens, a->tokens);
  EXPECT_EQ(ra.expires_at, a->expires_at);
  EXPECT_FALSE(rec->rows.at(b->id).expires_at.has_value());

  // A restored registration is not written again.
  auto c = make("A", 1, t0);
  ASSERT_EQ(reg.add(c, t0, nullptr, /*restored=*/true), SegmentRegistry::Admit::kOk);
  EXPECT_EQ(rec->rows.count(c->id), 0u);

  // The records' storage fails: no registration, no deletion, and it says why.
  rec->broken = true;
  Status why;
  auto d = make("A", 10, t0);
  EXPECT_EQ(reg.add(d, t0, &why), SegmentRegistry::Admit::kUnavailable);
  EXPECT_FALSE(why.is_ok());
  EXPECT_EQ(reg.find(d->id, "A", t0), nullptr);
  EXPECT_EQ(reg.totals(t0).count, 3u);
  EXPECT_EQ(reg.totals(t0).bytes, 31u);
  EXPECT_EQ(reg.erase(b->id, "B", t0, &why), Erased::kUnavailable);
  EXPECT_EQ(reg.find(b->id, "B", t0), b);
  rec->broken = false;

  EXPECT_EQ(reg.erase(b->id, "B", t0), Erased::kOk);
  EXPECT_EQ(rec->rows.count(b->id), 0u);
  // Expiry deletes the record.
  EXPECT_EQ(reg.sweep(t0 + seconds(6)), std::vector<std::string>{a->id});
  EXPECT_TRUE(rec->rows.empty());
}

TEST(SegmentRegistry, AFullDiskIsRetriedWhileRoomCanBeMadeAndThenChangesNothing) {
  auto rec = std::make_shared<MemRecords>();
  int files = 2;  // what make_room can still delete
  int room_calls = 0;
  SegmentRegistry::Options o = opts(1000, 10, rec);
  o.make_room = [&]() -> size_t {
    ++room_calls;
    if (files == 0) return 0;
    --files;
    --rec->full;
    return 4096;
  };
  SegmentRegistry reg(o);
  const auto t0 = Clock::now();
  // Two deletions make room for the write.
  rec->full = 2;
  auto a = make("A", 10, t0);
  Status why;
  ASSERT_EQ(reg.add(a, t0, &why), SegmentRegistry::Admit::kOk) << why.to_string();
  EXPECT_EQ(rec->writes_refused, 2);
  EXPECT_EQ(room_calls, 2);
  EXPECT_EQ(rec->rows.count(a->id), 1u);

  // Nothing left to delete: refused, nothing registered, and the error says the storage is full.
  rec->full = 1;
  auto b = make("A", 10, t0);
  EXPECT_EQ(reg.add(b, t0, &why), SegmentRegistry::Admit::kUnavailable);
  EXPECT_EQ(why.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(reg.find(b->id, "A", t0), nullptr);
  EXPECT_EQ(rec->rows.count(b->id), 0u);
  EXPECT_EQ(reg.totals(t0).count, 1u);
  const api::ApiError e = *capacity_error(reg, SegmentRegistry::Admit::kUnavailable, 10, why);
  EXPECT_EQ(e.http_status, 507);
  EXPECT_EQ(e.code, "insufficient_storage");
  EXPECT_NE(e.message.find("--cache-dir"), std::string::npos) << e.message;
  Status erase_why;
  EXPECT_EQ(reg.erase(a->id, "A", t0, &erase_why), Erased::kUnavailable);
  EXPECT_EQ(record_write_error(erase_why, "deleted").http_status, 507);
  EXPECT_EQ(reg.find(a->id, "A", t0), a);  // still registered, still recorded
  EXPECT_EQ(rec->rows.count(a->id), 1u);
  // Another failure is a 503, as before.
  EXPECT_EQ(record_write_error(io_error("EIO"), "deleted").http_status, 503);

  // Space returns (someone freed it): writes work again without a restart.
  rec->full = 0;
  EXPECT_EQ(reg.add(b, t0), SegmentRegistry::Admit::kOk);
  EXPECT_EQ(reg.erase(a->id, "A", t0), Erased::kOk);
  EXPECT_EQ(rec->rows.count(a->id), 0u);
}

TEST(SegmentRegistry, RecordsTheSharedStoreForgotAreWrittenAgainNotTakenForDeletions) {
  auto rec = std::make_shared<MemRecords>();
  rec->is_shared = true;
  SegmentRegistry a(opts(1000, 10, rec));
  const auto t0 = Clock::now();
  auto s = make("T", 10, t0), t = make("U", 10, t0), gone = make("T", 10, t0, 5);
  for (const auto& p : {s, t, gone}) ASSERT_EQ(a.add(p, t0), SegmentRegistry::Admit::kOk);
  EXPECT_FALSE(a.republish_if_forgotten(t0));  // nothing forgotten

  // The store forgets everything: a lookup writes this instance's registrations back (the
  // expired one excepted) instead of dropping the one it looked up.
  rec->rows.clear();
  ++rec->epoch;
  const auto t1 = t0 + seconds(6);
  EXPECT_EQ(a.find(s->id, "T", t1), s);
  EXPECT_EQ(rec->rows.size(), 2u);
  EXPECT_EQ(rec->rows.count(t->id), 1u);
  EXPECT_EQ(rec->rows.at(s->id).tokens, s->tokens);
  EXPECT_EQ(a.totals(t1).store_forgot, 1u);
  EXPECT_EQ(a.totals(t1).republished, 2u);

  // A record absent without the store forgetting is a deletion elsewhere: dropped here too.
  rec->rows.erase(t->id);
  EXPECT_EQ(a.find(t->id, "U", t1), nullptr);
  EXPECT_EQ(a.totals(t1).count, 1u);
  EXPECT_EQ(a.totals(t1).republished, 2u);
}

}  // namespace
}  // namespace hypic::server
