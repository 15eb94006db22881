#include "kv/redis.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "core/log.h"
#include "kv/redis_conn.h"

namespace hypic::kv {
namespace {

Status unavailable(const std::string& m) { return Status(StatusCode::kUnavailable, m); }

// %XX escapes of a URL's user, password and query values.
std::string unescape(std::string_view v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == '%' && i + 2 < v.size() && std::isxdigit(uint8_t(v[i + 1])) && std::isxdigit(uint8_t(v[i + 2]))) {
      out += char(std::stoi(std::string(v.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += v[i];
    }
  }
  return out;
}

Status bad_url(std::string_view url, const std::string& why) {
  return invalid_argument("Redis URL '" + std::string(url) + "': " + why +
                          " (the form is redis[s]://[[USER]:PASSWORD@]HOST:PORT[/DB][?ssl_ca_certs=FILE&ssl_certfile=FILE"
                          "&ssl_keyfile=FILE])");
}

}  // namespace

Result<RedisAddress> parse_redis_url(std::string_view url) {
  RedisAddress a;
  std::string_view rest;
  if (url.rfind("redis://", 0) == 0) {
    rest = url.substr(8);
  } else if (url.rfind("rediss://", 0) == 0) {
    rest = url.substr(9);
    a.tls = true;
  } else {
    return bad_url(url, "not a redis:// or rediss:// URL");
  }
  if (const size_t q = rest.find('?'); q != std::string_view::npos) {
    std::string_view query = rest.substr(q + 1);
    rest = rest.substr(0, q);
    if (!a.tls) return bad_url(url, "TLS options need rediss://");
    while (!query.empty()) {
      const size_t amp = query.find('&');
      const std::string_view kv = query.substr(0, amp);
      query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
      const size_t eq = kv.find('=');
      const std::string key(kv.substr(0, eq)), value = eq == std::string_view::npos ? "" : unescape(kv.substr(eq + 1));
      if (value.empty()) return bad_url(url, "'" + key + "' needs a value");
      if (key == "ssl_ca_certs") a.tls_ca = value;
      else if (key == "ssl_certfile") a.tls_cert = value;
      else if (key == "ssl_keyfile") a.tls_key = value;
      else return bad_url(url, "unknown option '" + key + "'");
    }
  }
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view cred = rest.substr(0, at);
    const size_t c = cred.find(':');
    if (c == std::string_view::npos) return bad_url(url, "credentials are [USER]:PASSWORD");
    a.user = unescape(cred.substr(0, c));
    a.password = unescape(cred.substr(c + 1));
    rest = rest.substr(at + 1);
  }
  std::string_view hostport = rest;
  if (const size_t sl = rest.find('/'); sl != std::string_view::npos) {
    hostport = rest.substr(0, sl);
    const std::string db(rest.substr(sl + 1));
    char* end = nullptr;
    const long v = std::strtol(db.c_str(), &end, 10);
    if (db.empty() || *end || v < 0 || v > 1000000) return bad_url(url, "'" + db + "' is not a database number");
    a.db = int(v);
  }
  const size_t colon = hostport.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return bad_url(url, "HOST:PORT is missing");
  a.host = std::string(hostport.substr(0, colon));
  if (a.host.size() > 2 && a.host.front() == '[' && a.host.back() == ']') a.host = a.host.substr(1, a.host.size() - 2);
  const std::string port(hostport.substr(colon + 1));
  char* end = nullptr;
  const long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end || p < 1 || p > 65535) return bad_url(url, "'" + port + "' is not a port");
  a.port = int(p);
  if (a.password.empty())
    if (const char* pw = std::getenv("HYPIC_REDIS_PASSWORD")) a.password = pw;
  return a;
}

Redis::Redis(Options opt, std::shared_ptr<TlsClient> tls) : opt_(std::move(opt)), tls_(std::move(tls)) {}

Redis::~Redis() = default;

std::string Redis::describe() const {
  const RedisAddress& a = opt_.address;
  const bool v6 = a.host.find(':') != std::string::npos;
  return std::string(a.tls ? "rediss://" : "redis://") + (v6 ? "[" + a.host + "]" : a.host) + ":" +
         std::to_string(a.port) + "/" + std::to_string(a.db);
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

std::unique_ptr<RedisConn> Redis::connect(std::string* err) {
  auto c = RedisConn::open(opt_.address, tls_.get(), opt_.connect_timeout_ms, opt_.command_timeout_ms);
  if (!c) {
    *err = c.status().message();
    return nullptr;
  }
  std::vector<std::vector<std::string_view>> setup;
  const std::string db = std::to_string(opt_.address.db);
  if (!opt_.address.password.empty()) {
    if (opt_.address.user.empty()) setup.push_back({"AUTH", opt_.address.password});
    else setup.push_back({"AUTH", opt_.address.user, opt_.address.password});
  }
  if (opt_.address.db != 0) setup.push_back({"SELECT", db});
  if (setup.empty()) return std::move(c).value();
  std::vector<Reply> r;
  if (!(*c)->exchange(setup, &r)) {
    *err = (*c)->error();
    return nullptr;
  }
  for (size_t i = 0; i < r.size(); ++i)
    if (r[i].type == Reply::Type::kError) {
      *err = std::string(setup[i][0]) + " failed: " + r[i].str;
      return nullptr;
    }
  return std::move(c).value();
}

std::unique_ptr<RedisConn> Redis::acquire(Status* why, bool* reused) {
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    if (std::chrono::steady_clock::now() < down_until_) {
      ++st_.errors;
      *why = unavailable("redis " + describe() + " is unavailable: " + down_reason_);
      return nullptr;
    }
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      *reused = true;
      return c;
    }
    if (open_ < opt_.max_connections) break;
    cv_.wait(l);
  }
  ++open_;
  l.unlock();
  std::string err;
  auto c = connect(&err);
  l.lock();
  if (!c) {
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

void Redis::release(std::unique_ptr<RedisConn> c, Broken broken, const std::string& why) {
  std::vector<std::unique_ptr<RedisConn>> closed;  // closed after unlocking
  std::lock_guard<std::mutex> l(mu_);
  if (broken != Broken::kNo) {
    if (broken == Broken::kYes) mark_down(why.empty() ? "connection broken" : why);
    closed.push_back(std::move(c));
    // The idle ones most likely went with it (a restarted Redis): reconnect them all later.
    for (auto& i : idle_) closed.push_back(std::move(i));
    open_ -= int(closed.size());
    idle_.clear();
  } else {
    idle_.push_back(std::move(c));
  }
  cv_.notify_all();
}

Result<std::vector<Reply>> Redis::pipeline(const std::vector<std::vector<std::string_view>>& cmds) {
  // A pooled connection may have gone stale (Redis restarted since): one more try on a new one.
  for (int attempt = 0;; ++attempt) {
    Status why;
    bool reused = false;
    std::unique_ptr<RedisConn> c = acquire(&why, &reused);
    if (!c) return why;
    std::vector<Reply> out;
    const bool ok = c->exchange(cmds, &out);
    {
      std::lock_guard<std::mutex> l(mu_);
      st_.commands += cmds.size();
    }
    if (ok) {
      release(std::move(c), Broken::kNo);
      return out;
    }
    const std::string err = c->error();
    const bool retry = reused && attempt == 0;
    release(std::move(c), retry ? Broken::kStale : Broken::kYes, err);
    if (!retry) return unavailable("redis " + describe() + ": " + err);
  }
}

Result<Reply> Redis::command(const std::vector<std::string_view>& argv) {
  auto r = pipeline({argv});
  if (!r) return r.status();
  return std::move(r->front());
}

Result<std::shared_ptr<Redis>> open_redis(std::string_view url, int connect_timeout_ms, int command_timeout_ms) {
  auto a = parse_redis_url(url);
  if (!a) return a.status();
  std::shared_ptr<TlsClient> tls;
  if (a->tls) {
    auto t = make_tls_client(*a);
    if (!t) return t.status();
    tls = std::move(t).value();
  }
  Redis::Options o;
  o.address = std::move(a).value();
  o.connect_timeout_ms = connect_timeout_ms;
  o.command_timeout_ms = command_timeout_ms;
  return std::make_shared<Redis>(std::move(o), std::move(tls));
}

}  // namespace hypic::kv
