// Writing a completion's HTTP response from its Ticket: one JSON body, or Server-Sent
// Events (OpenAI's chunk objects, "data: [DONE]" last). Shared by HttpServer (the ticket is
// fed by the scheduler) and router::Router (fed by a forwarded gRPC stream). Nothing here
// blocks: the ticket is drained as it fills (Ticket::poll).
#pragma once

#include <ctime>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "api/http_front.h"
#include "api/ticket.h"

namespace hypic::server {

struct ReplyMeta {
  std::string id;  // "chatcmpl-N" / "cmpl-N"
  bool chat = true;
  std::time_t created = 0;
  std::string model;
  bool stream = false;
  bool include_usage = false;
  bool anthropic = false;  // POST /v1/messages: Anthropic's shapes (api/anthropic.h)
};

// Called exactly once, on whichever thread ended the reply: the HTTP status (499: the
// client left), the usage object (null unless it succeeded), the error code.
using ReplyDone = std::function<void(int status, const nlohmann::json& usage, const std::string& error_code)>;

// Non-streaming: answers once the outcome is in (the text collected meanwhile). Streaming:
// answers 200 at once with a BodyStream that turns the ticket's pieces into events; a
// connection that ends first cancels the ticket. Errors after the 200 header are sent as a
// data event holding the error object. An outcome that has both a result and an error (a
// stream cut at the drain deadline) ends with the result's finish chunk (and usage, when
// asked), then the error event.
void reply_completion(Reply reply, std::shared_ptr<Ticket> ticket, ReplyMeta meta, ReplyDone done);

// Calls `fn` once with the text collected and the outcome: on the thread that finishes the
// ticket, or on this one if it already has. Never blocks.
void when_finished(std::shared_ptr<Ticket> ticket, std::function<void(std::string text, Outcome o)> fn);

}  // namespace hypic::server
