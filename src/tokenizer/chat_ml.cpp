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

const ToolFormat* ChatMl::tool_format() const {
  static const ToolFormat f{
      "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>",
      "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
      "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>",
      "<tool_call>\n", "\n</tool_call>", "\n",
      "<tool_response>\n", "\n</tool_response>", "\n"};
  return &f;
}

}  // namespace hypic
