// MiniMax chat format (MiniMax-M1, MiniMax-Text-01); see chat_template.h.
#include "tokenizer/chat_template.h"

namespace hypic {

std::string_view MiniMax::name() const {
  switch (variant_) {
    case Variant::kM1: return "minimax";
    case Variant::kText01: return "minimax-text-01";
  }
  return "minimax";
}

std::string MiniMax::turn_open(std::string_view role) const {
  if (role == "system") return "<beginning_of_sentence>system ai_setting=assistant\n";
  if (role == "assistant") return "<beginning_of_sentence>ai name=assistant\n";
  return "<beginning_of_sentence>user name=user\n";
}

std::string MiniMax::turn_close(std::string_view) const { return "<end_of_sentence>\n"; }

std::string MiniMax::generation_prompt() const { return turn_open("assistant"); }

std::string MiniMax::conversation_open(std::string_view) const {
  switch (variant_) {
    case Variant::kM1: return "<begin_of_document>";
    case Variant::kText01: return {};
  }
  return {};
}

}  // namespace hypic
