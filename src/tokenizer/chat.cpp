#include "tokenizer/tokenizer.h"

namespace hypic {

std::string apply_chatml(const std::vector<ChatMessage>& msgs, bool add_generation_prompt) {
  std::string out;
  size_t n = 0;
  for (const ChatMessage& m : msgs) n += m.role.size() + m.content.size() + 32;
  out.reserve(n + 32);
  for (const ChatMessage& m : msgs) {
    out += "<|im_start|>";
    out += m.role;
    out += '\n';
    out += m.content;
    out += "<|im_end|>\n";
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace hypic
