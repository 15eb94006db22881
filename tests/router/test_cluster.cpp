// router::Cluster (membership, health, cache-affinity choice) and affinity_keys.
#include <gtest/gtest.h>

#include "router/cluster.h"
#include "router/router.h"

namespace hypic::router {
namespace {

using Clock = Cluster::Clock;

ProbeResult up(int capacity = 0) {
  ProbeResult r;
  r.ok = true;
  r.model_name = "m";
  r.capacity = capacity;
  return r;
}

// Two healthy static instances a, b and one worker w.
void populate(Cluster& c) {
  c.add_static(Role::kInstance, "a:1");
  c.add_static(Role::kInstance, "b:1");
  c.add_static(Role::kWorker, "w:1");
  for (const auto& [r, a] : c.members()) c.report(r, a, up(), Clock::now());
}

TEST(Cluster, NoHealthyInstanceNoChoice) {
  Cluster c;
  EXPECT_FALSE(c.choose({}, {}));
  c.add_static(Role::kInstance, "a:1");
  EXPECT_FALSE(c.choose({}, {})) << "healthy only once a probe answered";
  c.report(Role::kInstance, "a:1", up(), Clock::now());
  ASSERT_TRUE(c.choose({}, {}));
  EXPECT_EQ(c.choose({}, {})->address, "a:1");
  EXPECT_FALSE(c.choose({}, {"a:1"})) << "excluded";
}

// The home of a key among the healthy instances (what choose() returns for it alone).
std::string home(Cluster& c, uint64_t key) { return c.choose({{key, 100}}, {})->address; }

TEST(Cluster, EverySegmentHasAStableHomeAndHomesSpread) {
  Cluster c;
  populate(c);
  std::map<std::string, int> count;
  for (uint64_t k = 0; k < 200; ++k) {
    const std::string h = home(c, k);
    EXPECT_EQ(home(c, k), h) << "the same home every time";
    count[h] += 1;
  }
  ASSERT_EQ(count.size(), 2u);
  EXPECT_GT(count["a:1"], 60);
  EXPECT_GT(count["b:1"], 60);
}

TEST(Cluster, TheRequestGoesWhereMostOfItsBytesLive) {
  Cluster c;
  populate(c);
  std::vector<uint64_t> on_a, on_b;
  for (uint64_t k = 0; on_a.size() < 3 || on_b.size() < 3; ++k) (home(c, k) == "a:1" ? on_a : on_b).push_back(k);
  auto ch = c.choose({{on_a[0], 100}, {on_a[1], 100}, {on_b[0], 150}}, {});
  EXPECT_EQ(ch->address, "a:1");
  EXPECT_EQ(ch->affinity_bytes, 200);
  EXPECT_FALSE(ch->by_load);
  EXPECT_EQ(c.choose({{on_a[0], 100}, {on_b[0], 150}}, {})->address, "b:1");
}

TEST(Cluster, HomesMoveOnlyForTheInstanceThatLeft) {
  Cluster c;
  c.add_static(Role::kInstance, "a:1");
  c.add_static(Role::kInstance, "b:1");
  c.add_static(Role::kInstance, "c:1");
  for (const auto& [r, a] : c.members()) c.report(r, a, up(), Clock::now());
  std::map<uint64_t, std::string> before;
  for (uint64_t k = 0; k < 100; ++k) before[k] = home(c, k);
  c.report(Role::kInstance, "c:1", ProbeResult{}, Clock::now());
  c.report(Role::kInstance, "c:1", ProbeResult{}, Clock::now());  // down after 2 failures
  for (uint64_t k = 0; k < 100; ++k) {
    if (before[k] != "c:1") {
      EXPECT_EQ(home(c, k), before[k]) << k;
    } else {
      EXPECT_NE(home(c, k), "c:1");
    }
  }
}

TEST(Cluster, TiesGoToTheLeastLoadedThenRotate) {
  Cluster c;
  populate(c);
  c.begin("a:1");
  EXPECT_EQ(c.choose({}, {})->address, "b:1");
  c.end("a:1");
  std::set<std::string> seen;
  for (int i = 0; i < 4; ++i) seen.insert(c.choose({}, {})->address);
  EXPECT_EQ(seen.size(), 2u) << "equal candidates take turns";
}

TEST(Cluster, ImbalanceOverridesAffinity) {
  ClusterOptions o;
  o.balance_abs = 2;
  o.balance_rel = 1.5;
  Cluster c(o);
  populate(c);
  const std::string h = home(c, 7), other = h == "a:1" ? "b:1" : "a:1";
  for (int i = 0; i < 3; ++i) c.begin(h);
  auto ch = c.choose({{7, 1000}}, {});
  EXPECT_EQ(ch->address, other);
  EXPECT_TRUE(ch->by_load);
  c.end(h);  // 2 vs 0: not more than balance_abs
  EXPECT_EQ(c.choose({{7, 1000}}, {})->address, h);
}

TEST(Cluster, ComparisonPoliciesIgnoreAffinity) {
  for (Routing r : {Routing::kLeastLoaded, Routing::kRoundRobin}) {
    ClusterOptions o;
    o.routing = r;
    Cluster c(o);
    populate(c);
    std::set<std::string> seen;
    for (int i = 0; i < 4; ++i) seen.insert(c.choose({{1, 1000}}, {})->address);
    EXPECT_EQ(seen.size(), 2u);
    c.begin("a:1");
    if (r == Routing::kLeastLoaded) {
      for (int i = 0; i < 4; ++i) EXPECT_EQ(c.choose({{1, 1000}}, {})->address, "b:1");
    }
  }
  Routing r;
  EXPECT_TRUE(parse_routing("round-robin", &r));
  EXPECT_EQ(r, Routing::kRoundRobin);
  EXPECT_FALSE(parse_routing("random", &r));
}

TEST(Cluster, FullInstancesAreSkipped) {
  Cluster c;
  c.add_static(Role::kInstance, "a:1");
  c.report(Role::kInstance, "a:1", up(/*capacity=*/2), Clock::now());
  c.begin("a:1");
  EXPECT_TRUE(c.choose({}, {}));
  c.begin("a:1");
  EXPECT_FALSE(c.choose({}, {}));
}

TEST(Cluster, FailedProbesMakeUnhealthy) {
  ClusterOptions o;
  o.fail_threshold = 2;
  Cluster c(o);
  populate(c);
  ProbeResult down;
  c.report(Role::kInstance, "a:1", down, Clock::now());
  std::set<std::string> seen;
  for (int i = 0; i < 4; ++i) seen.insert(c.choose({}, {})->address);
  EXPECT_EQ(seen.size(), 2u) << "one failure is tolerated";
  c.report(Role::kInstance, "a:1", down, Clock::now());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(c.choose({{1, 10}}, {})->address, "b:1");
  c.report(Role::kInstance, "a:1", up(), Clock::now());
  seen.clear();
  for (int i = 0; i < 4; ++i) seen.insert(c.choose({}, {})->address);
  EXPECT_EQ(seen.size(), 2u) << "healthy again after a good probe";
}

TEST(Cluster, ForwardFailureMarksUnhealthyAtOnce) {
  Cluster c;
  populate(c);
  c.forward_failed("a:1", Clock::now());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(c.choose({}, {})->address, "b:1");
}

TEST(Cluster, JoinLeaveAndExpiry) {
  ClusterOptions o;
  o.member_ttl = std::chrono::milliseconds(1000);
  Cluster c(o);
  const auto t0 = Clock::now();
  c.join(Role::kWorker, "w:1", t0);
  c.join(Role::kInstance, "i:1", t0);
  c.add_static(Role::kInstance, "s:1");
  EXPECT_TRUE(c.healthy_workers().empty()) << "not probed yet";
  c.report(Role::kWorker, "w:1", up(), t0);
  EXPECT_EQ(c.healthy_workers(), std::vector<std::string>{"w:1"});
  EXPECT_TRUE(c.leave(Role::kWorker, "w:1"));
  EXPECT_FALSE(c.leave(Role::kWorker, "w:1"));
  EXPECT_TRUE(c.healthy_workers().empty());
  c.expire(t0 + std::chrono::milliseconds(500));
  EXPECT_EQ(c.members().size(), 2u);
  c.expire(t0 + std::chrono::milliseconds(1500));
  ASSERT_EQ(c.members().size(), 1u) << "the joined instance expired, the static one stays";
  EXPECT_EQ(c.members()[0].second, "s:1");
  EXPECT_TRUE(c.leave(Role::kInstance, "s:1"));
  EXPECT_EQ(c.members().size(), 1u) << "a static member is only marked down";
}

TEST(Cluster, InFlightMembersDoNotExpire) {
  ClusterOptions o;
  o.member_ttl = std::chrono::milliseconds(10);
  Cluster c(o);
  const auto t0 = Clock::now();
  c.join(Role::kInstance, "i:1", t0);
  c.report(Role::kInstance, "i:1", up(), t0);
  c.begin("i:1");
  c.expire(t0 + std::chrono::seconds(1));
  EXPECT_EQ(c.members().size(), 1u);
  c.end("i:1");
  c.expire(t0 + std::chrono::seconds(1));
  EXPECT_TRUE(c.members().empty());
}

TEST(Cluster, ModelNameAndMixedModels) {
  Cluster c;
  populate(c);
  bool mixed = true;
  EXPECT_EQ(c.model_name(&mixed), "m");
  EXPECT_FALSE(mixed);
  ProbeResult other = up();
  other.model_name = "n";
  c.report(Role::kInstance, "b:1", other, Clock::now());
  c.model_name(&mixed);
  EXPECT_TRUE(mixed);
}

api::ApiRequest chat(std::vector<std::string> segs, std::string question, std::string salt = "") {
  api::ApiRequest r;
  r.cache_salt = std::move(salt);
  api::Message sys;
  sys.role = api::Role::kSystem;
  sys.parts.push_back({"Answer from the documents.", false, ""});
  api::Message user;
  for (auto& s : segs) user.parts.push_back({s, true, ""});
  user.parts.push_back({std::move(question), false, ""});
  r.messages = {sys, user};
  return r;
}

TEST(AffinityKeys, SegmentsAreKeyedIndependentlyOfPositionAndQuestion) {
  const std::string a(300, 'a'), b(500, 'b');
  auto k1 = affinity_keys(chat({a, b}, "q1"));
  auto k2 = affinity_keys(chat({b, a}, "another question"));
  auto has = [](const std::vector<SegKey>& ks, uint64_t h) {
    for (const auto& k : ks)
      if (k.hash == h) return true;
    return false;
  };
  int shared = 0;
  for (const auto& k : k1) shared += has(k2, k.hash);
  EXPECT_EQ(shared, 2) << "both segments, not the prompt text around them";
  int64_t seg_bytes = 0;
  for (const auto& k : k1)
    if (has(k2, k.hash)) seg_bytes += k.weight;
  EXPECT_EQ(seg_bytes, 800);
}

TEST(AffinityKeys, SaltSeparatesTenantsAndSeamSeparatesEntries) {
  const std::string a(300, 'a');
  const auto base = affinity_keys(chat({a}, "q"));
  for (const auto& k : affinity_keys(chat({a}, "q", "tenant")))
    for (const auto& b : base) EXPECT_NE(k.hash, b.hash) << "another tenant shares nothing";
  auto seam = chat({a}, "q");
  seam.seam = 0;
  const auto ks = affinity_keys(seam);
  ASSERT_EQ(ks.size(), base.size());
  int same = 0;
  for (size_t i = 0; i < ks.size(); ++i) same += ks[i].hash == base[i].hash;
  EXPECT_EQ(same, int(ks.size()) - 1) << "only the segment's entry depends on the seam width";
}

TEST(AffinityKeys, PrefixModeKeysTheCommonPrefix) {
  const std::string a(5000, 'a');
  auto r1 = chat({a}, "q1");
  auto r2 = chat({a}, "another question");
  r1.mode = r2.mode = PicMode::kPrefix;
  const auto k1 = affinity_keys(r1), k2 = affinity_keys(r2);
  ASSERT_EQ(k1.size(), 1u);
  EXPECT_EQ(k1[0].hash, k2[0].hash) << "the same first 4 KiB: the same home";
  EXPECT_GT(k1[0].weight, 5000);
  auto r3 = chat({std::string(5000, 'b')}, "q1");
  r3.mode = PicMode::kPrefix;
  EXPECT_NE(affinity_keys(r3)[0].hash, k1[0].hash);
}

TEST(AffinityKeys, RegisteredSegmentsAreKeyedByIdAndWeightedByTheirTokens) {
  auto r1 = chat({}, "q1"), r2 = chat({}, "another question");
  for (auto* r : {&r1, &r2}) r->messages[1].parts.insert(r->messages[1].parts.begin(), {"", true, "seg_x"});
  r2.messages[1].parts.insert(r2.messages[1].parts.begin(), {"", true, "seg_y"});
  const auto k1 = affinity_keys(r1, {{"seg_x", 4000}}), k2 = affinity_keys(r2, {{"seg_x", 4000}});
  ASSERT_EQ(k1.size(), 2u);  // the segment, the rest
  EXPECT_EQ(k1[0].weight, 4000);
  int same = 0;
  for (const auto& a : k1)
    for (const auto& b : k2) same += a.hash == b.hash;
  EXPECT_EQ(same, 1) << "seg_x: the same home, wherever it is in the prompt";
  ASSERT_EQ(k2.size(), 3u);
  EXPECT_EQ(k2[0].weight, kUnknownSegmentBytes) << "seg_y's size is not known";
  EXPECT_NE(affinity_keys(r1)[0].hash, affinity_keys(chat({""}, "q1"))[0].hash);
  r1.mode = PicMode::kPrefix;  // prefix mode: the id is part of the prefix text
  EXPECT_EQ(affinity_keys(r1, {{"seg_x", 4000}}).size(), 1u);
}

}  // namespace
}  // namespace hypic::router
