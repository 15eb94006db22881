#include "server/connection.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <string>

namespace hypic::server {

ConnectionQueue::ConnectionQueue(size_t threads, size_t max_queued, std::function<bool()> stopping)
    : max_queued_(max_queued == 0 ? 1 : max_queued), stopping_(std::move(stopping)) {
  if (threads == 0) threads = 1;
  for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { worker(); });
}

ConnectionQueue::~ConnectionQueue() { shutdown(); }

void ConnectionQueue::enqueue(std::function<void()> fn) {
  {
    std::unique_lock<std::mutex> lk(mu_);
    // Polled with a timeout: stopping() is not ours to be notified about.
    while (jobs_.size() >= max_queued_ && !shutdown_ && !(stopping_ && stopping_()))
      has_room_.wait_for(lk, std::chrono::milliseconds(50));
    jobs_.push_back(std::move(fn));
  }
  has_work_.notify_one();
}

void ConnectionQueue::shutdown() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (shutdown_ && threads_.empty()) return;
    shutdown_ = true;
  }
  has_work_.notify_all();
  has_room_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

size_t ConnectionQueue::queued() const {
  std::lock_guard<std::mutex> lk(mu_);
  return jobs_.size();
}

void ConnectionQueue::worker() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lk(mu_);
      has_work_.wait(lk, [&] { return shutdown_ || !jobs_.empty(); });
      if (jobs_.empty()) return;  // shut down and drained
      fn = std::move(jobs_.front());
      jobs_.pop_front();
    }
    has_room_.notify_one();
    fn();
  }
}

namespace {

// The numeric host and port of a socket address, formatted as httplib does.
bool host_port(const sockaddr_storage& a, socklen_t len, std::string* host, int* port) {
  char h[NI_MAXHOST], s[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, h, sizeof h, s, sizeof s,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return false;
  *host = h;
  *port = std::atoi(s);
  return true;
}

bool matches(int fd, const httplib::Request& req) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  std::string host;
  int port = -1;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return false;  // not a socket
  if (a.ss_family != AF_INET && a.ss_family != AF_INET6) return false;
  if (!host_port(a, len, &host, &port) || port != req.local_port || host != req.local_addr) return false;
  len = sizeof a;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return false;
  return host_port(a, len, &host, &port) && port == req.remote_port && host == req.remote_addr;
}

bool peer_gone(int fd) {
  pollfd p{fd, short(POLLIN | POLLRDHUP), 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) return true;
  if (p.revents & POLLIN) {
    char c;
    return recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;  // EOF; > 0: a pipelined request
  }
  return false;
}

}  // namespace

std::function<bool()> disconnect_probe(const httplib::Request& req) {
  if (req.local_port <= 0 || req.remote_port <= 0) return {};
  DIR* d = opendir("/proc/self/fd");
  if (!d) return {};
  int found = -1, count = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const int fd = std::atoi(e->d_name);
    if (fd == dirfd(d) || !matches(fd, req)) continue;
    found = fd;
    ++count;
  }
  closedir(d);
  if (count != 1) return {};
  return [found] { return peer_gone(found); };
}

}  // namespace hypic::server
