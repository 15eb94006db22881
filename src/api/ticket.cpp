#include "api/ticket.h"

namespace hypic::api {

std::function<void()> Ticket::take_wake() {
  std::function<void()> w;
  w.swap(wake_);
  return w;
}

bool Ticket::push(Piece p) {
  std::function<void()> wake;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (cancelled_) return false;
    pieces_.push_back(std::move(p));
    cv_.notify_all();
    wake = take_wake();
  }
  if (wake) wake();
  return true;
}

void Ticket::finish(Outcome o) {
  std::function<void()> wake;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (!outcome_) outcome_ = std::move(o);
    cv_.notify_all();
    wake = take_wake();
  }
  if (wake) wake();
}

bool Ticket::cancelled() const {
  std::lock_guard<std::mutex> lk(mu_);
  return cancelled_;
}

Ticket::Next Ticket::take_locked(Piece* p, Outcome* out) {
  if (!pieces_.empty()) {
    *p = std::move(pieces_.front());
    pieces_.pop_front();
    return Next::kText;
  }
  if (outcome_) {
    *out = *outcome_;
    return Next::kOutcome;
  }
  return Next::kPending;
}

bool Ticket::next(Piece* p, Outcome* out) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return !pieces_.empty() || outcome_.has_value(); });
  return take_locked(p, out) == Next::kText;
}

Ticket::Next Ticket::next_for(Piece* p, Outcome* out, std::chrono::milliseconds max_wait) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait_for(lk, max_wait, [&] { return !pieces_.empty() || outcome_.has_value(); });
  return take_locked(p, out);
}

bool Ticket::next(std::string* text, Outcome* out) {
  Piece p;
  while (next(&p, out)) {
    if (p.tool_call || p.reasoning) continue;
    *text = std::move(p.text);
    return true;
  }
  return false;
}

Outcome Ticket::wait(std::string* text) {
  std::string piece;
  Outcome out;
  while (next(&piece, &out)) *text += piece;
  return out;
}

Ticket::Next Ticket::poll(Piece* p, Outcome* out, std::function<void()> wake) {
  std::lock_guard<std::mutex> lk(mu_);
  const Next n = take_locked(p, out);
  if (n == Next::kPending) wake_ = std::move(wake);
  return n;
}

void Ticket::cancel() {
  std::function<void()> wake;
  {
    std::lock_guard<std::mutex> lk(mu_);
    cancelled_ = true;
    pieces_.clear();
    cv_.notify_all();
    wake = take_wake();
  }
  if (wake) wake();
}

}  // namespace hypic::api
