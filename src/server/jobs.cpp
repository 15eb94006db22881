#include "server/jobs.h"

#include <chrono>
#include <ctime>
#include <memory>
#include <thread>

#include "api/http_util.h"
#include "api/reasoning.h"
#include "core/log.h"
#include "server/logprobs_json.h"
#include "server/usage.h"

namespace hypic::server {

using namespace api;  // the server speaks the API's types

using nlohmann::json;

namespace {

// A reply read for tool calls as it streams: content pieces and calls go to the ticket in
// order; the whole content and the calls are kept for the outcome.
struct ToolReply {
  ToolReply(const ApiRequest& r, int choice) : reader(r.tool_call_open, r.tool_call_close, r.tools), choice(choice) {}
  // False once the ticket is cancelled. `lp` goes with the first content piece.
  bool push(std::vector<ToolCallReader::Event> events, Ticket& t, json lp) {
    bool ok = true;
    for (auto& e : events) {
      if (e.is_call) {
        calls.push_back(e.call);
        ok = t.push_call(e.call, int(calls.size()) - 1, choice) && ok;
      } else {
        content += e.text;
        ok = t.push_text(e.text, std::exchange(lp, nullptr), choice) && ok;
      }
    }
    return ok;
  }
  ToolCallReader reader;
  int choice;
  std::string content;
  std::vector<ToolCall> calls;
};

// A reply that starts inside a reasoning block, read apart as it streams: reasoning pieces
// go to the ticket as such, content on to `content` (the tool reader, or the ticket).
struct ThinkingReply {
  // False once the ticket is cancelled.
  bool push(ReasoningReader::Out o, Ticket& t, int choice, const std::function<bool(const std::string&)>& content_fn) {
    bool ok = true;
    if (!o.reasoning.empty()) {
      reasoning += o.reasoning;
      ok = t.push_reasoning(o.reasoning, choice);
    }
    if (!o.content.empty()) {
      content += o.content;
      ok = content_fn(o.content) && ok;
    }
    return ok;
  }
  ReasoningReader reader;
  std::string reasoning, content;
};

}  // namespace

Outcome combine_choices(std::vector<Outcome> outs) {
  if (outs.size() == 1) return std::move(outs[0]);
  for (Outcome& c : outs)
    if (!c.completion) return std::move(c);
  Outcome o;
  o.completion.emplace();
  CompletionResult& r = *o.completion;
  r.usage = outs[0].completion->usage;  // the prompt's figures: the same for every choice
  r.usage.completion_tokens = 0;
  for (Outcome& c : outs) {
    if (c.error) o.error = c.error;  // cut at the drain deadline: the results, then the error
    r.usage.completion_tokens += c.completion->usage.completion_tokens;
    r.choices.push_back(std::move(c.completion->choices.front()));
  }
  return o;
}

std::optional<Outcome> ChoiceGroup::done(int index, Outcome o) {
  std::lock_guard<std::mutex> l(mu_);
  outs_[size_t(index)] = std::move(o);
  if (--left_ > 0) return std::nullopt;
  return combine_choices(std::move(outs_));
}

namespace {

ApiError drain_cut_error() {
  return make_error(503, "the server is shutting down: this reply was cut at the drain deadline (--drain-timeout); "
                         "a stream's finish_reason is \"abort\"; retry the request",
                    "server_error", "shutting_down");
}

}  // namespace

SegmentInfo segment_info(const RegisteredSegment& s) {
  SegmentInfo i;
  i.id = s.id;
  i.tokens = int64_t(s.tokens.size());
  i.cached = s.pin != nullptr;
  i.bytes = int64_t(s.bytes);
  i.seam = s.seam;
  i.created = s.created;
  i.expires_at = s.expires_at;
  return i;
}

std::optional<ApiError> capacity_error(const SegmentRegistry& registry, SegmentRegistry::Admit a,
                                       size_t bytes, const Status& why) {
  const auto& o = registry.options();
  switch (a) {
    case SegmentRegistry::Admit::kOk: return std::nullopt;
    case SegmentRegistry::Admit::kTooMany:
      return make_error(507, "too many registered segments (at most " + std::to_string(o.max_segments) +
                                 "); DELETE /v1/segments/{id} ones you no longer need, or register with a 'ttl'",
                        "invalid_request_error", "segment_capacity_exceeded");
    case SegmentRegistry::Admit::kTooManyBytes:
      return make_error(507, "registering this segment (" + std::to_string(bytes) + " bytes of cache) would pin more than the " +
                                 std::to_string(o.max_bytes) + " bytes allowed for registered segments; DELETE /v1/segments/{id} "
                                 "ones you no longer need, or register with a 'ttl'",
                        "invalid_request_error", "segment_capacity_exceeded");
    case SegmentRegistry::Admit::kUnavailable: return record_write_error(why, "registered");
  }
  return std::nullopt;
}

ApiError record_write_error(const Status& why, const std::string& what) {
  if (why.code() == StatusCode::kResourceExhausted)
    return make_error(507, "the segment registry's storage is full (" + why.message() + ") and no cache files are left "
                           "to delete; nothing was " + what + ". Free space on the disk of --cache-dir: the server "
                           "resumes by itself",
                      "server_error", "insufficient_storage");
  return make_error(503, "the segment registry's storage failed (see the server log); nothing was " + what +
                         ", try again",
                    "server_error", "registry_unavailable");
}

ApiError registry_unavailable(const std::string& id, const Status& why) {
  HYPIC_LOG_WARN("segment '%s' could not be looked up: %s", id.c_str(), why.to_string().c_str());
  return make_error(503, "segment '" + id + "' is not held by this instance and the shared segment registry does not "
                         "answer (see the server log); try again shortly",
                    "server_error", "registry_unavailable");
}

Jobs::Jobs(const Runner& runner, SegmentRegistry& registry, ServerMetrics& metrics, Options opt,
           std::function<bool()> cutting)
    : runner_(runner), registry_(registry), metrics_(metrics), opt_(opt), cutting_(std::move(cutting)) {}

Jobs::Ran Jobs::run(const Scheduler::Job& job) const {
  if (opt_.debug_delay_ms > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(opt_.debug_delay_ms));
  if (const auto* reg = std::get_if<RegistrationJob>(&job.work)) return run_registration(*reg);
  return run_completion(std::get<CompletionJob>(job.work), job.arrival, job.ticket);
}

Jobs::Ran Jobs::run_completion(const CompletionJob& job, const Timer& arrival, const std::shared_ptr<Ticket>& ticket) const {
  Outcome out;
  const ApiRequest& r = job.request;
  if (job.client_gone && job.client_gone()) {  // left while queued
    out.error = cancelled_error();
    return out;
  }
  RunOptions ro;
  ro.compose.mode = r.mode;
  ro.compose.seam = r.seam;
  ro.compose.salt = r.cache_salt;
  // A client that leaves, or the drain deadline, stops the prefill at its next layer.
  ro.compose.cancelled = [gone = job.client_gone, this] { return (gone && gone()) || cutting_(); };
  ro.decode_tokens = r.max_tokens;
  ro.parallel = opt_.parallel || !job.scatter_workers.empty();
  ro.workers = job.scatter_workers.empty() ? nullptr : &job.scatter_workers;
  const TokenizedRequest req = make_request(runner_.model(), job.parts, r.seam, r.cache_salt);
  auto echo = std::make_shared<Echo>();
  if (r.echo && !opt_.tok) {
    out.error = make_error(500, "echo needs the tokenizer (Jobs::Options::tok)", "server_error", "internal_error");
    return out;
  }
  // Echo with logprobs scores every prompt position (a full forward); without, only the text.
  Result<Prefilled> p = r.echo && r.logprobs >= 0
                            ? runner_.prefill_scored(job.parts.concatenated(), ro, *opt_.tok,
                                                     std::max(0, r.logprobs), &echo->logprobs)
                            : runner_.prefill(req, ro);
  if (p && r.echo) echo->text = opt_.tok->decode(job.parts.concatenated());
  if (!p) {
    const Status& s = p.status();
    out.error = s.code() != StatusCode::kCancelled ? status_error(s)
                : cutting_()                       ? drain_cut_error()
                                                   : cancelled_error();
    return out;
  }
  metrics_.record_compose(p->figures.compose);
  // Decoding continues on the scheduler's decode thread, batched with the other requests:
  // one sequence per choice, each from a copy of the prefilled state.
  if (r.echo && r.stream)  // the prompt first
    for (int i = 0; i < r.n; ++i)
      ticket->push_text(echo->text, r.logprobs >= 0 ? logprobs_json(echo->logprobs, r.endpoint) : json(nullptr), i);
  auto group = std::make_shared<ChoiceGroup>(r.n);
  std::vector<Scheduler::Decoding> seqs;
  for (int i = 0; i < r.n; ++i) {
    const bool last = i + 1 == r.n;
    seqs.push_back(choice(job, arrival, ticket, i, last ? std::move(p->state) : p->state.copy(),
                          last ? std::move(p->logits) : p->logits, p->figures, echo, group));
  }
  if (seqs.size() == 1) return std::move(seqs[0]);
  return seqs;
}

Scheduler::Decoding Jobs::choice(const CompletionJob& job, const Timer& arrival, const std::shared_ptr<Ticket>& ticket,
                                 int index, SeqState state, std::vector<float> logits, const RequestFigures& figures,
                                 std::shared_ptr<Echo> echo, std::shared_ptr<ChoiceGroup> group) const {
  const ApiRequest& r = job.request;
  Scheduler::Decoding d;
  d.state = std::move(state);
  d.logits = std::move(logits);
  d.options = generate_options(r);
  d.options.sampling.seed += uint64_t(index);  // each choice its own stream, reproducible with `seed`
  d.start = arrival;
  auto itl = std::make_shared<InterTokenTimer>(&metrics_.inter_token);
  // A stream with logprobs: each piece carries those of the tokens it came from.
  auto piece_lp = std::make_shared<json>(nullptr);
  if (r.stream && r.logprobs >= 0)
    d.options.on_logprobs = [piece_lp, ep = r.endpoint, offset = echo->text.size()](std::vector<PositionLogprobs> lp) mutable {
      *piece_lp = logprobs_json(lp, ep, offset);
      for (const PositionLogprobs& p : lp) offset += p.chosen.bytes.size();
    };
  auto tools = r.uses_tools() ? std::make_shared<ToolReply>(r, index) : nullptr;
  auto thinking = r.thinking ? std::make_shared<ThinkingReply>() : nullptr;
  // Content text (the reply's, or what follows its reasoning): to the tool reader or the ticket.
  auto content = [ticket, piece_lp, tools, index](const std::string& t) {
    if (tools) return tools->push(tools->reader.feed(t), *ticket, std::exchange(*piece_lp, nullptr));
    return ticket->push_text(t, std::exchange(*piece_lp, nullptr), index);
  };
  d.on_text = [this, itl, ticket, gone = job.client_gone, thinking, content, index](const std::string& t) {
    itl->tick();
    if (opt_.debug_piece_delay_ms > 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(opt_.debug_piece_delay_ms));
    if (gone && gone()) {  // non-streaming client gone
      ticket->cancel();
      return false;
    }
    if (thinking) return thinking->push(thinking->reader.feed(t), *ticket, index, content);
    return content(t);
  };
  d.finish = [this, f = figures, ep = r.endpoint, lp = r.logprobs >= 0, made = r.auto_segments_made,
              echo = r.echo ? echo : nullptr, tools, thinking, content, ticket, group, index](GenerateResult&& g,
                                                                                             const Status& st) {
    if (echo) {  // the answer starts with the prompt
      g.text = echo->text + g.text;
      g.logprobs.insert(g.logprobs.begin(), echo->logprobs.begin(), echo->logprobs.end());
    }
    if (thinking) thinking->push(thinking->reader.finish(), *ticket, index, content);
    if (tools) tools->push(tools->reader.finish(g.finish_reason == "length"), *ticket, nullptr);
    Outcome o = finish_generation(std::move(g), st, f, lp ? std::optional<Endpoint>(ep) : std::nullopt);
    if (o.completion) o.completion->usage.auto_segments = made;
    if (thinking && o.completion) {  // the reasoning apart from the content
      ChoiceResult& c = o.completion->choices.front();
      c.reasoning = thinking->reasoning;
      c.text = thinking->content;
    }
    if (tools && o.completion) {  // the content without the calls, and the calls
      ChoiceResult& c = o.completion->choices.front();
      c.text = tools->content;
      c.tool_calls = tools->calls;
      if (!c.tool_calls.empty() && c.finish_reason == "stop") c.finish_reason = "tool_calls";
    }
    return group->done(index, std::move(o));
  };
  return d;
}

Outcome Jobs::finish_generation(GenerateResult&& g, const Status& d, RequestFigures f,
                                std::optional<Endpoint> logprobs) const {
  Outcome out;
  metrics_.record_generation(int64_t(g.tokens.size()), g.tokens.empty() ? -1.0 : g.ttft_ms);
  // Cut at the drain deadline: what it produced (a stream ends with it), then the error.
  const bool cut = d.code() == StatusCode::kUnavailable;
  if (!d && !cut) {
    out.error = d.code() == StatusCode::kCancelled
                    ? cancelled_error()
                    : make_error(500, d.message(), "server_error", "internal_error");
    return out;
  }
  if (cut) out.error = drain_cut_error();
  f.ttft_ms = g.ttft_ms;
  f.completion_tokens = int64_t(g.tokens.size());
  ChoiceResult c;
  c.text = std::move(g.text);
  c.finish_reason = std::move(g.finish_reason);
  c.stop_sequence = std::move(g.stop_sequence);
  if (logprobs) c.logprobs = logprobs_json(g.logprobs, *logprobs);
  out.completion = CompletionResult{{std::move(c)}, usage_of(f)};
  return out;
}

Outcome Jobs::run_registration(const RegistrationJob& sr) const {
  Outcome out;
  auto seg = std::make_shared<RegisteredSegment>();
  seg->id = SegmentRegistry::new_id();
  seg->salt = sr.cache_salt;
  seg->seam = sr.seam;
  seg->tokens = sr.tokens;
  ComposeOptions co;
  co.seam = sr.seam;
  co.salt = seg->salt;
  // An inline use may have cached it already. Too short to have a body: no entry, registered
  // all the same (recomputed wherever it is used).
  auto pin = runner_.entry_for(seg->tokens, co);
  if (!pin) {
    out.error = status_error(pin.status());
    return out;
  }
  seg->pin = std::move(pin).value();
  seg->bytes = seg->pin ? seg->pin->bytes() : 0;
  seg->created = int64_t(std::time(nullptr));
  const auto now = SegmentRegistry::Clock::now();
  if (sr.ttl_seconds) {
    seg->expires_at = seg->created + *sr.ttl_seconds;
    seg->deadline = now + std::chrono::seconds(*sr.ttl_seconds);
  }
  // With a disk tier the entry's file is written before the registration is: a restart
  // (even after kill -9) finds it there instead of rebuilding.
  if (seg->pin && opt_.store) {
    if (Status st = opt_.store->persist(seg->pin->key); !st)
      HYPIC_LOG_WARN("registration %s: its entry was not written to the disk tier (a restart rebuilds it): %s",
                     seg->id.c_str(), st.to_string().c_str());
  }
  Status why;
  if (auto e = capacity_error(registry_, registry_.add(seg, now, &why), seg->bytes, why)) {
    if (!why.is_ok()) HYPIC_LOG_ERROR("registration %s: %s", seg->id.c_str(), why.to_string().c_str());
    out.error = *e;
    return out;
  }
  out.segment = segment_info(*seg);
  return out;
}

Result<Jobs::Restored> Jobs::restore(const std::vector<SegmentRecord>& records) const {
  Restored out;
  if (records.empty()) return out;
  HYPIC_LOG_INFO("segment registry: restoring %zu registered segments", records.size());
  const Timer t;
  double last_report = 0;
  for (const SegmentRecord& r : records) {
    const auto now = SegmentRegistry::Clock::now();
    auto seg = SegmentRegistry::from_record(r, now);
    ComposeOptions co;
    co.seam = r.seam;
    co.salt = r.salt;
    const uint64_t misses = opt_.store ? opt_.store->stats().misses : 0;
    auto pin = runner_.entry_for(seg->tokens, co);
    if (!pin) return pin.status().with_context("restoring registered segment '" + r.id + "'");
    seg->pin = std::move(pin).value();
    seg->bytes = seg->pin ? seg->pin->bytes() : 0;
    if (seg->pin && opt_.store) {
      const bool built = opt_.store->stats().misses > misses;
      ++(built ? out.rebuilt : out.from_disk);
      if (built) (void)opt_.store->persist(seg->pin->key);
    }
    if (registry_.add(seg, now, nullptr, /*restored=*/true) != SegmentRegistry::Admit::kOk) {
      HYPIC_LOG_WARN("segment registry: '%s' does not fit the registry's limits now; it stays recorded and "
                     "is not served (raise --registered-mem / --max-registered-segments)", r.id.c_str());
      ++out.refused;
      continue;
    }
    ++out.registered;
    if (t.ms() - last_report >= 2000) {
      last_report = t.ms();
      HYPIC_LOG_INFO("segment registry: restored %zu of %zu", out.registered + out.refused, records.size());
    }
  }
  HYPIC_LOG_INFO("segment registry: %zu segments restored in %.0f ms (%zu entries from disk, %zu rebuilt, %zu refused)",
                 out.registered, t.ms(), out.from_disk, out.rebuilt, out.refused);
  return out;
}

}  // namespace hypic::server
