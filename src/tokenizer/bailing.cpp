// Bailing chat format (Ling 2.0, Ring 2.0, Ring-linear 2.0); see chat_template.h.
#include "tokenizer/chat_template.h"

namespace hypic {
namespace {

constexpr std::string_view kThinking = "detailed thinking off<|role_end|>";

}  // namespace

std::string Bailing::turn_open(std::string_view role) const {
  if (role == "system") return "<role>SYSTEM</role>";
  if (role == "assistant") return "<role>ASSISTANT</role>";
  return "<role>HUMAN</role>";
}

std::string Bailing::turn_close(std::string_view) const { return "<|role_end|>"; }

std::string Bailing::generation_prompt() const { return "<role>ASSISTANT</role>"; }

// The system turn always comes first: a leading system message's content goes inside it.
std::string Bailing::conversation_open(std::string_view first_role) const {
  if (first_role == "system") return {};
  return "<role>SYSTEM</role>" + std::string(kThinking);
}

std::string Bailing::first_turn_close(std::string_view role) const {
  if (role == "system") return "\n" + std::string(kThinking);
  return turn_close(role);
}

}  // namespace hypic
