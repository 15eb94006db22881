// Writing a completion's HTTP response from its Ticket: one JSON body, or Server-Sent
// Events (OpenAI's chunk objects, "data: [DONE]" last). Shared by HttpServer (the ticket is
// fed by the scheduler) and router::Router (fed by a forwarded gRPC stream). Nothing here
// blocks: the ticket is drained as it fills (Ticket::poll).
#pragma once

#include <atomic>
#include <ctime>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "api/http_front.h"
#include "api/ticket.h"

namespace hypic::api {

struct ReplyMeta {
  std::string id;  // "chatcmpl-N" / "cmpl-N"
  bool chat = true;
  std::time_t created = 0;
  std::string model;
  bool stream = false;
  bool include_usage = false;
  bool anthropic = false;  // POST /v1/messages: Anthropic's shapes (api/anthropic.h)
  int choices = 1;         // the request's n
};

// Called exactly once, on whichever thread ended the reply: the HTTP status (499: the
// client left), the usage object (usage_json; null unless it succeeded), the error code.
using ReplyDone = std::function<void(int status, const nlohmann::json& usage, const std::string& error_code)>;

// Non-streaming: answers once the outcome is in (the text collected meanwhile). Streaming:
// answers 200 at once with a BodyStream that turns the ticket's pieces into events; a
// connection that ends first cancels the ticket. Errors after the 200 header are sent as a
// data event holding the error object. An outcome that has both a result and an error (a
// stream cut at the drain deadline) ends with the result's finish chunk (and usage, when
// asked), then the error event.
void reply_completion(Reply reply, std::shared_ptr<Ticket> ticket, ReplyMeta meta, ReplyDone done);

// The reply's end, reported once, whichever thread gets there first.
class ReplyOnce {
 public:
  explicit ReplyOnce(ReplyDone done) : done_(std::move(done)) {}
  void operator()(int status, const nlohmann::json& usage, const std::string& code) {
    if (!called_.exchange(true)) done_(status, usage, code);
  }

 private:
  ReplyDone done_;
  std::atomic<bool> called_{false};
};

// A streamed reply drained from its Ticket as it fills; subclasses write the events (the
// OpenAI chunks, Anthropic's events). A connection that ends first cancels the ticket (499).
class TicketBodyStream : public BodyStream {
 public:
  TicketBodyStream(std::shared_ptr<Ticket> t, ReplyDone done)
      : ticket_(std::move(t)), end_(std::make_shared<ReplyOnce>(std::move(done))) {}
  Poll poll(std::string* out, const std::function<void()>& wake) final;
  void abandon() final;

 protected:
  virtual void start(std::string* out) = 0;
  // A text piece / a tool call read out of the reply (its number `index` in the choice) of
  // choice `choice`.
  virtual void piece(const std::string& text, nlohmann::json logprobs, int choice, std::string* out) = 0;
  virtual void tool_call(const ToolCall& call, int index, int choice, std::string* out) = 0;
  // A piece of the reply's reasoning. Default: not sent.
  virtual void reasoning(const std::string& text, int choice, std::string* out) {}
  // The last events; then reports the end through end().
  virtual void finish(const Outcome& o, std::string* out) = 0;
  ReplyOnce& end() { return *end_; }

 private:
  std::shared_ptr<Ticket> ticket_;
  std::shared_ptr<ReplyOnce> end_;
  bool started_ = false;
};

// A 200 text/event-stream response whose body comes from `stream`.
HttpResponse sse_response(std::shared_ptr<BodyStream> stream);

// Calls `fn` once with the text collected and the outcome: on the thread that finishes the
// ticket, or on this one if it already has. Never blocks.
void when_finished(std::shared_ptr<Ticket> ticket, std::function<void(std::string text, Outcome o)> fn);

}  // namespace hypic::api
