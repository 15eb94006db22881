#include "api/reasoning.h"

#include <algorithm>

namespace hypic::api {

ReasoningReader::Out ReasoningReader::feed(std::string_view text) {
  Out out;
  if (!in_reasoning_) {
    if (!content_started_) {
      const size_t b = text.find_first_not_of('\n');
      if (b == std::string_view::npos) return out;
      text.remove_prefix(b);
      content_started_ = true;
    }
    out.content = text;
    return out;
  }
  held_ += text;
  if (const size_t m = held_.find(marker_); m != std::string::npos) {
    const size_t end = held_.find_last_not_of('\n', m == 0 ? std::string::npos : m - 1);
    out.reasoning = m == 0 || end == std::string::npos ? "" : held_.substr(0, end + 1);
    const std::string rest = held_.substr(m + marker_.size());
    held_.clear();
    in_reasoning_ = false;
    out.content = feed(rest).content;
    return out;
  }
  // Hold back a suffix that may begin the marker, and the newlines before it.
  size_t keep = held_.size();
  for (size_t n = std::min(marker_.size() - 1, held_.size()); n > 0; --n)
    if (held_.compare(held_.size() - n, n, marker_, 0, n) == 0) {
      keep = held_.size() - n;
      break;
    }
  while (keep > 0 && held_[keep - 1] == '\n') --keep;
  out.reasoning = held_.substr(0, keep);
  held_.erase(0, keep);
  return out;
}

ReasoningReader::Out ReasoningReader::finish() {
  Out out;
  if (in_reasoning_) {
    const size_t end = held_.find_last_not_of('\n');
    if (end != std::string::npos) out.reasoning = held_.substr(0, end + 1);
  }
  held_.clear();
  return out;
}

}  // namespace hypic::api
