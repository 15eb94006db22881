#include "server/scheduler.h"

namespace hypic::server {

bool Ticket::push_text(std::string text) {
  std::lock_guard<std::mutex> lk(mu_);
  if (cancelled_) return false;
  pieces_.push_back(std::move(text));
  cv_.notify_all();
  return true;
}

void Ticket::finish(Outcome o) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!outcome_) outcome_ = std::move(o);
  cv_.notify_all();
}

bool Ticket::cancelled() const {
  std::lock_guard<std::mutex> lk(mu_);
  return cancelled_;
}

bool Ticket::next(std::string* text, Outcome* out) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return !pieces_.empty() || outcome_.has_value(); });
  if (!pieces_.empty()) {
    *text = std::move(pieces_.front());
    pieces_.pop_front();
    return true;
  }
  *out = *outcome_;
  return false;
}

Outcome Ticket::wait(std::string* text) {
  std::string piece;
  Outcome out;
  while (next(&piece, &out)) *text += piece;
  return out;
}

void Ticket::cancel() {
  std::lock_guard<std::mutex> lk(mu_);
  cancelled_ = true;
  pieces_.clear();
  cv_.notify_all();
}

Scheduler::Scheduler(Options opt, Runner runner) : opt_(opt), runner_(std::move(runner)) {
  if (opt_.workers < 1) opt_.workers = 1;
  if (opt_.max_queue < 0) opt_.max_queue = 0;
  for (int i = 0; i < opt_.workers; ++i) workers_.emplace_back([this] { worker_loop(); });
}

Scheduler::~Scheduler() { shutdown(); }

std::shared_ptr<Ticket> Scheduler::submit(ApiRequest request, PromptParts parts, Timer arrival,
                                          Rejection* why) {
  std::lock_guard<std::mutex> lk(mu_);
  if (stopping_) {
    *why = Rejection::kShuttingDown;
    return nullptr;
  }
  // Admitted jobs (running + waiting) are bounded by workers + max_queue.
  if (running_ + int(queue_.size()) >= opt_.workers + opt_.max_queue) {
    *why = Rejection::kQueueFull;
    return nullptr;
  }
  *why = Rejection::kNone;
  auto t = std::make_shared<Ticket>();
  queue_.push_back(Job{std::move(request), std::move(parts), arrival, t});
  cv_.notify_one();
  return t;
}

void Scheduler::worker_loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      job = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    Outcome o;
    if (job.ticket->cancelled()) {
      o.error = ApiError{499, "cancelled by the client", "invalid_request_error", "", "cancelled"};
    } else {
      o = runner_(job);
    }
    job.ticket->finish(std::move(o));
    std::lock_guard<std::mutex> lk(mu_);
    --running_;
  }
}

void Scheduler::shutdown() {
  std::deque<Job> dropped;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
    dropped.swap(queue_);
    cv_.notify_all();
  }
  for (auto& j : dropped) {
    Outcome o;
    o.error = ApiError{503, "the server is shutting down", "server_error", "", "shutting_down"};
    j.ticket->finish(std::move(o));
  }
  for (auto& w : workers_)
    if (w.joinable()) w.join();
  workers_.clear();
}

int Scheduler::queued() const {
  std::lock_guard<std::mutex> lk(mu_);
  return int(queue_.size());
}

int Scheduler::running() const {
  std::lock_guard<std::mutex> lk(mu_);
  return running_;
}

}  // namespace hypic::server
