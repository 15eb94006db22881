// The server's only module with locks, threads and condition variables (STYLE "Serving code").
//
// A bounded FIFO of jobs and N worker threads. submit() never blocks: a full queue is
// answered at once (the HTTP layer turns it into 429 + Retry-After), a shutting-down
// scheduler likewise (503). Each job has a Ticket: the worker pushes text pieces and then
// the final outcome into it; the HTTP thread blocks on next(). Ticket::cancel() (client
// gone) makes the worker's next push return false, which stops decoding.
//
// Workers run one request at a time from prefill to the last token (no batching yet; the
// next step is continuous batching of decode steps across requests, which belongs here).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/timer.h"
#include "server/request.h"

namespace hypic::server {

// What a finished request produced: a response body (usage etc., built by the runner) or an
// error. Opaque to the scheduler.
struct Outcome {
  std::optional<ApiError> error;
  nlohmann::json result;  // runner-defined summary (text, finish_reason, usage)
};

// Channel between one worker and one HTTP handler. Thread-safe.
class Ticket {
 public:
  // Worker side. push_text returns false once the job is cancelled.
  bool push_text(std::string text);
  void finish(Outcome o);
  bool cancelled() const;

  // HTTP side. Blocks until a piece or the outcome is available. Returns true with a text
  // piece in *text, or false with the outcome in *out (once; then the ticket is done).
  bool next(std::string* text, Outcome* out);
  // Waits for the outcome, concatenating all text pieces into *text.
  Outcome wait(std::string* text);
  void cancel();

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> pieces_;
  std::optional<Outcome> outcome_;
  bool cancelled_ = false;
};

class Scheduler {
 public:
  struct Job {
    ApiRequest request;
    PromptParts parts;  // tokenised and length-checked before submission
    Timer arrival;      // TTFT is measured from here
    std::shared_ptr<Ticket> ticket;
  };
  // Runs a job on a worker thread: streams text into job.ticket (stopping when push_text
  // returns false) and returns the outcome. Must not throw.
  using Runner = std::function<Outcome(const Job& job)>;

  struct Options {
    int workers = 1;
    int max_queue = 16;  // jobs waiting for a worker (running ones not counted)
  };

  enum class Rejection { kNone, kQueueFull, kShuttingDown };

  Scheduler(Options opt, Runner runner);
  ~Scheduler();  // shutdown()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Enqueues; on rejection returns nullptr and says why. Never blocks.
  std::shared_ptr<Ticket> submit(ApiRequest request, PromptParts parts, Timer arrival,
                                 Rejection* why);

  // Stops accepting, answers queued jobs with 503, waits for running ones to finish (they
  // run to completion unless their client cancels), joins the workers. Idempotent; call from one
  // thread (the owner).
  void shutdown();

  int queued() const;
  int running() const;

 private:
  void worker_loop();
  Options opt_;
  Runner runner_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  int running_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace hypic::server
