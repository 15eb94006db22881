// ConnectionQueue stepped by hand: at most `threads` jobs run and `max_queued` wait; one
// more enqueue() blocks until a thread takes a waiting job (or the server is stopping).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "server/connection.h"

namespace hypic::server {
namespace {

using namespace std::chrono_literals;

TEST(ConnectionQueue, EnqueueBlocksWhenFullUntilAThreadIsFree) {
  std::atomic<bool> stopping{false};
  ConnectionQueue q(/*threads=*/1, /*max_queued=*/1, [&] { return stopping.load(); });
  std::promise<void> release_a;
  std::shared_future<void> a_go = release_a.get_future().share();
  std::atomic<int> ran{0};
  std::atomic<bool> a_started{false};
  q.enqueue([&] {
    a_started = true;
    a_go.wait();
    ++ran;
  });
  for (int i = 0; i < 200 && !a_started; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(a_started);
  q.enqueue([&] { ++ran; });  // waits in the queue
  EXPECT_EQ(q.queued(), 1u);
  std::atomic<bool> c_enqueued{false};
  std::thread t([&] {
    q.enqueue([&] { ++ran; });  // the queue is full: blocks
    c_enqueued = true;
  });
  std::this_thread::sleep_for(150ms);
  EXPECT_FALSE(c_enqueued);
  EXPECT_EQ(q.queued(), 1u);
  release_a.set_value();
  t.join();
  EXPECT_TRUE(c_enqueued);
  q.shutdown();  // runs what is queued
  EXPECT_EQ(ran, 3);
}

TEST(ConnectionQueue, StoppingNeverBlocks) {
  std::atomic<bool> stopping{false};
  ConnectionQueue q(1, 1, [&] { return stopping.load(); });
  std::promise<void> release;
  std::shared_future<void> go = release.get_future().share();
  std::atomic<int> ran{0};
  q.enqueue([&] { go.wait(); ++ran; });
  q.enqueue([&] { ++ran; });
  std::this_thread::sleep_for(20ms);
  std::atomic<bool> done{false};
  std::thread t([&] {
    q.enqueue([&] { ++ran; });
    done = true;
  });
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(done);
  stopping = true;  // the listener must reach its exit check
  for (int i = 0; i < 100 && !done; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(done);
  release.set_value();
  t.join();
  q.shutdown();
  EXPECT_EQ(ran, 3);
}

}  // namespace
}  // namespace hypic::server
