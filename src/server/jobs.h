// What the scheduler's prefill threads run for `hypic serve` (Scheduler::Prefill): a
// completion goes through the engine's Runner (missed segments built by its SegmentBuilder
// when segment parallelism is on, composition, the wait for the builds) and hands its
// prefilled sequence to the decode thread; a segment registration (/v1/segments) gets its
// entry from the Runner and joins the SegmentRegistry, pinned. Engine results become OpenAI
// errors and usage here; the HTTP handlers and the Combine service submit jobs and write
// what comes back.
//
// Threading: run() is called from every prefill thread at once; what it shares (Runner,
// registry, metrics) is internally synchronised. The Decoding's callbacks run on the
// decode thread.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <variant>

#include <nlohmann/json.hpp>

#include "engine/runner.h"
#include "server/metrics.h"
#include "server/engine_request.h"
#include "server/scheduler.h"
#include "server/segment_registry.h"

namespace hypic::server {

// The n choices of one request: each finished choice's outcome is kept; the last one to
// finish makes the job's (combine_choices). Thread-safe.
class ChoiceGroup {
 public:
  explicit ChoiceGroup(int n) : outs_(size_t(n)), left_(n) {}
  std::optional<api::Outcome> done(int index, api::Outcome o);

 private:
  std::mutex mu_;
  std::vector<api::Outcome> outs_;
  int left_;
};

// One outcome of the n choices' (each a one-choice result): their choices in order, one usage
// counting every choice's completion tokens; an error without a result (cancelled, failed)
// is the outcome.
api::Outcome combine_choices(std::vector<api::Outcome> outs);

class Jobs {
 public:
  struct Options {
    // Segment parallelism is configured (scatter workers, or more than one local lane):
    // hypic / naive completions build their missed segments through the runner's builder,
    // as do those whose request names its own workers (a router's).
    bool parallel = false;
    int debug_delay_ms = 0;        // tests: each job sleeps this long before running
    int debug_piece_delay_ms = 0;  // tests: and this long after each piece of text
    // The runner's store: a registration's entry is written to its disk tier (if any).
    SegmentStore* store = nullptr;
    // The model's tokenizer (completions with echo: the prompt's text and token bytes).
    const Tokenizer* tok = nullptr;
  };
  // All must outlive the jobs. `cutting`: the scheduler's drain deadline has passed
  // (Scheduler::cutting), prefills still running stop at their next layer.
  Jobs(const Runner& runner, SegmentRegistry& registry, ServerMetrics& metrics, Options opt,
       std::function<bool()> cutting);

  using Ran = std::variant<api::Outcome, Scheduler::Decoding, std::vector<Scheduler::Decoding>>;
  Ran run(const Scheduler::Job& job) const;

  // A restart: registers the durable records again, each entry from the disk tier or rebuilt
  // (progress in the log). Before serving; a record the registry no longer admits (limits
  // lowered) is logged and left in the records for a later start.
  struct Restored {
    size_t registered = 0, from_disk = 0, rebuilt = 0, refused = 0;
  };
  Result<Restored> restore(const std::vector<SegmentRecord>& records) const;

 private:
  // Prefills the prompt and hands a sequence per choice to the decode thread.
  Ran run_completion(const CompletionJob& job, const Timer& arrival, const std::shared_ptr<api::Ticket>& ticket) const;
  // Builds (or finds) the entry of the segment and registers it, pinned.
  api::Outcome run_registration(const RegistrationJob& job) const;
  // A finished generation's outcome: text, finish_reason and usage, or its error.
  // Completions with echo: the prompt's text and logprobs, put before the answer's.
  struct Echo {
    std::string text;
    std::vector<PositionLogprobs> logprobs;
  };
  // Choice `index` of the job, decoded from `state` / `logits`; its outcome goes to `group`.
  Scheduler::Decoding choice(const CompletionJob& job, const Timer& arrival, const std::shared_ptr<api::Ticket>& ticket,
                             int index, SeqState state, std::vector<float> logits, const RequestFigures& figures,
                             std::shared_ptr<Echo> echo, std::shared_ptr<ChoiceGroup> group) const;
  // `logprobs`: the endpoint whose logprobs form the result gets (none: not asked for).
  api::Outcome finish_generation(GenerateResult&& g, const Status& st, RequestFigures f,
                            std::optional<api::Endpoint> logprobs) const;

  const Runner& runner_;
  SegmentRegistry& registry_;
  ServerMetrics& metrics_;
  const Options opt_;
  const std::function<bool()> cutting_;
};

// A registration as /v1/segments shows it.
api::SegmentInfo segment_info(const RegisteredSegment& s);
// The 507 for a registration the registry would not admit (nullopt for kOk); `bytes`: the
// registration's pinned bytes.
// 503 registry_unavailable: the shared registry (--segment-store) does not answer for `id`.
api::ApiError registry_unavailable(const std::string& id, const Status& why);
// kUnavailable: `why` the record write failed (see record_write_error).
std::optional<api::ApiError> capacity_error(const SegmentRegistry& registry, SegmentRegistry::Admit a,
                                       size_t bytes, const Status& why = Status::ok());
// A registration's record could not be written or erased (`what`: "registered" / "deleted"):
// 507 insufficient_storage when its storage is full and no room could be made (it resumes
// by itself when space returns), else 503 registry_unavailable. Nothing changed either way.
api::ApiError record_write_error(const Status& why, const std::string& what);

}  // namespace hypic::server
