// Ling-3.0 chat format (Bailing V3); see chat_template.h.
#include "tokenizer/chat_template.h"

namespace hypic {

std::string Ling3::turn_open(std::string_view role) const {
  if (role == "system") return "<role>SYSTEM</role>";
  if (role == "assistant") return "<role>ASSISTANT</role>\n<think></think>";
  return "<role>HUMAN</role>";
}

std::string Ling3::turn_close(std::string_view) const { return "<|role_end|>"; }

std::string Ling3::generation_prompt() const {
  return thinking_ ? "<role>ASSISTANT</role>\n<think>" : "<role>ASSISTANT</role>\n<think></think>";
}

// The system block always comes first: a leading system message's content goes inside it.
std::string Ling3::conversation_open(std::string_view first_role) const {
  if (first_role == "system") return {};
  return std::string("<role>SYSTEM</role>detailed thinking ") + (thinking_ ? "on" : "off") +
         "<|role_end|>";
}

std::string Ling3::first_turn_close(std::string_view role) const {
  if (role == "system")
    return std::string("\ndetailed thinking ") + (thinking_ ? "on" : "off") + "<|role_end|>";
  return turn_close(role);
}

}  // namespace hypic
