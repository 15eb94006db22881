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
  static const ToolFormat qwen3 = [] {
    ToolFormat f;
    f.preamble_head = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
    f.preamble_tail = "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
                      "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
                      "<args-json-object>}\n</tool_call>";
    f.call_open = "<tool_call>\n";
    f.call_close = "\n</tool_call>";
    f.call_separator = f.text_call_separator = "\n";
    f.response_open = "<tool_response>\n";
    f.response_close = "\n</tool_response>";
    f.response_separator = "\n";
    return f;
  }();
  static const ToolFormat qwen35 = [] {
    ToolFormat f = qwen3;
    f.calls = ToolFormat::Calls::kXml;
    f.tools_first = true;
    f.preamble_head = "# Tools\n\nYou have access to the following functions:\n\n<tools>";
    f.preamble_tail =
        "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
        "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
        "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"
        "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified "
        "format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n"
        "- Required parameters MUST be specified\n- You may provide optional reasoning for your function call in natural "
        "language BEFORE the function call, but NOT after\n- If there is no function call available, answer the question "
        "like normal with your current knowledge and do not tell the user about function calls\n</IMPORTANT>";
    f.text_call_separator = "\n\n";
    return f;
  }();
  return tools_ == Tools::kQwen35 ? &qwen35 : &qwen3;
}

const ReasoningFormat* ChatMl::reasoning_format() const {
  static const ReasoningFormat qwen35{"<think>\n", "\n</think>\n\n", "<think>\n", "<think>\n\n</think>\n\n"};
  return tools_ == Tools::kQwen35 ? &qwen35 : nullptr;
}

}  // namespace hypic
