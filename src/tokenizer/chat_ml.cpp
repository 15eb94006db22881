#include "tokenizer/chat_template.h"

namespace hypic {

std::string ChatMl::turn_open(std::string_view role) const {
  std::string s = "<|im_start|>";
  s += role;
  s += '\n';
  return s;
}

std::string ChatMl::turn_close(std::string_view) const { return "<|im_end|>\n"; }

std::string ChatMl::generation_prompt() const { return turn_open("assistant"); }

}  // namespace hypic
