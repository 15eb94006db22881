#include "kv/redis.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdlib>

#include "core/log.h"

namespace hypic::kv {
namespace {

timeval to_tv(int ms) { return timeval{ms / 1000, (ms % 1000) * 1000}; }

Reply convert(const redisReply* r) {
  Reply out;
  switch (r->type) {
    case REDIS_REPLY_STRING: out.type = Reply::Type::kString; break;
    case REDIS_REPLY_STATUS: out.type = Reply::Type::kStatus; break;
    case REDIS_REPLY_ERROR: out.type = Reply::Type::kError; break;
    case REDIS_REPLY_INTEGER: out.type = Reply::Type::kInteger; break;
    case REDIS_REPLY_ARRAY: out.type = Reply::Type::kArray; break;
    default: out.type = Reply::Type::kNil; break;
  }
  if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR)
    out.str.assign(r->str, r->len);
  out.integer = r->integer;
  for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements; ++i) out.elements.push_back(convert(r->element[i]));
  return out;
}

Status unavailable(const std::string& m) { return Status(StatusCode::kUnavailable, m); }

}  // namespace

Result<RedisAddress> parse_redis_url(std::string_view url) {
  const std::string_view kScheme = "redis://";
  if (url.rfind("rediss://", 0) == 0)
    return unsupported("rediss:// (TLS to Redis) is not supported: Debian 12's hiredis has no TLS; use redis:// over a "
                       "private network or a TLS tunnel");
  if (url.rfind(kScheme, 0) != 0) return invalid_argument("a Redis URL is redis://[:PASSWORD@]HOST:PORT[/DB], got '" + std::string(url) + "'");
  std::string_view rest = url.substr(kScheme.size());
  RedisAddress a;
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) {
    std::string_view user = rest.substr(0, at);
    if (const size_t c = user.find(':'); c != std::string_view::npos) a.password = std::string(user.substr(c + 1));
    rest = rest.substr(at + 1);
  }
  std::string_view hostport = rest;
  if (const size_t sl = rest.find('/'); sl != std::string_view::npos) {
    hostport = rest.substr(0, sl);
    const std::string db(rest.substr(sl + 1));
    char* end = nullptr;
    const long v = std::strtol(db.c_str(), &end, 10);
    if (db.empty() || *end || v < 0 || v > 1000000) return invalid_argument("Redis URL: '" + db + "' is not a database number");
    a.db = int(v);
  }
  const size_t colon = hostport.rfind(':');
  if (colon == std::string_view::npos || colon == 0)
    return invalid_argument("Redis URL: need HOST:PORT in '" + std::string(url) + "'");
  a.host = std::string(hostport.substr(0, colon));
  if (a.host.size() > 2 && a.host.front() == '[' && a.host.back() == ']') a.host = a.host.substr(1, a.host.size() - 2);
  const std::string port(hostport.substr(colon + 1));
  char* end = nullptr;
  const long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end || p < 1 || p > 65535) return invalid_argument("Redis URL: '" + port + "' is not a port");
  a.port = int(p);
  if (a.password.empty())
    if (const char* pw = std::getenv("HYPIC_REDIS_PASSWORD")) a.password = pw;
  return a;
}

Redis::Redis(Options opt) : opt_(std::move(opt)) {}

Redis::~Redis() {
  for (redisContext* c : idle_) redisFree(c);
}

std::string Redis::describe() const {
  return "redis://" + opt_.address.host + ":" + std::to_string(opt_.address.port) + "/" + std::to_string(opt_.address.db);
}

Redis::Stats Redis::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  Stats s = st_;
  s.up = std::chrono::steady_clock::now() >= down_until_;
  return s;
}

void Redis::mark_down(const std::string& why) {  // under mu_
  ++st_.errors;
  backoff_ms_ = backoff_ms_ ? std::min(2 * backoff_ms_, opt_.backoff_max_ms) : opt_.backoff_min_ms;
  down_until_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(backoff_ms_);
  if (down_reason_.empty())
    HYPIC_LOG_WARN("redis %s: %s (retrying with backoff; requests are served without the shared tier meanwhile)",
                   describe().c_str(), why.c_str());
  down_reason_ = why;
}

redisContext* Redis::acquire(Status* why, bool* reused) {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    if (std::chrono::steady_clock::now() < down_until_) {
      ++st_.errors;
      *why = unavailable("redis " + describe() + " is unavailable: " + down_reason_);
      return nullptr;
    }
    if (!idle_.empty()) {
      redisContext* c = idle_.back();
      idle_.pop_back();
      *reused = true;
      return c;
    }
    if (open_ < opt_.max_connections) break;
    cv_.wait(l);
  }
  ++open_;
  l.unlock();
  redisContext* c = redisConnectWithTimeout(opt_.address.host.c_str(), opt_.address.port, to_tv(opt_.connect_timeout_ms));
  std::string err;
  if (!c || c->err) {
    err = c ? c->errstr : "cannot allocate a connection";
  } else {
    redisSetTimeout(c, to_tv(opt_.command_timeout_ms));
    auto run = [&](std::vector<const char*> argv) -> bool {
      auto* r = static_cast<redisReply*>(redisCommandArgv(c, int(argv.size()), argv.data(), nullptr));
      if (!r) {
        err = c->errstr;
        return false;
      }
      const bool ok = r->type != REDIS_REPLY_ERROR;
      if (!ok) err = std::string(r->str, r->len);
      freeReplyObject(r);
      return ok;
    };
    const std::string db = std::to_string(opt_.address.db);
    if (!opt_.address.password.empty() && !run({"AUTH", opt_.address.password.c_str()})) err = "AUTH failed: " + err;
    else if (opt_.address.db != 0 && !run({"SELECT", db.c_str()})) err = "SELECT " + db + " failed: " + err;
  }
  l.lock();
  if (!err.empty()) {
    if (c) redisFree(c);
    --open_;
    cv_.notify_one();
    mark_down(err);
    *why = unavailable("redis " + describe() + ": " + err);
    return nullptr;
  }
  if (ever_connected_) ++st_.reconnects;
  ever_connected_ = true;
  if (!down_reason_.empty()) HYPIC_LOG_INFO("redis %s: connected again", describe().c_str());
  down_reason_.clear();
  backoff_ms_ = 0;
  return c;
}

void Redis::release(redisContext* c, Broken broken) {
  std::lock_guard<std::mutex> l(mu_);
  if (broken != Broken::kNo) {
    if (broken == Broken::kYes) mark_down(c->errstr[0] ? c->errstr : "connection broken");
    redisFree(c);
    --open_;
    // The idle ones most likely went with it (a restarted Redis): reconnect them all later.
    for (redisContext* i : idle_) redisFree(i);
    open_ -= int(idle_.size());
    idle_.clear();
  } else {
    idle_.push_back(c);
  }
  cv_.notify_one();
}

Result<std::vector<Reply>> Redis::pipeline(const std::vector<std::vector<std::string_view>>& cmds) {
  // A pooled connection may have gone stale (Redis restarted since): one more try on a new one.
  for (int attempt = 0;; ++attempt) {
    Status why;
    bool reused = false;
    redisContext* c = acquire(&why, &reused);
    if (!c) return why;
    std::vector<Reply> out;
    const bool ok = exchange(c, cmds, &out);
    {
      std::lock_guard<std::mutex> l(mu_);
      st_.commands += cmds.size();
    }
    if (ok) {
      release(c, Broken::kNo);
      return out;
    }
    const std::string err = c->errstr[0] ? c->errstr : "no reply";
    const bool retry = reused && attempt == 0;
    release(c, retry ? Broken::kStale : Broken::kYes);
    if (!retry) return unavailable("redis " + describe() + ": " + err);
  }
}

bool Redis::exchange(redisContext* c, const std::vector<std::vector<std::string_view>>& cmds, std::vector<Reply>* out) {
  out->reserve(cmds.size());
  for (const auto& argv : cmds) {
    std::vector<const char*> p;
    std::vector<size_t> n;
    for (std::string_view a : argv) {
      p.push_back(a.data());
      n.push_back(a.size());
    }
    if (redisAppendCommandArgv(c, int(p.size()), p.data(), n.data()) != REDIS_OK) return false;
  }
  for (size_t i = 0; i < cmds.size(); ++i) {
    void* r = nullptr;
    if (redisGetReply(c, &r) != REDIS_OK || !r) return false;
    out->push_back(convert(static_cast<redisReply*>(r)));
    freeReplyObject(r);
  }
  return true;
}

Result<Reply> Redis::command(const std::vector<std::string_view>& argv) {
  auto r = pipeline({argv});
  if (!r) return r.status();
  return std::move(r->front());
}

Result<std::shared_ptr<Redis>> open_redis(std::string_view url, int connect_timeout_ms, int command_timeout_ms) {
  auto a = parse_redis_url(url);
  if (!a) return a.status();
  Redis::Options o;
  o.address = std::move(a).value();
  o.connect_timeout_ms = connect_timeout_ms;
  o.command_timeout_ms = command_timeout_ms;
  return std::make_shared<Redis>(std::move(o));
}

}  // namespace hypic::kv
