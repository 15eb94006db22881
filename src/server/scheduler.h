// The server's only module with locks, threads and condition variables for jobs (STYLE
// "Serving code").
//
// A bounded FIFO of jobs, `workers` prefill threads and one decode thread:
//   submit()   never blocks: a full queue is answered at once (the HTTP layer turns it into
//              429 + Retry-After), a shutting-down scheduler likewise (503).
//   prefill    a worker pops a job when fewer than max_batch requests are in flight and runs
//              the Prefill function: it either finishes the job (an Outcome: errors,
//              segment registrations) or hands over a prefilled sequence (Decoding).
//   decode     the decode thread owns a DecodeBatch (continuous batching): sequences join at
//              the next step as soon as their prefill ends, leave when they finish, and every
//              step advances all of them with one Model::decode_batch. Prefill runs on its
//              own threads, so a long prompt slows the streams but never stops them.
// Each job has a Ticket (api/ticket.h): text pieces and then the outcome go into it; the HTTP
// thread drains it. Ticket::cancel() (client gone) makes the next push fail; the decode thread also
// drops cancelled sequences before each step, freeing their state.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/request.h"
#include "api/ticket.h"
#include "core/timer.h"
#include "engine/generate.h"
#include "engine/tokenized_request.h"
#include "model/model.h"
#include "server/job.h"

namespace hypic::server {

class Scheduler {
 public:
  struct Job {
    Work work;
    Timer arrival;  // TTFT is measured from here
    std::shared_ptr<api::Ticket> ticket;
  };
  // A prefilled sequence for the decode thread. on_text runs on the decode thread (return
  // false to stop); finish turns the generation into the job's outcome (status: ok,
  // kCancelled, or the model's error), or nullopt while other sequences of the same job (its
  // choices, n > 1) still run: the last one to finish gives the outcome.
  struct Decoding {
    SeqState state;
    std::vector<float> logits;  // [V], the prompt's last token
    GenerateOptions options;
    TextCallback on_text;
    std::function<std::optional<api::Outcome>(GenerateResult&&, const Status&)> finish;
    Timer start;  // the request's arrival: TTFT is measured from here
  };
  // Runs on a prefill thread; must not throw. Several Decodings: the job's choices, each a
  // sequence of the batch.
  using Prefill = std::function<std::variant<api::Outcome, Decoding, std::vector<Decoding>>(const Job& job)>;

  struct Options {
    int workers = 1;     // prefill threads
    int max_queue = 16;  // jobs waiting beyond the in-flight ones
    int max_batch = 16;  // requests in flight (prefilling or decoding) at once
  };

  enum class Rejection { kNone, kQueueFull, kShuttingDown };

  // `model` and `tok` (for the decode batch) must outlive the scheduler; null only when the
  // Prefill never returns a Decoding (tests of the queueing alone).
  Scheduler(Options opt, Prefill prefill, const Model* model = nullptr, const Tokenizer* tok = nullptr);
  ~Scheduler();  // shutdown()
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Enqueues; on rejection returns nullptr and says why. Never blocks.
  std::shared_ptr<api::Ticket> submit(Work work, Timer arrival, Rejection* why);

  // Stops accepting, answers queued jobs with 503 and lets in-flight ones finish (unless
  // their clients cancel) — with a `deadline`, for at most that long: then every sequence
  // still decoding ends with what it produced (finish_reason "abort", Status kUnavailable);
  // a prefill still running sees cutting() and stops at its next layer (or, once it returns,
  // its sequence is cut like the others). Joins the threads.
  // Returns how many requests the deadline cut. Idempotent; call from one thread (the owner).
  int shutdown(std::optional<std::chrono::milliseconds> deadline = std::nullopt);

  // True once the drain deadline passed: prefills still running should stop (their pass's
  // cancel check). Any thread.
  bool cutting() const { return cutting_.load(); }

  int queued() const;
  int running() const;  // in flight: prefilling, waiting for the batch, or decoding
  int decoding() const;

 private:
  struct Ready {
    std::shared_ptr<api::Ticket> ticket;
    Decoding d;
  };
  void worker_loop();
  void decode_loop();
  Options opt_;
  Prefill prefill_;
  const Model* model_;
  const Tokenizer* tok_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  std::deque<Ready> ready_;  // prefilled, joining the batch at its next step
  int prefilling_ = 0, decoding_ = 0;
  bool stopping_ = false;
  bool cut_ = false;  // the drain deadline passed: end what still runs
  std::atomic<bool> cutting_{false};  // cut_, readable without mu_
  int cut_count_ = 0;
  std::vector<std::thread> workers_;
  std::thread decoder_;
};

}  // namespace hypic::server
