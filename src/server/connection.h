// cpp-httplib connection plumbing that the installed version (Debian 12: 0.11.4) lacks.
//
// ConnectionQueue: a bounded replacement for httplib::ThreadPool, whose queue of accepted
// connections waiting for a thread is unbounded (0.11.4's ThreadPool takes no max_queued, and
// TaskQueue::enqueue() returns void and owns the socket, so a connection cannot be refused
// after accept()). With `threads` busy and `max_queued` waiting, enqueue() blocks the accept
// loop: further connections stay in the kernel's listen backlog, which the OS bounds (and
// beyond it refuses or drops), instead of piling up here without limit. While `stopping()`
// is true enqueue() never blocks, so the listener reaches its exit check on shutdown.
// Threading: a dedicated mutex and condition variables (like ThreadPool itself); enqueue()
// is called by httplib's listener thread, shutdown() once by httplib at the end of listen().
//
// disconnect_probe(): 0.11.4 has no Request::is_connection_closed and gives a handler no
// socket, so the probe finds the connection's socket by its address pair (local and remote
// address and port, via /proc/self/fd) and reports whether the peer has closed it (POLLRDHUP
// / EOF on a peek). Empty where the socket cannot be found. Call the probe only while the
// handler of `req` is running: httplib closes the socket (and the number may be reused) after
// it returns. A client that half-closes its side after sending the request reads as gone.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <httplib.h>

namespace hypic::server {

class ConnectionQueue : public httplib::TaskQueue {
 public:
  // max_queued is at least 1.
  ConnectionQueue(size_t threads, size_t max_queued, std::function<bool()> stopping);
  ~ConnectionQueue() override;
  ConnectionQueue(const ConnectionQueue&) = delete;
  ConnectionQueue& operator=(const ConnectionQueue&) = delete;

  // Blocks while max_queued connections are waiting (unless stopping()).
  void enqueue(std::function<void()> fn) override;
  // Runs what is queued, then joins the threads. Idempotent.
  void shutdown() override;
  size_t queued() const;

 private:
  void worker();
  const size_t max_queued_;
  const std::function<bool()> stopping_;
  mutable std::mutex mu_;
  std::condition_variable has_work_, has_room_;
  std::deque<std::function<void()>> jobs_;  // guarded by mu_
  bool shutdown_ = false;                   // guarded by mu_
  std::vector<std::thread> threads_;
};

std::function<bool()> disconnect_probe(const httplib::Request& req);

}  // namespace hypic::server
