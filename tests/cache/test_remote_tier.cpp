// The shared tier on a real redis-server: round trip, values cut in chunks, corrupt /
// truncated / missing / misfiled values detected and deleted, a Redis that is down or full,
// and two stores sharing it (an entry built by A is a hit on B).
#include <gtest/gtest.h>

#include <chrono>

#include "cache/entry_util.h"
#include "cache/remote_tier.h"
#include "cache/segment_store.h"
#include "common/redis_server.h"
#include "kv/redis.h"

namespace hypic {
namespace {

using test::RedisServer;
using Clock = std::chrono::steady_clock;

struct Tier {
  std::shared_ptr<kv::Redis> redis;
  std::shared_ptr<RemoteTier> tier;
};

Tier open_tier(const RedisServer& s, size_t chunk_bytes = 4096, size_t max_queued = 16) {
  auto r = kv::open_redis(s.url());
  EXPECT_TRUE(r.is_ok());
  RedisTierOptions o;
  o.chunk_bytes = chunk_bytes;
  o.max_queued = max_queued;
  auto t = redis_tier(o, *r);
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  return {*r, *t};
}

bool drained(RemoteTier& t) { return t.drain(Clock::now() + std::chrono::seconds(60)); }

std::string base_of(const std::string& key) { return "hypic:e:" + key; }

TEST(RedisTier, RoundTripInChunksWithATtl) {
  RedisServer server;
  ASSERT_TRUE(server.start()) << "redis-server did not start (scripts/install.sh installs it)";
  auto [redis, tier] = open_tier(server);
  auto e = std::make_shared<const SegmentEntry>(test::make_sized(7, 40000));  // 10 chunks of 4 KiB
  EXPECT_EQ(tier->get(e->key).status().code(), StatusCode::kNotFound);
  tier->put(e->key, e);
  ASSERT_TRUE(drained(*tier));
  auto got = tier->get(e->key);
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  EXPECT_TRUE(test::is_sized(*got, 7, 40000));
  auto n = redis->command({"KEYS", "hypic:e:*"});
  EXPECT_GE(n->elements.size(), 11u);  // manifest + chunks
  EXPECT_GT(redis->command({"TTL", base_of(e->key)})->integer, 0);
  const auto st = tier->stats();
  EXPECT_EQ(st.puts, 1u);
  EXPECT_EQ(st.hits, 1u);
  EXPECT_EQ(st.misses, 1u);
  EXPECT_GT(st.bytes_written, 40000u);
  EXPECT_EQ(st.bytes_read, st.bytes_written);
  EXPECT_TRUE(st.up);

  // A full entry of every tensor form comes back bit for bit.
  auto full = std::make_shared<const SegmentEntry>(test::make_entry(3));
  tier->put(full->key, full);
  ASSERT_TRUE(drained(*tier));
  auto back = tier->get(full->key);
  ASSERT_TRUE(back.is_ok());
  test::expect_same_entry(*back, *full);
}

TEST(RedisTier, DamagedValuesAreDetectedDeletedAndNeverUsed) {
  RedisServer server;
  ASSERT_TRUE(server.start());
  auto [redis, tier] = open_tier(server);
  auto put = [&](int tag) {
    auto e = std::make_shared<const SegmentEntry>(test::make_sized(tag, 20000));
    tier->put(e->key, e);
    EXPECT_TRUE(drained(*tier));
    return e->key;
  };
  auto expect_rejected = [&](const std::string& key, const char* what) {
    auto r = tier->get(key);
    ASSERT_FALSE(r.is_ok()) << what;
    EXPECT_EQ(r.status().code(), StatusCode::kCorrupt) << what << ": " << r.status().to_string();
    EXPECT_EQ(redis->command({"EXISTS", base_of(key)})->integer, 0) << what << ": the manifest stays";
    EXPECT_EQ(tier->get(key).status().code(), StatusCode::kNotFound) << what;
  };
  const std::string k1 = put(1), k2 = put(2), k3 = put(3), k4 = put(4), k5 = put(5);
  ASSERT_TRUE(redis->command({"SETRANGE", base_of(k1) + ":2", "100", "X"}).is_ok());
  expect_rejected(k1, "a flipped byte");
  auto c = redis->command({"GET", base_of(k2) + ":1"});
  ASSERT_TRUE(redis->command({"SET", base_of(k2) + ":1", c->str.substr(0, 100)}).is_ok());
  expect_rejected(k2, "a truncated chunk");
  ASSERT_TRUE(redis->command({"DEL", base_of(k3) + ":4"}).is_ok());
  expect_rejected(k3, "a missing chunk (evicted)");
  ASSERT_TRUE(redis->command({"SET", base_of(k4), "HYPREM01garbage"}).is_ok());
  expect_rejected(k4, "a damaged manifest");
  // Another key's entry filed under k5 (another model or salt has another key): never used.
  const std::string k6 = put(6);
  for (const char* suffix : {"", ":0", ":1", ":2", ":3", ":4"}) {
    auto v = redis->command({"GET", base_of(k6) + suffix});
    if (v->type == kv::Reply::Type::kString) {
      ASSERT_TRUE(redis->command({"SET", base_of(k5) + suffix, v->str}).is_ok());
    }
  }
  expect_rejected(k5, "another key's entry");
  EXPECT_EQ(tier->stats().corrupt, 5u);
}

TEST(RedisTier, ADownRedisFailsFastAndAFullOneDropsWrites) {
  RedisServer server({"--maxmemory", "2mb", "--maxmemory-policy", "noeviction"});
  ASSERT_TRUE(server.start());
  auto [redis, tier] = open_tier(server, size_t(64) << 10);
  // Full: writes past 2 MB are refused and counted; what was written still reads back whole.
  std::vector<std::string> keys;
  for (int i = 0; i < 12; ++i) {
    auto e = std::make_shared<const SegmentEntry>(test::make_sized(100 + i, 256 << 10));
    keys.push_back(e->key);
    tier->put(e->key, e);
    ASSERT_TRUE(drained(*tier));
  }
  auto st = tier->stats();
  EXPECT_GT(st.put_dropped, 0u);
  EXPECT_GT(st.puts, 0u);
  for (int i = 0; i < 12; ++i) {
    auto r = tier->get(keys[i]);
    if (r.is_ok()) EXPECT_TRUE(test::is_sized(*r, 100 + i, 256 << 10)) << i;
    else EXPECT_TRUE(r.status().code() == StatusCode::kNotFound || r.status().code() == StatusCode::kCorrupt) << i;
  }
  server.kill();
  EXPECT_EQ(tier->get(keys[0]).status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(tier->stats().up);
  auto e = std::make_shared<const SegmentEntry>(test::make_sized(1, 4096));
  const uint64_t dropped = tier->stats().put_dropped;
  tier->put(e->key, e);
  ASSERT_TRUE(drained(*tier));
  EXPECT_EQ(tier->stats().put_dropped, dropped + 1);
  EXPECT_GE(tier->stats().errors, 1u);
}

TEST(RedisTier, AnEntryBuiltByOneStoreIsAHitOnAnother) {
  RedisServer server;
  ASSERT_TRUE(server.start());
  auto [redis, tier_a] = open_tier(server);
  auto tier_b = open_tier(server).tier;
  auto open_store = [](std::shared_ptr<RemoteTier> t) {
    SegmentStore::Options o;
    o.mem_budget_bytes = size_t(8) << 20;
    o.remote = std::move(t);
    return std::move(SegmentStore::open(o)).value();
  };
  auto a = open_store(tier_a), b = open_store(tier_b);
  auto pin = a->insert(test::sized_key(9), test::make_sized(9, 30000), 0.01);
  ASSERT_NE(pin, nullptr);
  ASSERT_TRUE(drained(*tier_a));
  auto hit = b->lookup(test::sized_key(9));
  ASSERT_NE(hit, nullptr);
  EXPECT_TRUE(test::is_sized(*hit, 9, 30000));
  EXPECT_EQ(b->stats().hits_remote, 1u);
  EXPECT_EQ(b->stats().misses, 0u);
  EXPECT_NE(b->lookup(test::sized_key(9)), nullptr);  // now in B's memory
  EXPECT_EQ(b->stats().hits_mem, 1u);
  EXPECT_EQ(b->lookup(test::sized_key(10)), nullptr);
  EXPECT_EQ(b->stats().misses, 1u);
  server.kill();  // down: a miss, not an error
  EXPECT_EQ(b->lookup(test::sized_key(11)), nullptr);
  EXPECT_EQ(b->stats().misses, 2u);
}

}  // namespace
}  // namespace hypic
