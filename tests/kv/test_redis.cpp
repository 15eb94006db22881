// The Redis client (URLs, commands, a Redis that goes down and comes back) and the shared
// registry's records in Redis (round trip, expiry by Redis TTL, damaged values), against a
// real redis-server started here.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <ctime>
#include <thread>

#include "common/redis_server.h"
#include "kv/redis.h"
#include "kv/segment_records.h"

namespace hypic::kv {
namespace {

using test::RedisServer;

// Polls `f` every 50 ms for up to 60 s (the client's backoff, on a loaded machine).
template <typename F>
bool eventually(F f) {
  for (int i = 0; i < 1200; ++i) {
    if (f()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

TEST(RedisUrl, ParsesWhatRedisClientsAccept) {
  auto a = parse_redis_url("redis://10.0.0.7:6380/3");
  ASSERT_TRUE(a.is_ok()) << a.status().to_string();
  EXPECT_EQ(a->host, "10.0.0.7");
  EXPECT_EQ(a->port, 6380);
  EXPECT_EQ(a->db, 3);
  auto b = parse_redis_url("redis://:s3cr:et@localhost:6379");
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(b->password, "s3cr:et");
  EXPECT_EQ(b->db, 0);
  auto c = parse_redis_url("redis://us%40r:p%3Aw@[::1]:7000/0");
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(c->host, "::1");
  EXPECT_EQ(c->user, "us@r");
  EXPECT_EQ(c->password, "p:w");
  EXPECT_FALSE(c->tls);
  auto t = parse_redis_url("rediss://cache.internal:6380/1?ssl_ca_certs=/etc/ca.pem&ssl_certfile=c.pem&ssl_keyfile=k.pem");
  ASSERT_TRUE(t.is_ok()) << t.status().to_string();
  EXPECT_TRUE(t->tls);
  EXPECT_EQ(t->tls_ca, "/etc/ca.pem");
  EXPECT_EQ(t->tls_cert, "c.pem");
  EXPECT_EQ(t->tls_key, "k.pem");
  EXPECT_EQ(t->db, 1);
  for (const char* bad : {"http://h:1", "redis://host", "redis://h:0", "redis://h:70000", "redis://h:12/x",
                          "redis://h:12/-1", "redis://:pw@:12", "redis://h:1a", "redis://pw@h:1",
                          "redis://h:1?ssl_ca_certs=x", "rediss://h:1?verify=none", "rediss://h:1?ssl_ca_certs="})
    EXPECT_FALSE(parse_redis_url(bad).is_ok()) << bad;
  auto missing = open_redis("rediss://h:1?ssl_ca_certs=/nonexistent/ca.pem");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/ca.pem"), std::string::npos);
  auto half = open_redis("rediss://h:1?ssl_certfile=/x.pem");
  EXPECT_FALSE(half.is_ok()) << "a certificate without its key";
}

TEST(Redis, CommandsPipelinesAndARedisThatGoesDownAndComesBack) {
  RedisServer server;
  ASSERT_TRUE(server.start()) << "redis-server did not start (scripts/install.sh installs it)";
  auto r = open_redis(server.url(), 500, 2000);
  ASSERT_TRUE(r.is_ok());
  Redis& redis = **r;
  std::string bin("a\0b\r\nc", 6);  // binary-safe
  auto set = redis.command({"SET", "k", bin});
  ASSERT_TRUE(set.is_ok()) << set.status().to_string();
  EXPECT_EQ(set->type, Reply::Type::kStatus);
  auto got = redis.pipeline({{"GET", "k"}, {"GET", "absent"}, {"INCR", "k"}});
  ASSERT_TRUE(got.is_ok());
  ASSERT_EQ(got->size(), 3u);
  EXPECT_EQ((*got)[0].str, bin);
  EXPECT_TRUE((*got)[1].nil());
  EXPECT_EQ((*got)[2].type, Reply::Type::kError);  // an error reply, not a failed call
  EXPECT_TRUE(redis.up());

  server.kill();
  auto down = redis.command({"GET", "k"});
  ASSERT_FALSE(down.is_ok());
  EXPECT_EQ(down.status().code(), StatusCode::kUnavailable);
  EXPECT_FALSE(redis.up());  // backing off: the next calls fail at once
  auto during = redis.command({"GET", "k"});
  EXPECT_EQ(during.status().code(), StatusCode::kUnavailable);
  EXPECT_GE(redis.stats().errors, 2u);

  ASSERT_TRUE(server.start());  // same port, empty
  EXPECT_TRUE(eventually([&] {
    auto x = redis.command({"SET", "k", "again"});
    return x.is_ok() && x->type == Reply::Type::kStatus;
  }));
  EXPECT_TRUE(redis.up());
  EXPECT_GE(redis.stats().reconnects, 1u);
}

TEST(Redis, APasswordIsSentAndAWrongOneIsAnError) {
  RedisServer server({"--requirepass", "pw1"});
  ASSERT_TRUE(server.start());
  auto good = open_redis("redis://:pw1@127.0.0.1:" + std::to_string(server.port()) + "/2");
  ASSERT_TRUE(good.is_ok());
  auto ok = (*good)->command({"SET", "x", "1"});
  ASSERT_TRUE(ok.is_ok()) << ok.status().to_string();
  EXPECT_EQ(ok->type, Reply::Type::kStatus);
  auto bad = open_redis("redis://:wrong@127.0.0.1:" + std::to_string(server.port()));
  auto no = (*bad)->command({"GET", "x"});
  ASSERT_FALSE(no.is_ok());
  EXPECT_NE(no.status().message().find("AUTH"), std::string::npos) << no.status().to_string();
}

// rediss:// against redis-server's own TLS (certificates made by tests/common/make_certs.sh):
// the right CA and client certificate work; another CA, no client certificate when the server
// asks for one, or plain TCP to the TLS port do not.
TEST(Redis, TlsWithItsCertificatesAndNotWithout) {
  const std::string dir = ::testing::TempDir() + "/hypic-redis-tls-" + std::to_string(getpid());
  ASSERT_EQ(std::system(("sh " HYPIC_SOURCE_DIR "/tests/common/make_certs.sh " + dir).c_str()), 0);
  RedisServer server({"--tls-auth-clients", "yes"});
  server.use_tls(dir + "/member.pem", dir + "/member.key", dir + "/ca.pem");
  ASSERT_TRUE(server.start()) << "redis-server did not start with TLS";
  const std::string base = "rediss://127.0.0.1:" + std::to_string(server.port());
  auto good = open_redis(base + "?ssl_ca_certs=" + dir + "/ca.pem&ssl_certfile=" + dir + "/member.pem&ssl_keyfile=" +
                         dir + "/member.key");
  ASSERT_TRUE(good.is_ok()) << good.status().to_string();
  std::string big(3 << 20, 'z');  // bigger than a TLS record and the read chunk
  big[12345] = '\0';
  auto set = (*good)->pipeline({{"SET", "k", big}, {"GET", "k"}});
  ASSERT_TRUE(set.is_ok()) << set.status().to_string();
  EXPECT_EQ((*set)[1].str, big);
  EXPECT_EQ((*good)->describe().rfind("rediss://", 0), 0u);

  auto rogue = open_redis(base + "?ssl_ca_certs=" + dir + "/rogue-ca.pem&ssl_certfile=" + dir + "/member.pem&ssl_keyfile=" +
                          dir + "/member.key");
  ASSERT_TRUE(rogue.is_ok());
  auto r1 = (*rogue)->command({"PING"});
  ASSERT_FALSE(r1.is_ok());
  EXPECT_NE(r1.status().message().find("certificate"), std::string::npos) << r1.status().to_string();
  auto anon = open_redis(base + "?ssl_ca_certs=" + dir + "/ca.pem");
  EXPECT_FALSE((*anon)->command({"PING"}).is_ok()) << "the server requires a client certificate";
  auto plain = open_redis("redis://127.0.0.1:" + std::to_string(server.port()));
  EXPECT_FALSE((*plain)->command({"PING"}).is_ok());
  std::filesystem::remove_all(dir);
}

SegmentRecord record(const std::string& id, std::optional<int64_t> expires_at, const std::string& model = "m") {
  SegmentRecord r;
  r.id = id;
  r.salt = "tenant";
  r.model = model;
  r.seam = 4;
  r.tokens = {5, -1, 70000, 2};
  r.created = int64_t(std::time(nullptr)) - 10;
  r.expires_at = expires_at;
  return r;
}

TEST(RedisRecords, RoundTripExpiryOtherModelsAndDamagedValues) {
  RedisServer server;
  ASSERT_TRUE(server.start());
  auto redis = open_redis(server.url());
  ASSERT_TRUE(redis.is_ok());
  auto rec = open_redis_records(*redis);
  EXPECT_TRUE(rec->shared());
  const int64_t now = int64_t(std::time(nullptr));
  ASSERT_TRUE(rec->put(record("seg_a", std::nullopt)).is_ok());
  ASSERT_TRUE(rec->put(record("seg_b", now + 1000)).is_ok());
  ASSERT_TRUE(rec->put(record("seg_c", now + 1000, "other-model")).is_ok());

  auto a = rec->get("seg_a", now);
  ASSERT_TRUE(a.is_ok() && a->has_value());
  EXPECT_EQ((*a)->tokens, record("seg_a", std::nullopt).tokens);
  EXPECT_EQ((*a)->salt, "tenant");
  EXPECT_EQ((*a)->seam, 4);
  EXPECT_FALSE((*a)->expires_at.has_value());
  // Redis holds the TTL: the key expires by itself.
  auto ttl = (*redis)->command({"TTL", "hypic:r:seg_b"});
  ASSERT_TRUE(ttl.is_ok());
  EXPECT_GT(ttl->integer, 900);
  EXPECT_LE(ttl->integer, 1000);
  auto b_later = rec->get("seg_b", now + 2000);  // past its expiry: absent even before Redis drops it
  ASSERT_TRUE(b_later.is_ok());
  EXPECT_FALSE(b_later->has_value());

  auto mine = rec->load("m", now);
  ASSERT_TRUE(mine.is_ok());
  ASSERT_EQ(mine->size(), 2u);
  auto theirs = rec->load("other-model", now);
  ASSERT_EQ(theirs->size(), 1u);

  // Damaged values: a flipped byte, a truncated one, another id's record: absent and deleted.
  auto flip = (*redis)->command({"SETRANGE", "hypic:r:seg_a", "12", "Z"});
  ASSERT_TRUE(flip.is_ok());
  auto gone = rec->get("seg_a", now);
  ASSERT_TRUE(gone.is_ok());
  EXPECT_FALSE(gone->has_value());
  EXPECT_EQ((*redis)->command({"EXISTS", "hypic:r:seg_a"})->integer, 0);
  auto val = (*redis)->command({"GET", "hypic:r:seg_b"});
  ASSERT_TRUE((*redis)->command({"SET", "hypic:r:seg_d", val->str}).is_ok());  // filed under the wrong id
  ASSERT_TRUE((*redis)->command({"SET", "hypic:r:seg_e", val->str.substr(0, 20)}).is_ok());
  EXPECT_FALSE(rec->get("seg_d", now)->has_value());
  EXPECT_FALSE(rec->get("seg_e", now)->has_value());
  auto left = rec->load("m", now);
  ASSERT_EQ(left->size(), 1u);
  EXPECT_EQ(left->front().id, "seg_b");

  ASSERT_TRUE(rec->erase("seg_b").is_ok());
  EXPECT_FALSE(rec->get("seg_b", now)->has_value());
  ASSERT_TRUE(rec->erase("seg_b").is_ok());  // absent: not an error

  server.kill();
  EXPECT_EQ(rec->put(record("seg_f", std::nullopt)).code(), StatusCode::kUnavailable);
  EXPECT_FALSE(rec->get("seg_f", now).is_ok());
  EXPECT_FALSE(rec->load("m", now).is_ok());
}

}  // namespace
}  // namespace hypic::kv
