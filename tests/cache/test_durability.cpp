// What outlives a process: SegmentStore::persist / flush (the warm restart) and the SQLite
// records of registered segments (round trip, expiry, other models, damaged rows and files,
// and a writer killed with SIGKILL mid-stream leaving whole records only).
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "cache/entry_util.h"
#include "kv/segment_records.h"
#include "cache/segment_store.h"
#include "core/log.h"

namespace hypic {
namespace {

namespace fs = std::filesystem;
using test::is_sized;
using test::make_sized;
using test::sized_key;
using Clock = std::chrono::steady_clock;

class DurabilityTest : public test::TempDirTest {
 protected:
  std::unique_ptr<SegmentStore> open_store(size_t mem, size_t disk_budget = 0) {
    SegmentStore::Options o;
    o.mem_budget_bytes = mem;
    o.disk_dir = dir_ + "/cache";
    o.disk_budget_bytes = disk_budget;
    auto r = SegmentStore::open(o);
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    return std::move(r).value();
  }
  std::unique_ptr<SegmentRecords> open_records() {
    auto r = open_sqlite_records(path("registry.sqlite"));
    EXPECT_TRUE(r.is_ok()) << r.status().to_string();
    return r ? std::move(r).value() : nullptr;
  }
};

SegmentRecord record(int i, const std::string& model = "m1", std::optional<int64_t> expires = std::nullopt) {
  SegmentRecord r;
  r.id = "seg_" + std::to_string(1000 + i);
  r.salt = i % 2 ? "tenant" : "";
  r.model = model;
  r.seam = 4 + i % 3;
  for (int k = 0; k <= i % 50; ++k) r.tokens.push_back(int32_t(k * 7919 + i) - 100000 * (k % 2));
  r.created = 1000 + i;
  r.expires_at = expires;
  return r;
}

void expect_same(const SegmentRecord& a, const SegmentRecord& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.salt, b.salt);
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.seam, b.seam);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.created, b.created);
  EXPECT_EQ(a.expires_at, b.expires_at);
}

TEST_F(DurabilityTest, PersistWritesAResidentEntryWithoutEvictingIt) {
  auto s = open_store(10000);
  s->insert(sized_key(1), make_sized(1, 800), 1.0);
  EXPECT_FALSE(s->on_disk(sized_key(1)));
  ASSERT_TRUE(s->persist(sized_key(1)).is_ok());
  EXPECT_TRUE(s->on_disk(sized_key(1)));
  EXPECT_TRUE(s->in_memory(sized_key(1)));
  EXPECT_TRUE(s->persist(sized_key(1)).is_ok());  // present: nothing written again
  EXPECT_EQ(s->stats().spills, 1u);
  EXPECT_EQ(s->persist(sized_key(2)).code(), StatusCode::kNotFound);
  s->check_invariants();
  // No room in the disk budget: an error, and the entry stays in memory.
  auto small = SegmentStore::open({10000, dir_ + "/small", 100, nullptr});
  ASSERT_TRUE(small.is_ok());
  (*small)->insert(sized_key(3), make_sized(3, 800), 1.0);
  EXPECT_EQ((*small)->persist(sized_key(3)).code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE((*small)->in_memory(sized_key(3)));
  (*small)->check_invariants();
}

TEST_F(DurabilityTest, FlushWritesEveryResidentEntryAndAReopenHitsThem) {
  {
    auto s = open_store(100000);
    for (int t = 1; t <= 5; ++t) s->insert(sized_key(t), make_sized(t, 800), double(t));
    ASSERT_TRUE(s->persist(sized_key(3)).is_ok());
    // A deadline already passed writes nothing.
    auto none = s->flush(Clock::now() - std::chrono::seconds(1));
    EXPECT_TRUE(none.timed_out);
    EXPECT_EQ(none.candidates, 4u);
    EXPECT_EQ(none.written, 0u);
    size_t calls = 0, last = 0;
    auto rep = s->flush(Clock::now() + std::chrono::minutes(5), [&](size_t done, size_t total) {
      ++calls;
      EXPECT_EQ(total, 4u);
      EXPECT_GE(done, last);
      last = done;
    });
    EXPECT_FALSE(rep.timed_out);
    EXPECT_EQ(rep.candidates, 4u);
    EXPECT_EQ(rep.written, 4u);
    EXPECT_EQ(rep.failed, 0u);
    EXPECT_GT(rep.bytes, 4 * 800u);
    EXPECT_EQ(calls, 4u);
    for (int t = 1; t <= 5; ++t) EXPECT_TRUE(s->in_memory(sized_key(t)) && s->on_disk(sized_key(t))) << t;
    EXPECT_EQ(s->flush(Clock::now() + std::chrono::minutes(5)).candidates, 0u);  // all on disk now
    s->check_invariants();
  }
  auto s = open_store(100000);
  EXPECT_EQ(s->stats().disk_entries, 5u);
  for (int t = 1; t <= 5; ++t) {
    auto p = s->lookup(sized_key(t));
    ASSERT_NE(p, nullptr) << t;
    EXPECT_TRUE(is_sized(*p, t, 800));
  }
  EXPECT_EQ(s->stats().hits_disk, 5u);
  EXPECT_EQ(s->stats().misses, 0u);
}

TEST_F(DurabilityTest, FlushWithoutADiskTierDoesNothing) {
  auto s = SegmentStore::open({10000, "", 0, nullptr});
  ASSERT_TRUE(s.is_ok());
  (*s)->insert(sized_key(1), make_sized(1, 800), 1.0);
  EXPECT_TRUE((*s)->persist(sized_key(1)).is_ok());
  EXPECT_EQ((*s)->flush(Clock::now() + std::chrono::seconds(5)).candidates, 0u);
}

TEST_F(DurabilityTest, RecordsRoundTripExpireAndKeepOtherModels) {
  {
    auto r = open_records();
    ASSERT_NE(r, nullptr);
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(r->put(record(i, "m1", i % 4 == 0 ? std::optional<int64_t>(5000 + i) : std::nullopt)).is_ok());
    ASSERT_TRUE(r->put(record(100, "m2")).is_ok());
    ASSERT_TRUE(r->erase(record(1).id).is_ok());
    ASSERT_TRUE(r->erase("seg_unknown").is_ok());
    SegmentRecord changed = record(2);
    changed.tokens = {42};
    ASSERT_TRUE(r->put(changed).is_ok());  // replaces
  }
  auto r = open_records();  // another process, later
  ASSERT_NE(r, nullptr);
  auto got = r->load("m1", /*now=*/5010);  // 0, 4 and 8 expired (5000, 5004, 5008)
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  std::vector<int> want;
  for (int i = 0; i < 20; ++i)
    if (i != 1 && !(i % 4 == 0 && 5000 + i <= 5010)) want.push_back(i);
  ASSERT_EQ(got->size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    SegmentRecord w = record(want[k], "m1", want[k] % 4 == 0 ? std::optional<int64_t>(5000 + want[k]) : std::nullopt);
    if (want[k] == 2) w.tokens = {42};
    expect_same((*got)[k], w);  // oldest first
  }
  auto other = r->load("m2", 5010);
  ASSERT_TRUE(other.is_ok());
  ASSERT_EQ(other->size(), 1u);
  expect_same(other->front(), record(100, "m2"));
  // The expired ones were deleted, not just skipped.
  auto later = r->load("m1", 0);
  ASSERT_TRUE(later.is_ok());
  EXPECT_EQ(later->size(), want.size());
  EXPECT_NE(r->describe().find("registry.sqlite"), std::string::npos);
}

TEST_F(DurabilityTest, DamagedRowsAreDroppedAndADamagedFileIsAnError) {
  {
    auto r = open_records();
    ASSERT_TRUE(r->put(record(1)).is_ok());
    ASSERT_TRUE(r->put(record(2)).is_ok());
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path("registry.sqlite").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE segments SET tokens = x'0102030405' WHERE id = 'seg_1001'", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  set_log_level(LogLevel::kError);
  {
    auto r = open_records();
    auto got = r->load("m1", 0);
    ASSERT_TRUE(got.is_ok());
    ASSERT_EQ(got->size(), 1u);
    EXPECT_EQ(got->front().id, "seg_1002");
    EXPECT_EQ(r->load("m1", 0)->size(), 1u);
  }
  set_log_level(LogLevel::kInfo);
  // Not a database: an error that names the file, and the file is left as it was.
  const std::string junk = path("junk.sqlite");
  test::write_file(junk, std::string(4096, 'x'));
  auto r = open_sqlite_records(junk);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("junk.sqlite"), std::string::npos) << r.status().to_string();
  EXPECT_EQ(fs::file_size(junk), 4096u);
  // A directory that does not exist: an error, not a crash.
  EXPECT_FALSE(open_sqlite_records(path("no/such/dir/registry.sqlite")).is_ok());
}

TEST_F(DurabilityTest, AWriterKilledMidStreamLeavesOnlyWholeRecords) {
  { ASSERT_NE(open_records(), nullptr); }  // created before the child starts
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // writes as fast as it can until killed
    auto r = open_sqlite_records(path("registry.sqlite"));
    if (!r) ::_exit(2);
    for (int i = 0;; ++i) {
      if (!(*r)->put(record(i)).is_ok()) ::_exit(3);
      if (i == 20) std::ofstream(path("started")) << "1";
    }
  }
  while (!fs::exists(path("started"))) ::usleep(1000);
  ::usleep(50000);
  ::kill(pid, SIGKILL);
  int st = 0;
  ::waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFSIGNALED(st)) << "the writer stopped by itself: " << st;
  auto r = open_records();
  ASSERT_NE(r, nullptr);
  auto got = r->load("m1", 0);
  ASSERT_TRUE(got.is_ok()) << got.status().to_string();
  ASSERT_GT(got->size(), 20u);
  // Records 0..n-1, each exactly as written: the kill left no torn record behind.
  for (size_t i = 0; i < got->size(); ++i) expect_same((*got)[i], record(int(i)));
}

}  // namespace
}  // namespace hypic
