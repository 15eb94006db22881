#include "server/scheduler.h"

#include <map>

#include "engine/batch_decode.h"

namespace hypic::server {

using namespace api;  // the server speaks the API's types

namespace {

ApiError cancelled() { return ApiError{499, "cancelled by the client", "invalid_request_error", "", "cancelled"}; }

}  // namespace

Scheduler::Scheduler(Options opt, Prefill prefill, const Model* model, const Tokenizer* tok)
    : opt_(opt), prefill_(std::move(prefill)), model_(model), tok_(tok) {
  if (opt_.workers < 1) opt_.workers = 1;
  if (opt_.max_queue < 0) opt_.max_queue = 0;
  if (opt_.max_batch < 1) opt_.max_batch = 1;
  for (int i = 0; i < opt_.workers; ++i) workers_.emplace_back([this] { worker_loop(); });
  decoder_ = std::thread([this] { decode_loop(); });
}

Scheduler::~Scheduler() { shutdown(); }

std::shared_ptr<Ticket> Scheduler::submit(Work work, Timer arrival, Rejection* why) {
  std::lock_guard<std::mutex> lk(mu_);
  if (stopping_) {
    *why = Rejection::kShuttingDown;
    return nullptr;
  }
  // Admitted jobs (in flight + waiting) are bounded by max_batch + max_queue.
  const int in_flight = prefilling_ + int(ready_.size()) + decoding_;
  if (in_flight + int(queue_.size()) >= opt_.max_batch + opt_.max_queue) {
    *why = Rejection::kQueueFull;
    return nullptr;
  }
  *why = Rejection::kNone;
  auto t = std::make_shared<Ticket>();
  queue_.push_back(Job{std::move(work), arrival, t});
  cv_.notify_all();
  return t;
}

void Scheduler::worker_loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] {
        const int in_flight = prefilling_ + int(ready_.size()) + decoding_;
        return (stopping_ && queue_.empty()) || (!queue_.empty() && in_flight < opt_.max_batch);
      });
      if (queue_.empty()) return;  // stopping and drained
      job = std::move(queue_.front());
      queue_.pop_front();
      ++prefilling_;
    }
    std::variant<Outcome, Decoding, std::vector<Decoding>> r;
    if (job.ticket->cancelled()) {
      r = Outcome::failed(cancelled());
    } else {
      r = prefill_(job);
    }
    std::vector<Decoding> seqs;
    if (auto* d = std::get_if<Decoding>(&r)) seqs.push_back(std::move(*d));
    if (auto* ds = std::get_if<std::vector<Decoding>>(&r)) seqs = std::move(*ds);
    if (!seqs.empty() && !model_) {
      for (Decoding& d : seqs) static_cast<void>(d.finish(GenerateResult{}, internal_error("the scheduler has no model to decode with")));
      seqs.clear();
      r = Outcome::failed(ApiError{500, "no decoder", "server_error", "", "internal_error"});
    }
    {
      std::lock_guard<std::mutex> lk(mu_);  // counts are exact before the outcome is visible
      --prefilling_;
      // A prefill the drain deadline stopped (its cancel check) counts as cut.
      if (auto* o = std::get_if<Outcome>(&r); o && cut_ && o->error && o->error->code == "shutting_down") ++cut_count_;
      for (Decoding& d : seqs) ready_.push_back(Ready{job.ticket, std::move(d)});
      cv_.notify_all();
    }
    if (auto* o = std::get_if<Outcome>(&r)) job.ticket->finish(std::move(*o));
  }
}

void Scheduler::decode_loop() {
  if (!model_) {  // queueing-only scheduler: nothing will ever be ready
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return stopping_ && queue_.empty() && prefilling_ == 0; });
    return;
  }
  DecodeBatch batch(*model_, *tok_);
  struct Owner {
    std::shared_ptr<Ticket> ticket;
    std::function<std::optional<Outcome>(GenerateResult&&, const Status&)> finish;
  };
  std::map<DecodeBatch::Id, Owner> owners;
  auto end = [&](DecodeBatch::Id id, GenerateResult&& g, const Status& st) {
    Owner o = std::move(owners.at(id));
    owners.erase(id);
    if (std::optional<Outcome> out = o.finish(std::move(g), st)) o.ticket->finish(std::move(*out));
  };
  for (;;) {
    std::deque<Ready> joining;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] {
        return !ready_.empty() || !batch.empty() || (stopping_ && queue_.empty() && prefilling_ == 0);
      });
      if (ready_.empty() && batch.empty()) return;  // stopping and drained
      joining.swap(ready_);
      decoding_ = int(batch.size() + joining.size());
    }
    for (Ready& r : joining) {
      auto id = batch.add(std::move(r.d.state), std::move(r.d.logits), r.d.options, std::move(r.d.on_text),
                          r.d.start);
      if (!id) {
        if (std::optional<Outcome> out = r.d.finish(GenerateResult{}, id.status())) r.ticket->finish(std::move(*out));
        continue;
      }
      owners.emplace(*id, Owner{r.ticket, std::move(r.d.finish)});
    }
    // The drain deadline passed: every sequence ends now with what it has.
    bool cut = false;
    {
      std::lock_guard<std::mutex> lk(mu_);
      cut = cut_;
    }
    if (cut) {
      int n = 0;
      for (const auto& [id, o] : owners)
        n += batch.end(id, Status(StatusCode::kUnavailable, "the server is shutting down: the drain deadline passed")) ? 1 : 0;
      std::lock_guard<std::mutex> lk(mu_);
      cut_count_ += n;
    }
    // Clients that left: their sequences go now, not at their next text piece.
    std::vector<DecodeBatch::Id> gone;
    for (const auto& [id, o] : owners)
      if (o.ticket->cancelled() && batch.remove(id)) gone.push_back(id);
    // A model error ends the affected sequences; take_finished() reports them with it.
    if (!batch.empty()) static_cast<void>(batch.step());
    auto finished = batch.take_finished();
    {
      std::lock_guard<std::mutex> lk(mu_);  // counts are exact before any outcome is visible
      decoding_ = int(batch.size());
      cv_.notify_all();
    }
    for (auto id : gone) end(id, GenerateResult{}, Status(StatusCode::kCancelled, "cancelled by the client"));
    for (auto& f : finished) end(f.id, std::move(f.result), f.status);
  }
}

int Scheduler::shutdown(std::optional<std::chrono::milliseconds> deadline) {
  std::deque<Job> dropped;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_ && workers_.empty()) return cut_count_;
    stopping_ = true;
    dropped.swap(queue_);
    cv_.notify_all();
  }
  for (auto& j : dropped) {
    Outcome o;
    o.error = ApiError{503, "the server is shutting down", "server_error", "", "shutting_down"};
    j.ticket->finish(std::move(o));
  }
  if (deadline) {
    std::unique_lock<std::mutex> lk(mu_);
    if (!cv_.wait_for(lk, *deadline, [&] { return prefilling_ == 0 && ready_.empty() && decoding_ == 0; })) {
      cut_ = true;
      cutting_ = true;
      cv_.notify_all();
    }
  }
  for (auto& w : workers_)
    if (w.joinable()) w.join();
  workers_.clear();
  if (decoder_.joinable()) decoder_.join();
  std::lock_guard<std::mutex> lk(mu_);
  return cut_count_;
}

int Scheduler::queued() const {
  std::lock_guard<std::mutex> lk(mu_);
  return int(queue_.size());
}

int Scheduler::running() const {
  std::lock_guard<std::mutex> lk(mu_);
  return prefilling_ + int(ready_.size()) + decoding_;
}

int Scheduler::decoding() const {
  std::lock_guard<std::mutex> lk(mu_);
  return decoding_;
}

}  // namespace hypic::server
