// What a request produced and the channel it travels through (STYLE "Serving code"): the
// job that runs it pushes text pieces and then its Outcome into a Ticket; the HTTP handler
// (api/respond.h) drains them. Fed by the server's scheduler or, in the router, by a
// forwarded gRPC stream. Thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "api/request.h"

namespace hypic::server {

// What a finished request produced: a response body (usage etc., built by its job) or an
// error. Opaque to the scheduler.
struct Outcome {
  std::optional<ApiError> error;
  nlohmann::json result;  // the job's summary (text, finish_reason, usage: server/jobs.h)
};

// Channel between one job and one HTTP handler.
class Ticket {
 public:
  // Worker side. push_text returns false once the job is cancelled; `logprobs`: the piece's
  // logprobs object (a stream that asked for them), else null.
  bool push_text(std::string text, nlohmann::json logprobs = nullptr);
  // A tool call read out of the reply ({"id", "name", "arguments"}), in order with the text.
  bool push_tool_call(nlohmann::json call);
  void finish(Outcome o);
  bool cancelled() const;

  // HTTP side. Blocks until a piece or the outcome is available. Returns true with a text
  // piece in *text, or false with the outcome in *out (once; then the ticket is done). A tool
  // call piece has empty text and the call in *tool_call (null for a text piece); a caller
  // that passes no tool_call never sees calls (their text is not in the pieces).
  bool next(std::string* text, Outcome* out, nlohmann::json* logprobs = nullptr, nlohmann::json* tool_call = nullptr);
  // Waits for the outcome, concatenating all text pieces into *text.
  Outcome wait(std::string* text);
  // next() without blocking: kPending when nothing is ready, and then `wake` is called once
  // (by the thread that pushes, finishes or cancels, outside the lock) when something is.
  enum class Next { kText, kOutcome, kPending };
  Next poll(std::string* text, Outcome* out, std::function<void()> wake, nlohmann::json* logprobs = nullptr,
            nlohmann::json* tool_call = nullptr);
  void cancel();

 private:
  // Under mu_: moves the first piece out.
  void take_front(std::string* text, nlohmann::json* logprobs, nlohmann::json* tool_call);
  bool push(std::string text, nlohmann::json logprobs, nlohmann::json tool_call);
  // Takes the waiting poll's wake (call it after unlocking).
  std::function<void()> take_wake();
  mutable std::mutex mu_;
  std::condition_variable cv_;
  struct Piece {
    std::string text;
    nlohmann::json logprobs;
    nlohmann::json tool_call;
  };
  std::deque<Piece> pieces_;
  std::optional<Outcome> outcome_;
  std::function<void()> wake_;  // guarded by mu_
  bool cancelled_ = false;
};

}  // namespace hypic::server
