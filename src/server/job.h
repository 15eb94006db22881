// The work the server queues (server/scheduler.h), typed by what it is: a completion, or a
// segment registration. Each carries only what running it needs; the parsed request stays
// the API's (api/request.h), the carrier (HTTP route, Combine service) adds the rest.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "api/request.h"
#include "engine/tokenized_request.h"

namespace hypic::server {

struct CompletionJob {
  api::ApiRequest request;
  PromptParts parts;  // tokenised and length-checked before submission
  // True once the client has disconnected; polled between layers and tokens. Empty: no
  // probe (a stream notices a failed write instead).
  std::function<bool()> client_gone;
  // A router's forward: the scatter workers this request's cold segments may be built on,
  // replacing the server's --scatter-workers.
  std::vector<std::string> scatter_workers;
};

// POST /v1/segments: build (or find) the entry of `tokens` and register it, pinned.
struct RegistrationJob {
  std::vector<int32_t> tokens;
  std::string cache_salt;
  int seam = 8;
  std::optional<int64_t> ttl_seconds;  // none: kept until DELETE
};

using Work = std::variant<CompletionJob, RegistrationJob>;

}  // namespace hypic::server
