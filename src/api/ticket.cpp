#include "api/ticket.h"

namespace hypic::server {

std::function<void()> Ticket::take_wake() {
  std::function<void()> w;
  w.swap(wake_);
  return w;
}

bool Ticket::push_text(std::string text, nlohmann::json logprobs) {
  return push(std::move(text), std::move(logprobs), nullptr);
}

bool Ticket::push_tool_call(nlohmann::json call) { return push("", nullptr, std::move(call)); }

bool Ticket::push(std::string text, nlohmann::json logprobs, nlohmann::json tool_call) {
  std::function<void()> wake;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (cancelled_) return false;
    pieces_.push_back({std::move(text), std::move(logprobs), std::move(tool_call)});
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

bool Ticket::next(std::string* text, Outcome* out, nlohmann::json* logprobs, nlohmann::json* tool_call) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return !pieces_.empty() || outcome_.has_value(); });
  if (!pieces_.empty()) {
    take_front(text, logprobs, tool_call);
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

void Ticket::take_front(std::string* text, nlohmann::json* logprobs, nlohmann::json* tool_call) {
  *text = std::move(pieces_.front().text);
  if (logprobs) *logprobs = std::move(pieces_.front().logprobs);
  if (tool_call) *tool_call = std::move(pieces_.front().tool_call);
  pieces_.pop_front();
}

Ticket::Next Ticket::poll(std::string* text, Outcome* out, std::function<void()> wake, nlohmann::json* logprobs,
                          nlohmann::json* tool_call) {
  std::lock_guard<std::mutex> lk(mu_);
  if (!pieces_.empty()) {
    take_front(text, logprobs, tool_call);
    return Next::kText;
  }
  if (outcome_) {
    *out = *outcome_;
    return Next::kOutcome;
  }
  wake_ = std::move(wake);
  return Next::kPending;
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

}  // namespace hypic::server
