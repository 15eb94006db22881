// A reply that starts inside a reasoning block (the generation prompt opened it: Qwen3.5's
// "<think>\n"), split into its reasoning and its content as it streams:
//   {reasoning} "\n"* close-marker "\n"* {content}
// Newlines around the marker belong to neither (the template writes them). Text that may
// still turn out to be the marker is held back until it cannot.
#pragma once

#include <string>
#include <string_view>

namespace hypic::api {

class ReasoningReader {
 public:
  explicit ReasoningReader(std::string close_marker = "</think>") : marker_(std::move(close_marker)) {}

  struct Out {
    std::string reasoning, content;
  };
  // The next piece of the reply; what of it can be told apart already.
  Out feed(std::string_view text);
  // The end of the reply: the held-back text (a reply cut before the marker is all reasoning).
  Out finish();

 private:
  std::string marker_;
  bool in_reasoning_ = true;
  bool content_started_ = false;
  std::string held_;  // reasoning not yet emitted: trailing newlines and a partial marker
};

}  // namespace hypic::api
