// Kimi chat format (Kimi-Linear); see chat_template.h.
#include "tokenizer/chat_template.h"

namespace hypic {

std::string Kimi::turn_open(std::string_view role) const {
  if (role == "user") return "<|im_user|>user<|im_middle|>";
  if (role == "assistant") return "<|im_assistant|>assistant<|im_middle|>";
  return "<|im_system|>" + std::string(role) + "<|im_middle|>";
}

std::string Kimi::turn_close(std::string_view) const { return "<|im_end|>"; }

std::string Kimi::generation_prompt() const { return turn_open("assistant"); }

}  // namespace hypic
