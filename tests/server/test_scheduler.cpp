// Scheduler: bounded admission, cancellation, graceful shutdown (fake runner, no model).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "server/scheduler.h"

namespace hypic::server {
namespace {

TEST(Scheduler, RunsJobsAndStreamsText) {
  Scheduler s({1, 4}, [](const Scheduler::Job& j) {
    j.ticket->push_text("a");
    j.ticket->push_text("b");
    Outcome o;
    o.result = {{"n", j.request.max_tokens}};
    return o;
  });
  Scheduler::Rejection why;
  ApiRequest r;
  r.max_tokens = 3;
  auto t = s.submit(r, {}, Timer(), &why);
  ASSERT_TRUE(t);
  std::string text;
  Outcome o = t->wait(&text);
  EXPECT_FALSE(o.error);
  EXPECT_EQ(text, "ab");
  EXPECT_EQ(o.result["n"], 3);
}

TEST(Scheduler, FullQueueIsRejectedAtOnce) {
  std::atomic<bool> release{false};
  Scheduler s({1, 1}, [&](const Scheduler::Job&) {
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return Outcome{};
  });
  Scheduler::Rejection why;
  auto a = s.submit({}, {}, Timer(), &why);
  auto b = s.submit({}, {}, Timer(), &why);
  ASSERT_TRUE(a && b);
  auto c = s.submit({}, {}, Timer(), &why);
  EXPECT_FALSE(c);
  EXPECT_EQ(why, Scheduler::Rejection::kQueueFull);
  release = true;
  std::string t;
  EXPECT_FALSE(a->wait(&t).error);
  EXPECT_FALSE(b->wait(&t).error);
  auto d = s.submit({}, {}, Timer(), &why);  // room again
  EXPECT_TRUE(d);
}

TEST(Scheduler, CancelStopsTheRunner) {
  std::atomic<int> pushed{0};
  Scheduler s({1, 1}, [&](const Scheduler::Job& j) {
    while (j.ticket->push_text("x")) {
      ++pushed;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    Outcome o;
    o.error = ApiError{499, "cancelled", "invalid_request_error", "", "cancelled"};
    return o;
  });
  Scheduler::Rejection why;
  auto t = s.submit({}, {}, Timer(), &why);
  ASSERT_TRUE(t);
  std::string piece;
  Outcome o;
  ASSERT_TRUE(t->next(&piece, &o));
  t->cancel();
  while (t->next(&piece, &o)) {
  }
  ASSERT_TRUE(o.error);
  EXPECT_EQ(o.error->http_status, 499);
}

TEST(Scheduler, ShutdownFinishesRunningAndRejectsQueued) {
  std::atomic<bool> started{false};
  Scheduler s({1, 4}, [&](const Scheduler::Job&) {
    started = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return Outcome{};
  });
  Scheduler::Rejection why;
  auto running = s.submit({}, {}, Timer(), &why);
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto queued = s.submit({}, {}, Timer(), &why);
  ASSERT_TRUE(running && queued);
  s.shutdown();
  std::string t;
  EXPECT_FALSE(running->wait(&t).error);
  Outcome q = queued->wait(&t);
  ASSERT_TRUE(q.error);
  EXPECT_EQ(q.error->http_status, 503);
  EXPECT_FALSE(s.submit({}, {}, Timer(), &why));
  EXPECT_EQ(why, Scheduler::Rejection::kShuttingDown);
}

}  // namespace
}  // namespace hypic::server
