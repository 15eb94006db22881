#include "kv/redis_conn.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace hypic::kv {
namespace {

constexpr size_t kReadChunk = size_t(256) << 10;

// Replies built by hiredis's reader straight into Reply (one copy of each value, not two).
// A child is constructed in its parent's pre-sized elements (stable addresses); only a root
// is allocated, and only a root is ever freed.
Reply* place(const redisReadTask* t) {
  if (t->parent) return &static_cast<Reply*>(t->parent->obj)->elements[size_t(t->idx)];
  return new Reply;
}
void* make_string(const redisReadTask* t, char* s, size_t n) {
  Reply* r = place(t);
  r->type = t->type == REDIS_REPLY_ERROR ? Reply::Type::kError
            : t->type == REDIS_REPLY_STATUS ? Reply::Type::kStatus : Reply::Type::kString;
  r->str.assign(s, n);
  return r;
}
void* make_array(const redisReadTask* t, int n) {
  Reply* r = place(t);
  r->type = Reply::Type::kArray;
  r->elements.resize(size_t(std::max(n, 0)));
  return r;
}
void* make_integer(const redisReadTask* t, long long v) {
  Reply* r = place(t);
  r->type = Reply::Type::kInteger;
  r->integer = v;
  return r;
}
void* make_nil(const redisReadTask* t) { return place(t); }
void free_reply(void* p) { delete static_cast<Reply*>(p); }
redisReplyObjectFunctions kReplyFunctions = {make_string, make_array, make_integer, make_nil, free_reply};

std::string ssl_error() {
  const unsigned long e = ERR_get_error();
  if (!e) return errno ? std::strerror(errno) : "connection closed";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return buf;
}

// Blocks SIGPIPE in this thread while alive; a SIGPIPE raised meanwhile is consumed.
class NoSigpipe {
 public:
  NoSigpipe() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~NoSigpipe() {
    sigset_t pending;
    sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE)) {
      const timespec zero{0, 0};
      while (sigtimedwait(&pipe_, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t pipe_, old_;
  bool was_pending_ = false;
};

// A connected TCP socket within `connect_ms`, with `io_ms` read / write timeouts; -1 and *err.
int connect_tcp(const RedisAddress& a, int connect_ms, int io_ms, std::string* err) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_socktype = SOCK_STREAM;
  if (int rc = getaddrinfo(a.host.c_str(), std::to_string(a.port).c_str(), &hints, &res); rc != 0) {
    *err = "cannot resolve '" + a.host + "': " + gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* ai = res; ai && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    const int flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc < 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = poll(&p, 1, connect_ms);
      int so = 0;
      socklen_t n = sizeof so;
      if (rc == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &n) == 0 && so == 0) rc = 0;
      else *err = rc == 0 ? "connect timed out" : std::strerror(so ? so : errno), rc = -1;
    } else if (rc < 0) {
      *err = std::strerror(errno);
    }
    if (rc != 0) {
      close(fd);
      fd = -1;
      continue;
    }
    fcntl(fd, F_SETFL, flags);
    const timeval tv{io_ms / 1000, (io_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  freeaddrinfo(res);
  return fd;
}

}  // namespace

class TlsClient {
 public:
  explicit TlsClient(SSL_CTX* ctx) : ctx_(ctx) {}
  ~TlsClient() { SSL_CTX_free(ctx_); }
  SSL_CTX* ctx() const { return ctx_; }

 private:
  SSL_CTX* ctx_;
};

Result<std::shared_ptr<TlsClient>> make_tls_client(const RedisAddress& a) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (!ctx) return internal_error("cannot make a TLS context: " + ssl_error());
  auto tls = std::make_shared<TlsClient>(ctx);
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  const bool ca = a.tls_ca.empty() ? SSL_CTX_set_default_verify_paths(ctx) == 1
                                   : SSL_CTX_load_verify_locations(ctx, a.tls_ca.c_str(), nullptr) == 1;
  if (!ca) return invalid_argument("Redis TLS: cannot read the CA file '" + a.tls_ca + "': " + ssl_error());
  if (a.tls_cert.empty() != a.tls_key.empty())
    return invalid_argument("Redis TLS: give both a client certificate and its key (ssl_certfile and ssl_keyfile), or neither");
  if (!a.tls_cert.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, a.tls_cert.c_str()) != 1)
      return invalid_argument("Redis TLS: cannot read the certificate '" + a.tls_cert + "': " + ssl_error());
    if (SSL_CTX_use_PrivateKey_file(ctx, a.tls_key.c_str(), SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(ctx) != 1)
      return invalid_argument("Redis TLS: cannot use the key '" + a.tls_key + "' with its certificate: " + ssl_error());
  }
  return tls;
}

struct RedisConn::Impl {
  int fd = -1;
  SSL* ssl = nullptr;
  redisReader* reader = nullptr;
  std::string buf;
  ~Impl() {
    if (ssl) SSL_free(ssl);
    if (fd >= 0) close(fd);
    if (reader) redisReaderFree(reader);
  }
  bool write_all(const char* p, size_t n, std::string* err) {
    NoSigpipe guard;
    while (n > 0) {
      const ssize_t w = ssl ? SSL_write(ssl, p, int(std::min(n, size_t(1) << 30))) : send(fd, p, n, MSG_NOSIGNAL);
      if (w <= 0) {
        if (!ssl && w < 0 && errno == EINTR) continue;
        *err = ssl ? "TLS write failed: " + ssl_error() : (errno == EAGAIN ? "write timed out" : std::strerror(errno));
        return false;
      }
      p += w;
      n -= size_t(w);
    }
    return true;
  }
  // Feeds the reader until it has one reply (a root Reply the caller deletes).
  bool read_reply(Reply** out, std::string* err) {
    for (;;) {
      void* r = nullptr;
      if (redisReaderGetReply(reader, &r) != REDIS_OK) {
        *err = std::string("protocol error: ") + reader->errstr;
        return false;
      }
      if (r) {
        *out = static_cast<Reply*>(r);
        return true;
      }
      buf.resize(kReadChunk);
      const ssize_t n = ssl ? SSL_read(ssl, buf.data(), int(buf.size())) : recv(fd, buf.data(), buf.size(), 0);
      if (n <= 0) {
        if (!ssl && n < 0 && errno == EINTR) continue;
        *err = n == 0 ? "Server closed the connection"
                      : ssl ? "TLS read failed: " + ssl_error() : (errno == EAGAIN ? "read timed out" : std::strerror(errno));
        return false;
      }
      redisReaderFeed(reader, buf.data(), size_t(n));
    }
  }
};

RedisConn::RedisConn(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
RedisConn::~RedisConn() = default;

Result<std::unique_ptr<RedisConn>> RedisConn::open(const RedisAddress& a, TlsClient* tls, int connect_ms, int io_ms) {
  auto impl = std::make_unique<Impl>();
  std::string err;
  impl->fd = connect_tcp(a, connect_ms, io_ms, &err);
  if (impl->fd < 0) return Status(StatusCode::kUnavailable, err);
  impl->reader = redisReaderCreateWithFunctions(&kReplyFunctions);
  if (!impl->reader) return internal_error("cannot allocate a Redis reply reader");
  impl->reader->maxbuf = 0;  // keep the buffer's capacity between replies (values are up to a chunk)
  if (tls) {
    impl->ssl = SSL_new(tls->ctx());
    if (!impl->ssl) return internal_error("cannot make a TLS session: " + ssl_error());
    SSL_set_fd(impl->ssl, impl->fd);
    in6_addr ip6;
    in_addr ip4;
    const bool is_ip = inet_pton(AF_INET, a.host.c_str(), &ip4) == 1 || inet_pton(AF_INET6, a.host.c_str(), &ip6) == 1;
    if (is_ip) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(impl->ssl), a.host.c_str());
    } else {
      SSL_set_tlsext_host_name(impl->ssl, a.host.c_str());
      SSL_set1_host(impl->ssl, a.host.c_str());
    }
    NoSigpipe guard;
    if (SSL_connect(impl->ssl) != 1) {
      const long v = SSL_get_verify_result(impl->ssl);
      const std::string why = v != X509_V_OK ? std::string("certificate: ") + X509_verify_cert_error_string(v) : ssl_error();
      return Status(StatusCode::kUnavailable, "TLS handshake failed (" + why + ")");
    }
  }
  return std::unique_ptr<RedisConn>(new RedisConn(std::move(impl)));
}

bool RedisConn::exchange(const std::vector<std::vector<std::string_view>>& cmds, std::vector<Reply>* out) {
  std::string wire;
  for (const auto& argv : cmds) {
    std::vector<const char*> p;
    std::vector<size_t> n;
    for (std::string_view s : argv) {
      p.push_back(s.data());
      n.push_back(s.size());
    }
    char* cmd = nullptr;
    const int len = redisFormatCommandArgv(&cmd, int(p.size()), p.data(), n.data());
    if (len < 0) {
      error_ = "cannot format a command";
      return false;
    }
    wire.append(cmd, size_t(len));
    redisFreeCommand(cmd);
  }
  if (!impl_->write_all(wire.data(), wire.size(), &error_)) return false;
  out->reserve(out->size() + cmds.size());
  for (size_t i = 0; i < cmds.size(); ++i) {
    Reply* r = nullptr;
    if (!impl_->read_reply(&r, &error_)) return false;
    out->push_back(std::move(*r));
    delete r;
  }
  return true;
}

}  // namespace hypic::kv
