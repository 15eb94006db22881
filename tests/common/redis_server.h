// A real redis-server (Debian's) for the tests that need one: started on a free loopback port
// with no persistence, in its own temp dir, stopped (SIGKILL) by the destructor. kill() and
// start() again on the same port play a Redis that goes down and comes back.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace hypic::test {

class RedisServer {
 public:
  // `extra`: more redis-server options ("--maxmemory", "1mb", ...).
  explicit RedisServer(std::vector<std::string> extra = {}) : extra_(std::move(extra)) {}
  ~RedisServer() { kill(); }
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  // Starts it (on the port it had, or a free one) and waits until it answers PING; false if
  // redis-server is missing or never answered (the test then fails with a message).
  bool start() {
    if (port_ == 0) port_ = free_port();
    const std::string p = std::to_string(port_);
    std::vector<std::string> args = {"redis-server", "--port", tls_.empty() ? p : "0", "--bind", "127.0.0.1",
                                     "--save", "", "--appendonly", "no", "--dir", "/tmp", "--loglevel", "warning"};
    if (!tls_.empty()) {
      args.insert(args.end(), {"--tls-port", p});
      args.insert(args.end(), tls_.begin(), tls_.end());
    }
    args.insert(args.end(), extra_.begin(), extra_.end());
    std::vector<char*> argv;  // made before fork(): the child only execs
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const int devnull = open("/dev/null", O_WRONLY);  // its start-up chatter
    pid_ = fork();
    if (pid_ == 0) {
      dup2(devnull, 1);
      execvp("redis-server", argv.data());
      _exit(127);
    }
    close(devnull);
    for (int i = 0; i < 600; ++i) {  // up to a minute on a loaded machine
      if (answers()) return true;
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {  // exited (port taken, or not installed)
        pid_ = -1;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // Serve TLS only (on port()), with these PEM files (call before start()).
  void use_tls(const std::string& cert, const std::string& key, const std::string& ca) {
    tls_ = {"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", ca};
  }
  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

 private:
  static int free_port() {
    const int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t n = sizeof a;
    getsockname(s, reinterpret_cast<sockaddr*>(&a), &n);
    close(s);
    return ntohs(a.sin_port);
  }
  // Whether the port takes connections and, unless it speaks TLS only (no plain PING), answers
  // "PING" (+PONG, or -NOAUTH with a password).
  bool answers() const {
    const int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(uint16_t(port_));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    if (ok && tls_.empty()) {
      char buf[16] = {};
      ok = write(s, "PING\r\n", 6) == 6 && read(s, buf, sizeof buf - 1) >= 5 && (buf[0] == '+' || buf[0] == '-');
    }
    close(s);
    return ok;
  }

  std::vector<std::string> extra_, tls_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace hypic::test
