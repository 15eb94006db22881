// Scheduler: bounded admission, cancellation, graceful shutdown (fake prefill, no model), and
// continuous batching on a real checkpoint (every request gets the text it gets alone).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "engine/generate.h"
#include "model/model.h"
#include "server/scheduler.h"
#include "tokenizer/tokenizer.h"

namespace hypic::server {

using namespace api;
namespace {

TEST(Scheduler, RunsJobsAndStreamsText) {
  Scheduler s({1, 4, 1}, [](const Scheduler::Job& j) {
    j.ticket->push_text("a");
    j.ticket->push_text("b");
    Outcome o;
    o.completion.emplace().usage.prompt_tokens = std::get<CompletionJob>(j.work).request.max_tokens;
    return o;
  });
  Scheduler::Rejection why;
  ApiRequest r;
  r.max_tokens = 3;
  auto t = s.submit(CompletionJob{r, {}, {}, {}}, Timer(), &why);
  ASSERT_TRUE(t);
  std::string text;
  Outcome o = t->wait(&text);
  EXPECT_FALSE(o.error);
  EXPECT_EQ(text, "ab");
  ASSERT_TRUE(o.completion);
  EXPECT_EQ(o.completion->usage.prompt_tokens, 3);
}

TEST(Scheduler, FullQueueIsRejectedAtOnce) {
  std::atomic<bool> release{false};
  Scheduler s({1, 1, 1}, [&](const Scheduler::Job&) {
    while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return Outcome{};
  });
  Scheduler::Rejection why;
  auto a = s.submit(CompletionJob{}, Timer(), &why);
  auto b = s.submit(CompletionJob{}, Timer(), &why);
  ASSERT_TRUE(a && b);
  auto c = s.submit(CompletionJob{}, Timer(), &why);
  EXPECT_FALSE(c);
  EXPECT_EQ(why, Scheduler::Rejection::kQueueFull);
  release = true;
  std::string t;
  EXPECT_FALSE(a->wait(&t).error);
  EXPECT_FALSE(b->wait(&t).error);
  auto d = s.submit(CompletionJob{}, Timer(), &why);  // room again
  EXPECT_TRUE(d);
}

TEST(Scheduler, CancelStopsTheRunner) {
  std::atomic<int> pushed{0};
  Scheduler s({1, 1, 1}, [&](const Scheduler::Job& j) {
    while (j.ticket->push_text("x")) {
      ++pushed;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    Outcome o;
    o.error = ApiError{499, "cancelled", "invalid_request_error", "", "cancelled"};
    return o;
  });
  Scheduler::Rejection why;
  auto t = s.submit(CompletionJob{}, Timer(), &why);
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
  Scheduler s({1, 4, 1}, [&](const Scheduler::Job&) {
    started = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return Outcome{};
  });
  Scheduler::Rejection why;
  auto running = s.submit(CompletionJob{}, Timer(), &why);
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto queued = s.submit(CompletionJob{}, Timer(), &why);
  ASSERT_TRUE(running && queued);
  s.shutdown();
  std::string t;
  EXPECT_FALSE(running->wait(&t).error);
  Outcome q = queued->wait(&t);
  ASSERT_TRUE(q.error);
  EXPECT_EQ(q.error->http_status, 503);
  EXPECT_FALSE(s.submit(CompletionJob{}, Timer(), &why));
  EXPECT_EQ(why, Scheduler::Rejection::kShuttingDown);
}

// Requests arriving at different times join one decode batch; each gets exactly generate()'s
// greedy text, and the batch really holds several of them at once.
TEST(Scheduler, ContinuousBatchingGivesEachRequestItsOwnText) {
  const std::string dir = std::string(HYPIC_SOURCE_DIR) + "/tests/models/qwen3_5_dense";
  LoadOptions lo;
  lo.compute = DType::kF32;
  lo.progress = false;
  auto model = Model::load(dir, lo);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  auto tok = Tokenizer::load(dir + "/tokenizer.json");
  ASSERT_TRUE(tok.is_ok());
  const Model& m = *model.value();
  const std::vector<std::string> prompts = {"The quick brown fox", "Once upon a time", "1 2 3 4 5",
                                            "hello", "A long time ago in a galaxy far", "x y z"};
  std::vector<std::string> want;
  for (const auto& p : prompts) {
    GenerateOptions go;
    go.max_tokens = 12;
    auto g = generate(m, tok.value(), tok->encode(p), go);
    ASSERT_TRUE(g.is_ok());
    want.push_back(g->text);
  }
  std::atomic<int> max_decoding{0};
  Scheduler* self = nullptr;
  Scheduler s({1, 8, 8}, [&](const Scheduler::Job& j) -> std::variant<Outcome, Scheduler::Decoding, std::vector<Scheduler::Decoding>> {
    const auto ids = tok->encode(std::get<CompletionJob>(j.work).request.prompt);
    Scheduler::Decoding d;
    d.state = m.new_state(int64_t(ids.size()) + 16);
    if (Status st = m.forward(d.state, ids, LogitsFor::kLast, &d.logits); !st)
      return Outcome::failed(ApiError{500, st.message(), "server_error", "", ""});
    d.options.max_tokens = 12;
    d.start = j.arrival;
    d.on_text = [t = j.ticket, &max_decoding, &self](const std::string& piece) {
      max_decoding = std::max(max_decoding.load(), self->decoding());
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // let the others join
      return t->push_text(piece);
    };
    d.finish = [](GenerateResult&& g, const Status& st) {
      Outcome o;
      if (!st) o.error = ApiError{500, st.message(), "server_error", "", ""};
      o.completion.emplace().choices.push_back(ChoiceResult{g.text, g.finish_reason, "", nullptr, {}, ""});
      return o;
    };
    return d;
  }, &m, &tok.value());
  self = &s;
  std::vector<std::shared_ptr<Ticket>> tickets;
  for (const auto& p : prompts) {
    ApiRequest r;
    r.prompt = p;
    Scheduler::Rejection why;
    tickets.push_back(s.submit(CompletionJob{r, {}, {}, {}}, Timer(), &why));
    ASSERT_TRUE(tickets.back());
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::string streamed;
    Outcome o = tickets[i]->wait(&streamed);
    ASSERT_FALSE(o.error) << o.error->message;
    EXPECT_EQ(streamed, want[i]) << prompts[i];
    ASSERT_TRUE(o.completion);
    EXPECT_EQ(o.completion->choices.at(0).text, want[i]) << prompts[i];
  }
  EXPECT_GE(max_decoding.load(), 2);
  EXPECT_EQ(s.running(), 0);
}

}  // namespace
}  // namespace hypic::server
