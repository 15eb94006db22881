// Writing a completion's HTTP response from its Ticket: one JSON body, or Server-Sent
// Events (OpenAI's chunk objects, "data: [DONE]" last). Shared by HttpServer (the ticket is
// fed by the scheduler) and router::Router (fed by a forwarded gRPC stream).
#pragma once

#include <ctime>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "server/scheduler.h"

namespace httplib {
struct Response;
}

namespace hypic::server {

struct ReplyMeta {
  std::string id;  // "chatcmpl-N" / "cmpl-N"
  bool chat = true;
  std::time_t created = 0;
  std::string model;
  bool stream = false;
  bool include_usage = false;
};

// Called exactly once, on the connection's thread, when the reply ended: the HTTP status
// (499: the client left), the usage object (null unless it succeeded), the error code.
using ReplyDone = std::function<void(int status, const nlohmann::json& usage, const std::string& error_code)>;

// Non-streaming: waits for the outcome and sets the body now. Streaming: installs a chunked
// content provider that drains the ticket as httplib writes; a failed write cancels the
// ticket. Errors after the 200 header are sent as a data event holding the error object.
void reply_completion(httplib::Response& res, std::shared_ptr<Ticket> ticket, ReplyMeta meta,
                      ReplyDone done);

}  // namespace hypic::server
