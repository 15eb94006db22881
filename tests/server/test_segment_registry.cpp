// SegmentRegistry stepped through time: tenant isolation, caps, expiry, delete.
#include <gtest/gtest.h>

#include <chrono>
#include <set>

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
  SegmentRegistry reg({/*max_bytes=*/1000, /*max_segments=*/10});
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
  EXPECT_FALSE(reg.erase(a->id, "B", t0));  // B cannot delete A's
  EXPECT_EQ(reg.totals(t0).count, 3u);
  EXPECT_TRUE(reg.erase(a->id, "A", t0));
  EXPECT_FALSE(reg.erase(a->id, "A", t0));  // twice: gone
  EXPECT_EQ(reg.totals(t0).count, 2u);
  EXPECT_EQ(reg.totals(t0).bytes, 50u);
  EXPECT_EQ(a->tokens.size(), 3u);  // a caller's copy stays valid after the erase
}

TEST(SegmentRegistry, CapsOnCountAndBytes) {
  SegmentRegistry reg({/*max_bytes=*/100, /*max_segments=*/3});
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
  SegmentRegistry big({/*max_bytes=*/100, /*max_segments=*/3});
  EXPECT_EQ(big.add(make("", size_t(-1), t0), t0), SegmentRegistry::Admit::kTooManyBytes);  // no overflow
}

TEST(SegmentRegistry, ExpiryIsLazyAndSweepReportsIt) {
  SegmentRegistry reg({/*max_bytes=*/100, /*max_segments=*/2});
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

  SegmentRegistry reg2({100, 10});
  auto e = make("x", 1, t0, 1);
  ASSERT_EQ(reg2.add(e, t0), SegmentRegistry::Admit::kOk);
  EXPECT_TRUE(reg2.sweep(t0).empty());
  const auto gone = reg2.sweep(t0 + seconds(2));
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0], e->id);
  EXPECT_FALSE(reg2.erase(e->id, "x", t0 + seconds(2)));
}

}  // namespace
}  // namespace hypic::server
