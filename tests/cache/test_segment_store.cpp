// SegmentStore: GDSF eviction stepped against a hand-computed table, exact budgets under
// random streams, pins, the disk tier (spill / reload bit-exact, corruption, budget, reopen)
// and concurrent use.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <filesystem>
#include <random>
#include <thread>

#include "cache/entry_util.h"
#include "cache/segment_store.h"
#include "core/log.h"

namespace hypic {
namespace {

namespace fs = std::filesystem;
using test::expect_same_entry;
using test::is_sized;
using test::make_entry;
using test::make_sized;
using test::sized_key;
using Pin = SegmentStore::Pin;

class StoreTest : public test::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    set_log_level(LogLevel::kError);  // corrupt-file warnings are expected here
  }
  void TearDown() override {
    set_log_level(LogLevel::kInfo);
    TempDirTest::TearDown();
  }
  std::unique_ptr<SegmentStore> open(size_t mem, bool disk = false, size_t disk_budget = 0) {
    SegmentStore::Options o;
    o.mem_budget_bytes = mem;
    if (disk) o.disk_dir = dir_ + "/cache";
    o.disk_budget_bytes = disk_budget;
    auto r = SegmentStore::open(o);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    return std::move(r).value();
  }
  static Pin put(SegmentStore& s, int tag, size_t bytes, double cost) {
    return s.insert(sized_key(tag), make_sized(tag, bytes), cost);
  }
  size_t files_in(const std::string& d) {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(d)) n += e.is_regular_file();
    return n;
  }
};

TEST_F(StoreTest, InsertLookupMissAndStats) {
  auto s = open(10000);
  EXPECT_EQ(s->lookup(sized_key(1)), nullptr);
  Pin p = put(*s, 1, 400, 1.0);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(is_sized(*p, 1, 400));
  Pin q = s->lookup(sized_key(1));
  EXPECT_EQ(q.get(), p.get());
  SegmentStore::Stats st = s->stats();
  EXPECT_EQ(st.mem_bytes, 400u);
  EXPECT_EQ(st.mem_entries, 1u);
  EXPECT_EQ(st.pinned_bytes, 400u);
  EXPECT_EQ(st.hits_mem, 1u);
  EXPECT_EQ(st.misses, 1u);
  p.reset();
  EXPECT_EQ(s->stats().pinned_bytes, 400u);  // q still holds it
  q.reset();
  EXPECT_EQ(s->stats().pinned_bytes, 0u);
  // Inserting a resident key returns the resident entry.
  Pin r = s->lookup(sized_key(1));
  Pin r2 = put(*s, 1, 400, 1.0);
  EXPECT_EQ(r.get(), r2.get());
  EXPECT_EQ(s->stats().mem_entries, 1u);
  s->check_invariants();
}

// GDSF stepped one operation at a time against hand-computed priorities
// H = clock + freq·cost/bytes (budget 1000 bytes; no pins held).
TEST_F(StoreTest, GdsfEvictionOrderHandComputed) {
  auto s = open(1000);
  struct Step {
    char op;  // 'i' insert, 'l' lookup
    int tag;
    size_t bytes;
    double cost;
    std::vector<int> resident;  // after the step
    const char* why;
  };
  // Tags: A=1 B=2 C=3 D=4 E=5 F=6 G=7 H=8 I=9.
  const Step steps[] = {
      {'i', 1, 400, 4.0, {1}, "H_A = 0 + 4/400 = 0.01"},
      {'i', 2, 400, 1.0, {1, 2}, "H_B = 0.0025"},
      {'l', 1, 0, 0, {1, 2}, "hit: freq_A = 2, H_A = 0 + 2·4/400 = 0.02"},
      {'i', 3, 400, 2.0, {1, 3}, "evict B (0.0025), clock = 0.0025; H_C = 0.0025 + 2/400 = 0.0075"},
      {'i', 4, 300, 0.3, {1, 4}, "evict C (0.0075 < 0.02), clock = 0.0075; H_D = 0.0085"},
      {'i', 5, 200, 10.0, {1, 4, 5}, "fits (900); H_E = 0.0075 + 0.05 = 0.0575"},
      {'i', 6, 300, 3.0, {1, 5, 6}, "evict D (0.0085) frees enough, clock = 0.0085; H_F = 0.0185"},
      {'l', 1, 0, 0, {1, 5, 6}, "hit: freq_A = 3, H_A = 0.0085 + 3·0.01 = 0.0385"},
      {'i', 7, 500, 5.0, {5, 7},
       "needs 400: evict F (0.0185) then A (0.0385) before E (0.0575); clock = 0.0385"},
      {'i', 8, 300, 0.3, {5, 7, 8}, "fits exactly (1000); H_H = 0.0385 + 0.001 = 0.0395"},
      {'i', 9, 100, 0.1, {5, 7, 9}, "evict H (0.0395) < G (0.0485) < E (0.0575)"},
  };
  uint64_t evictions = 0;
  for (const Step& st : steps) {
    SCOPED_TRACE(st.why);
    if (st.op == 'i') {
      Pin p = put(*s, st.tag, st.bytes, st.cost);
      ASSERT_TRUE(p && is_sized(*p, st.tag, st.bytes));
    } else {
      ASSERT_NE(s->lookup(sized_key(st.tag)), nullptr);
    }
    size_t want_bytes = 0;
    for (int t = 1; t <= 9; ++t) {
      const bool want = std::find(st.resident.begin(), st.resident.end(), t) != st.resident.end();
      EXPECT_EQ(s->in_memory(sized_key(t)), want) << "tag " << t;
    }
    for (int t : st.resident)
      for (const Step& x : steps)
        if (x.op == 'i' && x.tag == t) want_bytes += x.bytes;
    const SegmentStore::Stats stats = s->stats();
    EXPECT_EQ(stats.mem_bytes, want_bytes);
    EXPECT_EQ(stats.mem_entries, st.resident.size());
    EXPECT_EQ(stats.pinned_bytes, 0u);
    EXPECT_GE(stats.evictions, evictions);
    evictions = stats.evictions;
    s->check_invariants();
  }
  EXPECT_EQ(evictions, 6u);  // B, C, D, F, A, H
}

TEST_F(StoreTest, LargeCheapEntryGoesBeforeSmallExpensiveOne) {
  auto s = open(1000);
  put(*s, 1, 200, 2.0);  // small, 0.01 s/byte: older, so plain LRU would drop it first
  put(*s, 2, 600, 0.6);  // large, 0.001 s/byte, most recent
  put(*s, 3, 300, 3.0);
  EXPECT_TRUE(s->in_memory(sized_key(1)));
  EXPECT_FALSE(s->in_memory(sized_key(2)));
  EXPECT_TRUE(s->in_memory(sized_key(3)));
}

TEST_F(StoreTest, EqualPrioritiesEvictLeastRecentlyUsed) {
  auto s = open(1000);
  for (int t = 1; t <= 3; ++t) put(*s, t, 300, 3.0);
  put(*s, 4, 300, 3.0);  // all H = 0.01: the oldest (1) goes
  EXPECT_FALSE(s->in_memory(sized_key(1)));
  put(*s, 5, 300, 3.0);  // clock 0.01: 2 and 3 still at 0.01, 4 at 0.02
  EXPECT_FALSE(s->in_memory(sized_key(2)));
  EXPECT_TRUE(s->in_memory(sized_key(3)));
  EXPECT_TRUE(s->in_memory(sized_key(4)));
}

TEST_F(StoreTest, PinnedEntriesSurvivePressureAndAreReleasedWhenUnpinned) {
  auto s = open(1000);
  Pin a = put(*s, 1, 400, 0.001);  // cheapest: first to go when unpinned
  Pin b = put(*s, 2, 400, 0.002);
  EXPECT_EQ(s->stats().pinned_bytes, 800u);
  // Only pinned entries could make room: not admitted, but usable.
  Pin c = put(*s, 3, 400, 100.0);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(is_sized(*c, 3, 400));
  EXPECT_FALSE(s->in_memory(sized_key(3)));
  EXPECT_TRUE(s->in_memory(sized_key(1)));
  EXPECT_TRUE(s->in_memory(sized_key(2)));
  SegmentStore::Stats st = s->stats();
  EXPECT_EQ(st.rejected, 1u);
  EXPECT_EQ(st.mem_bytes, 800u);
  EXPECT_EQ(st.evictions, 0u);
  // A second Pin of a (via lookup) keeps it pinned after the first is dropped.
  Pin a2 = s->lookup(sized_key(1));
  a.reset();
  EXPECT_EQ(s->stats().pinned_bytes, 800u);
  b.reset();  // b is now evictable; a is not
  EXPECT_EQ(s->stats().pinned_bytes, 400u);
  Pin d = put(*s, 4, 400, 1.0);
  EXPECT_TRUE(s->in_memory(sized_key(4)));
  EXPECT_TRUE(s->in_memory(sized_key(1)));  // pinned, though cheaper than b was
  EXPECT_FALSE(s->in_memory(sized_key(2)));
  a2.reset();
  d.reset();
  EXPECT_EQ(s->stats().pinned_bytes, 0u);
  put(*s, 5, 400, 1.0);  // now a (cheapest per byte) can go
  EXPECT_FALSE(s->in_memory(sized_key(1)));
  EXPECT_TRUE(is_sized(*c, 3, 400));  // the unadmitted entry is still the caller's
  s->check_invariants();
}

TEST_F(StoreTest, PinsOutliveEraseClearAndTheStore) {
  auto s = open(1000);
  Pin a = put(*s, 1, 400, 1.0);
  Pin b = put(*s, 2, 400, 1.0);
  EXPECT_TRUE(s->erase(sized_key(1)));
  EXPECT_FALSE(s->erase(sized_key(1)));
  EXPECT_EQ(s->stats().pinned_bytes, 400u);
  s->clear();
  EXPECT_EQ(s->stats().mem_bytes, 0u);
  EXPECT_EQ(s->stats().pinned_bytes, 0u);
  s->check_invariants();
  s.reset();
  EXPECT_TRUE(is_sized(*a, 1, 400));
  EXPECT_TRUE(is_sized(*b, 2, 400));
}

// A random stream that overflows the budget many times over; the accounting is checked
// after every operation. Run without and with a disk tier.
void random_stream(SegmentStore& s, int ops, uint32_t seed) {
  std::mt19937 g(seed);
  std::vector<std::pair<int, Pin>> held;
  const size_t budget = s.options().mem_budget_bytes;
  for (int i = 0; i < ops; ++i) {
    const int tag = int(g() % 40);
    const size_t bytes = 4 * (64 + (size_t(tag) * 37) % 900);  // 256 .. 3852
    const int op = int(g() % 100);
    if (op < 70) {
      Pin p = s.lookup(sized_key(tag));
      if (!p) p = s.insert(sized_key(tag), make_sized(tag, bytes), 0.001 * (1 + g() % 50));
      ASSERT_NE(p, nullptr);
      ASSERT_TRUE(is_sized(*p, tag, bytes));
      if (g() % 4 == 0) held.emplace_back(tag, std::move(p));
    } else if (op < 75) {
      s.erase(sized_key(tag));
    } else if (!held.empty()) {
      held.erase(held.begin() + ptrdiff_t(g() % held.size()));
    }
    while (held.size() > 4) held.erase(held.begin());
    const SegmentStore::Stats st = s.stats();
    ASSERT_LE(st.mem_bytes, budget);
    ASSERT_LE(st.pinned_bytes, st.mem_bytes);
    if (s.options().disk_budget_bytes) {
      ASSERT_LE(st.disk_bytes, s.options().disk_budget_bytes);
    }
    s.check_invariants();
  }
  for (auto& [tag, p] : held) EXPECT_TRUE(is_sized(*p, tag, 4 * (64 + (size_t(tag) * 37) % 900)));
  held.clear();
  EXPECT_EQ(s.stats().pinned_bytes, 0u);
}

TEST_F(StoreTest, BudgetNeverExceededUnderAnOverflowingStream) {
  auto s = open(12000);
  random_stream(*s, 4000, 1);
  const SegmentStore::Stats st = s->stats();
  EXPECT_GT(st.evictions, 100u);
  EXPECT_GT(st.hits_mem, 100u);
  EXPECT_EQ(st.hits_disk, 0u);
}

TEST_F(StoreTest, BudgetNeverExceededUnderAnOverflowingStreamWithDisk) {
  auto s = open(12000, true, 40000);
  random_stream(*s, 800, 2);
  const SegmentStore::Stats st = s->stats();
  EXPECT_GT(st.spills, 10u);
  EXPECT_GT(st.hits_disk, 10u);
  EXPECT_EQ(st.corrupt_dropped, 0u);
  EXPECT_EQ(files_in(dir_ + "/cache"), st.disk_entries);
}

TEST_F(StoreTest, EntryLargerThanTheBudgetIsServedAndSpilled) {
  auto s = open(1000, true);
  Pin p = put(*s, 1, 2000, 1.0);
  ASSERT_TRUE(p && is_sized(*p, 1, 2000));
  EXPECT_FALSE(s->in_memory(sized_key(1)));
  EXPECT_TRUE(s->on_disk(sized_key(1)));
  p.reset();
  Pin q = s->lookup(sized_key(1));  // from disk, still not admitted
  ASSERT_TRUE(q && is_sized(*q, 1, 2000));
  const SegmentStore::Stats st = s->stats();
  EXPECT_EQ(st.rejected, 2u);
  EXPECT_EQ(st.hits_disk, 1u);
  EXPECT_EQ(st.spills, 1u);
  EXPECT_EQ(st.mem_bytes, 0u);
  s->check_invariants();
}

TEST_F(StoreTest, SpillToDiskAndLoadBackBitExact) {
  const SegmentEntry e1 = make_entry(1), e2 = make_entry(2);
  auto s = open(e1.bytes() * 3 / 2, true);
  s->insert(e1.key, make_entry(1), 1.0);
  EXPECT_FALSE(s->on_disk(e1.key));  // nothing is written while it stays in memory
  s->insert(e2.key, make_entry(2), 1.0);
  EXPECT_FALSE(s->in_memory(e1.key));
  EXPECT_TRUE(s->on_disk(e1.key));
  EXPECT_TRUE(fs::exists(s->file_path(e1.key)));
  Pin p = s->lookup(e1.key);
  ASSERT_NE(p, nullptr);
  expect_same_entry(*p, e1);
  EXPECT_TRUE(s->in_memory(e1.key));  // reloaded; e2 spilled to make room
  EXPECT_TRUE(s->on_disk(e2.key));
  EXPECT_TRUE(s->on_disk(e1.key));  // the file stays: evicting e1 again costs no write
  Pin q = s->lookup(e2.key);
  ASSERT_NE(q, nullptr);
  expect_same_entry(*q, e2);
  const SegmentStore::Stats st = s->stats();
  EXPECT_EQ(st.hits_disk, 2u);
  EXPECT_EQ(st.spills, 2u);
  EXPECT_EQ(st.disk_reads, 2u);
  EXPECT_EQ(st.disk_entries, 2u);
  s->check_invariants();
}

TEST_F(StoreTest, DamagedDiskFilesAreDroppedCountedAndMissed) {
  struct Damage {
    const char* what;
    std::function<void(const std::string& path, SegmentStore& s)> apply;
  };
  const Damage damages[] = {
      {"flipped data byte",
       [](const std::string& p, SegmentStore&) {
         std::string b = test::read_file(p);
         b[b.size() - 5] ^= 0x10;
         test::write_file(p, b);
       }},
      {"flipped header byte",
       [](const std::string& p, SegmentStore&) {
         std::string b = test::read_file(p);
         b[40] ^= 0x01;
         test::write_file(p, b);
       }},
      {"truncated",
       [](const std::string& p, SegmentStore&) {
         std::string b = test::read_file(p);
         test::write_file(p, b.substr(0, b.size() / 2));
       }},
      {"another entry's file",
       [](const std::string& p, SegmentStore& s) {
         fs::copy_file(s.file_path(make_entry(2).key), p, fs::copy_options::overwrite_existing);
       }},
  };
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.what);
    fs::remove_all(dir_ + "/cache");
    const SegmentEntry e1 = make_entry(1);
    auto s = open(e1.bytes() * 3 / 2, true);
    s->insert(e1.key, make_entry(1), 1.0);
    s->insert(make_entry(2).key, make_entry(2), 1.0);
    s->insert(make_entry(3).key, make_entry(3), 1.0);  // e1 and e2 now on disk
    ASSERT_TRUE(s->on_disk(e1.key));
    d.apply(s->file_path(e1.key), *s);
    EXPECT_EQ(s->lookup(e1.key), nullptr);
    SegmentStore::Stats st = s->stats();
    EXPECT_EQ(st.corrupt_dropped, 1u);
    EXPECT_EQ(st.misses, 1u);
    EXPECT_FALSE(s->on_disk(e1.key));
    EXPECT_FALSE(fs::exists(s->file_path(e1.key)));
    // The caller recomputes and inserts; later lookups hit.
    s->insert(e1.key, make_entry(1), 1.0);
    Pin p = s->lookup(e1.key);
    ASSERT_NE(p, nullptr);
    expect_same_entry(*p, e1);
    s->check_invariants();
  }
}

TEST_F(StoreTest, DiskBudgetRespectedLeastRecentlyUsedFilesGo) {
  // Memory holds one 20000-byte entry; every insert spills the previous one. A file is
  // ~20400 bytes (data and header) and a write reserves an upper bound of ~21200 first, so
  // a 90000-byte budget keeps four files.
  auto s = open(20000, true, 90000);
  for (int t = 1; t <= 8; ++t) {
    put(*s, t, 20000, 1.0);
    const SegmentStore::Stats st = s->stats();
    EXPECT_LE(st.disk_bytes, 90000u);
    EXPECT_EQ(files_in(dir_ + "/cache"), st.disk_entries);
    s->check_invariants();
  }
  // Files of 1..7 were written in order; the newest four remain.
  EXPECT_EQ(s->stats().disk_entries, 4u);
  for (int t = 1; t <= 3; ++t) EXPECT_FALSE(s->on_disk(sized_key(t))) << t;
  for (int t = 4; t <= 7; ++t) EXPECT_TRUE(s->on_disk(sized_key(t))) << t;
  // Reading 4 makes its file the most recent: spilling 8 (to make room for 4 in memory)
  // deletes 5. Then 4 leaves memory again without a write (its file exists), and spilling
  // 9 deletes 6.
  ASSERT_NE(s->lookup(sized_key(4)), nullptr);
  EXPECT_FALSE(s->on_disk(sized_key(5)));
  put(*s, 9, 20000, 1.0);
  put(*s, 10, 20000, 1.0);
  for (int t : {4, 7, 8, 9}) EXPECT_TRUE(s->on_disk(sized_key(t))) << t;
  for (int t : {5, 6}) EXPECT_FALSE(s->on_disk(sized_key(t))) << t;
  const SegmentStore::Stats st = s->stats();
  EXPECT_LE(st.disk_bytes, 90000u);
  EXPECT_EQ(st.spills, 9u);  // 1..9, each once (4 left memory again without a write)
  s->check_invariants();
}

TEST_F(StoreTest, ShedDiskDeletesLeastRecentlyUsedFilesUntilEnoughIsFree) {
  // Memory holds one entry; inserting 1..5 spills 1..4 to disk, oldest first.
  auto s = open(20000, true);
  for (int t = 1; t <= 5; ++t) put(*s, t, 20000, 1.0);
  ASSERT_EQ(s->stats().disk_entries, 4u);
  const size_t before = s->stats().disk_bytes;
  // A little more than one file: the two oldest go.
  const size_t freed = s->shed_disk(20000 + 1000);
  EXPECT_GE(freed, 20000u + 1000u);
  EXPECT_EQ(s->stats().disk_bytes, before - freed);
  EXPECT_EQ(s->stats().disk_shed, 2u);
  for (int t : {1, 2}) EXPECT_FALSE(s->on_disk(sized_key(t))) << t;
  for (int t : {3, 4}) EXPECT_TRUE(s->on_disk(sized_key(t))) << t;
  EXPECT_EQ(files_in(dir_ + "/cache"), 2u);
  // More than there is: everything goes, and then nothing is left to free.
  EXPECT_GT(s->shed_disk(size_t(1) << 30), 0u);
  EXPECT_EQ(s->stats().disk_entries, 0u);
  EXPECT_EQ(s->shed_disk(1), 0u);
  EXPECT_EQ(s->stats().disk_shed, 4u);
  s->check_invariants();
  // The memory tier is untouched; without a disk tier there is nothing to shed.
  EXPECT_NE(s->lookup(sized_key(5)), nullptr);
  EXPECT_EQ(open(20000)->shed_disk(1), 0u);
}

TEST_F(StoreTest, ReopenIndexesExistingFiles) {
  const std::string cache = dir_ + "/cache";
  {
    auto s = open(1000, true);
    for (int t = 1; t <= 4; ++t) put(*s, t, 800, 1.0);  // 1..3 spilled, 4 in memory only
    EXPECT_EQ(s->stats().disk_entries, 3u);
  }
  test::write_file(cache + "/notes.txt", "not an entry");
  const std::string stale = cache + "/." + sized_key(9) + ".seg.safetensors.tmp.AbC123";
  test::write_file(stale, "half a file");
  {
    auto s = open(1000, true);
    const SegmentStore::Stats st = s->stats();
    EXPECT_EQ(st.disk_entries, 3u);
    EXPECT_GT(st.disk_bytes, 3 * 800u);
    EXPECT_FALSE(fs::exists(stale));
    EXPECT_TRUE(fs::exists(cache + "/notes.txt"));
    for (int t = 1; t <= 3; ++t) {
      Pin p = s->lookup(sized_key(t));
      ASSERT_NE(p, nullptr) << t;
      EXPECT_TRUE(is_sized(*p, t, 800));
    }
    EXPECT_EQ(s->lookup(sized_key(4)), nullptr);
    s->check_invariants();
  }
  {
    // A smaller disk budget on reopen deletes the least recently used (oldest) files.
    const size_t file = fs::file_size(cache + "/" + sized_key(1) + ".seg.safetensors");
    fs::last_write_time(cache + "/" + sized_key(2) + ".seg.safetensors",
                        fs::file_time_type::clock::now() + std::chrono::hours(1));
    auto s = open(1000, true, 2 * file + file / 2);
    EXPECT_EQ(s->stats().disk_entries, 2u);
    EXPECT_TRUE(s->on_disk(sized_key(2)));
    s->check_invariants();
  }
}

TEST_F(StoreTest, EraseRemovesBothTiers) {
  auto s = open(1000, true);
  put(*s, 1, 800, 1.0);
  put(*s, 2, 800, 1.0);  // 1 on disk, 2 in memory
  const std::string f1 = s->file_path(sized_key(1));
  ASSERT_TRUE(fs::exists(f1));
  EXPECT_TRUE(s->erase(sized_key(1)));
  EXPECT_FALSE(fs::exists(f1));
  EXPECT_EQ(s->lookup(sized_key(1)), nullptr);
  EXPECT_TRUE(s->erase(sized_key(2)));
  EXPECT_FALSE(s->erase(sized_key(3)));
  put(*s, 3, 800, 1.0);
  put(*s, 4, 800, 1.0);
  s->clear();
  const SegmentStore::Stats st = s->stats();
  EXPECT_EQ(st.mem_bytes + st.disk_bytes + st.mem_entries + st.disk_entries, 0u);
  EXPECT_EQ(files_in(dir_ + "/cache"), 0u);
  s->check_invariants();
}

TEST_F(StoreTest, NonHexKeysWork) {
  auto s = open(1000, true);
  SegmentEntry a = make_sized(1, 800), b = make_sized(2, 800);
  a.key = "tenant/a segment";
  b.key = "";
  s->insert("tenant/a segment", std::move(a), 1.0);
  s->insert("b", std::move(b), 1.0);
  EXPECT_TRUE(s->on_disk("tenant/a segment"));
  EXPECT_EQ(fs::path(s->file_path("tenant/a segment")).filename().string().size(),
            64 + std::string(".seg.safetensors").size());
  Pin p = s->lookup("tenant/a segment");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->key, "tenant/a segment");
  EXPECT_EQ(s->lookup("b")->key, "b");
}

// Many threads look up the same spilled key at once: the file is read once.
TEST_F(StoreTest, ConcurrentLookupsOfOneKeyShareOneRead) {
  auto s = open(8 << 20, true);
  s->insert(sized_key(1), make_sized(1, 6 << 20), 1.0);
  s->insert(sized_key(2), make_sized(2, 6 << 20), 1.0);  // 1 spilled
  ASSERT_TRUE(s->on_disk(sized_key(1)));
  std::barrier sync(8);
  std::vector<Pin> got(8);
  std::vector<std::thread> ts;
  for (int i = 0; i < 8; ++i)
    ts.emplace_back([&, i] {
      sync.arrive_and_wait();
      got[size_t(i)] = s->lookup(sized_key(1));
    });
  for (auto& t : ts) t.join();
  for (const Pin& p : got) {
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p.get(), got[0].get());
  }
  EXPECT_TRUE(is_sized(*got[0], 1, 6 << 20));
  const SegmentStore::Stats st = s->stats();
  EXPECT_EQ(st.disk_reads, 1u);
  EXPECT_EQ(st.hits_disk + st.hits_mem, 8u);
  s->check_invariants();
}

// 8 threads hammering lookup / insert / erase with pins held across operations, memory and
// disk tiers both overflowing. Every Pin must hold its key's exact contents.
void hammer(SegmentStore& s, int threads, int ops) {
  std::atomic<uint64_t> lookups{0}, bad{0};
  std::vector<std::thread> ts;
  for (int w = 0; w < threads; ++w)
    ts.emplace_back([&, w] {
      std::mt19937 g(uint32_t(1000 + w));
      std::vector<std::pair<int, Pin>> held;
      for (int i = 0; i < ops; ++i) {
        const int tag = int(g() % 32);
        const size_t bytes = 1024 + size_t(tag % 7) * 512;
        const int op = int(g() % 100);
        if (op < 90) {
          ++lookups;
          Pin p = s.lookup(sized_key(tag));
          if (!p) p = s.insert(sized_key(tag), make_sized(tag, bytes), 0.001 * (1 + tag % 5));
          if (!p || !is_sized(*p, tag, bytes)) ++bad;
          if (g() % 3 == 0) held.emplace_back(tag, std::move(p));
          if (held.size() > 2) held.erase(held.begin());
        } else if (op < 92) {
          s.erase(sized_key(tag));
        } else if (op < 95) {
          s.check_invariants();
        } else {
          held.clear();
        }
        const SegmentStore::Stats st = s.stats();
        if (st.mem_bytes > s.options().mem_budget_bytes) ++bad;
      }
      for (auto& [tag, p] : held)
        if (!is_sized(*p, tag, 1024 + size_t(tag % 7) * 512)) ++bad;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0u);
  const SegmentStore::Stats st = s.stats();
  EXPECT_EQ(st.hits_mem + st.hits_disk + st.misses, lookups.load());
  EXPECT_EQ(st.pinned_bytes, 0u);
  s.check_invariants();
}

TEST_F(StoreTest, ConcurrentHammerMemoryOnly) {
  auto s = open(16 * 1024);
  hammer(*s, 8, 4000);
  EXPECT_GT(s->stats().evictions, 100u);
}

TEST_F(StoreTest, ConcurrentHammerWithDiskTier) {
  auto s = open(16 * 1024, true, 48 * 1024);
  hammer(*s, 8, 300);
  const SegmentStore::Stats st = s->stats();
  EXPECT_GT(st.spills, 10u);
  EXPECT_GT(st.hits_disk, 10u);
  EXPECT_EQ(st.corrupt_dropped, 0u);
  EXPECT_LE(st.disk_bytes, 48u * 1024);
}

}  // namespace
}  // namespace hypic
