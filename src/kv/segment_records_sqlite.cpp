// SegmentRecords on SQLite: table `segments` (one row per record; tokens a little-endian
// int32 blob), table `meta` (schema version). Each statement runs in its own transaction.
#include <sqlite3.h>

#include <cstring>
#include <mutex>

#include "kv/segment_records.h"
#include "core/log.h"

namespace hypic {
namespace {

constexpr int kSchemaVersion = 1;
constexpr int kMaxSeam = 1 << 20;

const char* kSchema =
    "CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS segments("
    "  id TEXT PRIMARY KEY, salt TEXT NOT NULL, model TEXT NOT NULL, seam INTEGER NOT NULL,"
    "  tokens BLOB NOT NULL, created INTEGER NOT NULL, expires INTEGER);"
    "CREATE INDEX IF NOT EXISTS segments_model ON segments(model, created);";

// A prepared statement, finalised on scope exit.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr); }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() const { return s_; }
  void text(int i, const std::string& v) { sqlite3_bind_text(s_, i, v.data(), int(v.size()), SQLITE_TRANSIENT); }
  void int64(int i, int64_t v) { sqlite3_bind_int64(s_, i, v); }
  int step() { return sqlite3_step(s_); }

 private:
  sqlite3_stmt* s_ = nullptr;
  int rc_ = SQLITE_OK;
};

class SqliteRecords final : public SegmentRecords {
 public:
  SqliteRecords(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  ~SqliteRecords() override { sqlite3_close(db_); }

  Status put(const SegmentRecord& r) override {
    std::lock_guard<std::mutex> lk(mu_);
    Stmt s(db_, "INSERT OR REPLACE INTO segments(id, salt, model, seam, tokens, created, expires) "
                "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)");
    if (!s.ok()) return fail("preparing an insert");
    s.text(1, r.id);
    s.text(2, r.salt);
    s.text(3, r.model);
    s.int64(4, r.seam);
    std::string blob(r.tokens.size() * 4, '\0');
    for (size_t i = 0; i < r.tokens.size(); ++i) {
      const uint32_t v = uint32_t(r.tokens[i]);
      for (int b = 0; b < 4; ++b) blob[4 * i + b] = char((v >> (8 * b)) & 0xff);
    }
    sqlite3_bind_blob(s.get(), 5, blob.data(), int(blob.size()), SQLITE_TRANSIENT);
    s.int64(6, r.created);
    if (r.expires_at) s.int64(7, *r.expires_at);
    else sqlite3_bind_null(s.get(), 7);
    if (s.step() != SQLITE_DONE) return fail("writing segment '" + r.id + "'");
    return Status::ok();
  }

  Status erase(const std::string& id) override {
    std::lock_guard<std::mutex> lk(mu_);
    Stmt s(db_, "DELETE FROM segments WHERE id = ?1");
    if (!s.ok()) return fail("preparing a delete");
    s.text(1, id);
    if (s.step() != SQLITE_DONE) return fail("deleting segment '" + id + "'");
    return Status::ok();
  }

  Result<std::vector<SegmentRecord>> load(const std::string& model, int64_t now) override {
    std::lock_guard<std::mutex> lk(mu_);
    {
      Stmt d(db_, "DELETE FROM segments WHERE expires IS NOT NULL AND expires <= ?1");
      if (!d.ok()) return fail("preparing a delete");
      d.int64(1, now);
      if (d.step() != SQLITE_DONE) return fail("deleting expired segments");
    }
    Stmt s(db_, "SELECT id, salt, seam, tokens, created, expires FROM segments WHERE model = ?1 "
                "ORDER BY created, rowid");
    if (!s.ok()) return fail("preparing a query");
    s.text(1, model);
    std::vector<SegmentRecord> out;
    std::vector<std::string> bad;
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
      SegmentRecord r;
      r.model = model;
      if (!read_row(s.get(), &r)) {
        bad.push_back(r.id);
        continue;
      }
      out.push_back(std::move(r));
    }
    if (rc != SQLITE_DONE) return fail("reading segments");
    for (const std::string& id : bad) {
      Stmt d(db_, "DELETE FROM segments WHERE id = ?1");
      d.text(1, id);
      if (!d.ok() || d.step() != SQLITE_DONE) return fail("deleting damaged segment '" + id + "'");
    }
    return out;
  }

  Result<std::optional<SegmentRecord>> get(const std::string& id, int64_t now) override {
    std::lock_guard<std::mutex> lk(mu_);
    Stmt s(db_, "SELECT id, salt, seam, tokens, created, expires, model FROM segments WHERE id = ?1");
    if (!s.ok()) return fail("preparing a query");
    s.text(1, id);
    const int rc = s.step();
    if (rc == SQLITE_DONE) return std::optional<SegmentRecord>();
    if (rc != SQLITE_ROW) return fail("reading segment '" + id + "'");
    SegmentRecord r;
    r.model = column_text(s.get(), 6);
    if (!read_row(s.get(), &r) || (r.expires_at && *r.expires_at <= now)) return std::optional<SegmentRecord>();
    return std::optional<SegmentRecord>(std::move(r));
  }

  std::string describe() const override { return "sqlite:" + path_; }

  // Creates the schema or checks its version.
  Status init() {
    char* err = nullptr;
    if (sqlite3_exec(db_, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", nullptr, nullptr, &err) !=
        SQLITE_OK)
      return fail_msg("setting up", err);
    if (sqlite3_exec(db_, kSchema, nullptr, nullptr, &err) != SQLITE_OK) return fail_msg("creating the tables", err);
    Stmt v(db_, "SELECT v FROM meta WHERE k = 'schema'");
    if (!v.ok()) return fail("reading the schema version");
    if (v.step() == SQLITE_ROW) {
      const std::string have = column_text(v.get(), 0);
      if (have != std::to_string(kSchemaVersion))
        return unsupported("the segment registry '" + path_ + "' has schema version " + have + "; this hypic reads " +
                           std::to_string(kSchemaVersion) + " (use another --cache-dir, or move the file away)");
      return Status::ok();
    }
    Stmt w(db_, "INSERT INTO meta(k, v) VALUES('schema', ?1)");
    w.text(1, std::to_string(kSchemaVersion));
    if (!w.ok() || w.step() != SQLITE_DONE) return fail("writing the schema version");
    return Status::ok();
  }

 private:
  // Columns id, salt, seam, tokens, created, expires into *r; false (with a warning) if damaged.
  bool read_row(sqlite3_stmt* q, SegmentRecord* r) const {
    r->id = column_text(q, 0);
    r->salt = column_text(q, 1);
    const int64_t seam = sqlite3_column_int64(q, 2);
    const auto* blob = static_cast<const unsigned char*>(sqlite3_column_blob(q, 3));
    const int n = sqlite3_column_bytes(q, 3);
    r->created = sqlite3_column_int64(q, 4);
    if (sqlite3_column_type(q, 5) != SQLITE_NULL) r->expires_at = sqlite3_column_int64(q, 5);
    if (seam < 0 || seam > kMaxSeam || n <= 0 || n % 4 != 0 || !blob || sqlite3_column_type(q, 3) != SQLITE_BLOB) {
      HYPIC_LOG_WARN("segment records: dropping segment '%s' of %s: a damaged record", r->id.c_str(), path_.c_str());
      return false;
    }
    r->seam = int(seam);
    r->tokens.resize(size_t(n) / 4);
    for (size_t i = 0; i < r->tokens.size(); ++i)
      r->tokens[i] = int32_t(uint32_t(blob[4 * i]) | uint32_t(blob[4 * i + 1]) << 8 | uint32_t(blob[4 * i + 2]) << 16 |
                             uint32_t(blob[4 * i + 3]) << 24);
    return true;
  }
  static std::string column_text(sqlite3_stmt* q, int i) {
    const auto* t = sqlite3_column_text(q, i);
    return t ? std::string(reinterpret_cast<const char*>(t), size_t(sqlite3_column_bytes(q, i))) : std::string();
  }
  Status fail(const std::string& what) const { return fail_code(what, sqlite3_errmsg(db_)); }
  Status fail_msg(const std::string& what, char* err) const {
    Status s = fail_code(what, err ? err : sqlite3_errmsg(db_));
    sqlite3_free(err);
    return s;
  }
  Status fail_code(const std::string& what, const char* msg) const {
    const int ec = sqlite3_errcode(db_);
    const std::string m = "segment registry '" + path_ + "': " + what + ": " + msg;
    if (ec == SQLITE_FULL) return Status(StatusCode::kResourceExhausted, m + " (the disk is full)");
    if (ec == SQLITE_CORRUPT || ec == SQLITE_NOTADB)
      return corrupt(m + " (the file is damaged: move it away to start with no registrations)");
    return io_error(m);
  }

  sqlite3* db_;
  const std::string path_;
  std::mutex mu_;
};

}  // namespace

Result<std::unique_ptr<SegmentRecords>> open_sqlite_records(const std::string& path) {
  sqlite3* db = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                                 nullptr);
  if (rc != SQLITE_OK) {
    const std::string m = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return io_error("cannot open the segment registry '" + path + "': " + m + " (check --cache-dir and its permissions)");
  }
  sqlite3_busy_timeout(db, 5000);
  auto r = std::make_unique<SqliteRecords>(db, path);
  if (Status s = r->init(); !s) return s;
  return std::unique_ptr<SegmentRecords>(std::move(r));
}

}  // namespace hypic
