// One way in for a completion, whoever carries it — the HTTP routes (server/http_server.cpp)
// or the Combine service a router forwards to (server/combine_service.cpp): the body parsed
// and validated, the request's auto segments and grammar applied, registered segment ids
// resolved, the prompt tokenised in the model's chat format, the job queued on the
// scheduler. A forwarded request is admitted exactly as a direct one. Also what both report
// when a request ends (its log line, the request counter), the load a router balances on, and
// the read-only operations both answer (/tokenize, /detokenize, /props).
//
// Threading: every method may be called from any thread at once (the registry, scheduler,
// metrics and store lock for themselves).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "api/auto_segments.h"
#include "api/request.h"
#include "api/ticket.h"
#include "cache/segment_store.h"
#include "core/timer.h"
#include "engine/tokenized_request.h"
#include "hypic_cluster.pb.h"
#include "model/model.h"
#include "server/metrics.h"
#include "server/scheduler.h"
#include "server/segment_registry.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace hypic::server {

class Admission {
 public:
  struct Options {
    std::string model_name;  // the id clients must send
    api::RequestLimits limits;
    api::AutoSegments auto_segments;  // the server's default (a request's own overrides it)
    const ReasoningFormat* reasoning = nullptr;  // as ServerOptions
    int max_batch = 0, max_queue = 0;  // the scheduler's, reported in load()
    bool log_requests = true;
    nlohmann::json props;  // GET /props: the server's effective settings (no secrets)
  };
  // All must outlive the admission.
  Admission(const Model& model, const Tokenizer& tok, SegmentRegistry& registry, Scheduler& scheduler,
            ServerMetrics& metrics, const SegmentStore& store, Options opt);

  const ChatTemplate& chat() const { return chat_; }

  // The completion `body` for endpoint `ep` checked and laid out: *r the request, *parts its
  // prompt; an error (as the client gets it) when it cannot be served.
  std::optional<api::ApiError> prepare(std::string_view body, api::Endpoint ep, api::ApiRequest* r, PromptParts* parts) const;
  // Queues the work: its ticket, or 429 (queue full) / 503 (shutting down).
  std::variant<api::ApiError, std::shared_ptr<api::Ticket>> submit(Work work, const Timer& arrival) const;

  // Expired registrations dropped from the registry (each logged).
  void sweep(SegmentRegistry::Clock::time_point now) const;
  // A JSON line on stderr (when requests are logged).
  void log(const nlohmann::json& line) const;
  // A request ended with HTTP `status`: its log line, and the request counter.
  void finished(int status, const nlohmann::json& line) const;
  // This instance's load, for a router's choice.
  cluster::pb::InstanceLoad load() const;

  // POST /tokenize, POST /detokenize (body: the request's) or GET /props: the response body,
  // or the error the client gets (an unknown path is a 404).
  std::variant<api::ApiError, nlohmann::json> query(std::string_view path, std::string_view body) const;

 private:
  const Model& model_;
  const Tokenizer& tok_;
  const ChatTemplate& chat_;
  SegmentRegistry& registry_;
  Scheduler& scheduler_;
  ServerMetrics& metrics_;
  const SegmentStore& store_;
  const Options opt_;
};

}  // namespace hypic::server
