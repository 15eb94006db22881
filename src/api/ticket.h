// What a request produced and the channel it travels through (STYLE "Serving code"): the
// job that runs it pushes text pieces and then its Outcome into a Ticket; the HTTP handler
// (api/respond.h) drains them. Fed by the server's scheduler or, in the router, by a
// forwarded gRPC stream. Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "api/request.h"
#include "api/result.h"

namespace hypic::api {

// What a finished job produced: a completion's result, a registration's segment, or an
// error — or a result and an error both (a completion cut at the drain deadline). Opaque to
// the scheduler.
struct Outcome {
  std::optional<ApiError> error;
  std::optional<CompletionResult> completion;
  std::optional<SegmentInfo> segment;
  static Outcome failed(ApiError e) { return Outcome{std::move(e), std::nullopt, std::nullopt}; }
};

// Channel between one job and one HTTP handler.
class Ticket {
 public:
  // A piece of a reply: text (with, for a stream that asked for them, its logprobs object),
  // or a tool call read out of the reply (text empty), the choice's call number `call_index`;
  // `choice`: which of the request's n choices it belongs to.
  struct Piece {
    std::string text;
    nlohmann::json logprobs;
    std::optional<ToolCall> tool_call;
    int call_index = 0;
    int choice = 0;
    bool reasoning = false;  // text of the reply's reasoning, not its content
  };

  // Worker side. push returns false once the job is cancelled.
  bool push(Piece p);
  bool push_call(ToolCall call, int call_index, int choice) {
    return push(Piece{"", nullptr, std::move(call), call_index, choice});
  }
  bool push_text(std::string text, nlohmann::json logprobs = nullptr, int choice = 0) {
    return push(Piece{std::move(text), std::move(logprobs), std::nullopt, 0, choice});
  }
  bool push_reasoning(std::string text, int choice = 0) {
    return push(Piece{std::move(text), nullptr, std::nullopt, 0, choice, true});
  }
  void finish(Outcome o);
  bool cancelled() const;

  // HTTP side. Blocks until a piece or the outcome is available. Returns true with a piece
  // in *p, or false with the outcome in *out (once; then the ticket is done).
  bool next(Piece* p, Outcome* out);
  // next() waiting at most `max_wait`: kPending when nothing came meanwhile.
  enum class Next { kText, kOutcome, kPending };
  Next next_for(Piece* p, Outcome* out, std::chrono::milliseconds max_wait);
  // next() for content text alone: tool-call and reasoning pieces are skipped.
  bool next(std::string* text, Outcome* out);
  // Waits for the outcome, concatenating all text pieces into *text.
  Outcome wait(std::string* text);
  // next() without blocking: kPending when nothing is ready, and then `wake` is called once
  // (by the thread that pushes, finishes or cancels, outside the lock) when something is.
  Next poll(Piece* p, Outcome* out, std::function<void()> wake);
  void cancel();

 private:
  // Moves the next piece or the outcome out (lock held); kPending when there is neither.
  Next take_locked(Piece* p, Outcome* out);
  // Takes the waiting poll's wake (call it after unlocking).
  std::function<void()> take_wake();
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Piece> pieces_;
  std::optional<Outcome> outcome_;
  std::function<void()> wake_;  // guarded by mu_
  bool cancelled_ = false;
};

}  // namespace hypic::api
