// Chat templates: how a model family writes a conversation as prompt text.
//
// A conversation is conversation_open(first role), then per message
// turn_open(role) + content + turn_close(role), and then generation_prompt() when the model is
// to answer; the first message uses first_turn_open / first_turn_close, which default to
// turn_open / turn_close. message_open / message_close give the text around message i of a
// conversation. render() is defined from these pieces, so layouts that tokenise a conversation
// piecewise (PIC: documents as segments inside the user turn; the server's content parts)
// reproduce its text exactly.
//
// The conversation-level pieces exist for templates whose start is not a plain turn: Bailing
// writes a default system turn when the conversation has none and closes a leading system turn
// differently from a later one; MiniMax-M1 starts every conversation with <begin_of_document>.
// ChatML uses none of them.
//
// Template text carries special-token markers: encode it with parse_special=true and the
// content with parse_special=false, so that content can never inject a marker.
//
// Roles are the OpenAI / Hugging Face names ("system", "user", "assistant"); a template
// maps them to its own spelling. What the pieces cannot express (a Jinja template that moves,
// merges or rewrites messages) is listed at each class.
//
// Adding a family: one implementation file (as chat_ml.cpp), its class below and its entry
// in chat_template_for(); or, from outside src/ (a family that lives in one file),
// register_chat_template() at start-up.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hypic {

struct ChatMessage {
  std::string role, content;
};

// How a family writes tools and tool calls:
//   system turn: [{system} "\n\n"] preamble_head ("\n" {tool as JSON})* preamble_tail, or
//                with tools_first the tools block first and then ["\n\n" {system}]
//   a call:      call_open body call_close, calls joined by call_separator, after the
//                assistant's text (and text_call_separator when there is text); the body is
//                kJson: {"name": ..., "arguments": {...}}  (Qwen3, Qwen3-Next: Hermes style)
//                kXml:  "<function=" name ">\n" ("<parameter=" key ">\n" value
//                       "\n</parameter>\n")* "</function>"  (Qwen3.5: a string value as it is,
//                       others as Python writes them: JSON for objects and lists, True / False)
//   results:     consecutive tool messages as one user turn, each response_open {content}
//                response_close, joined by response_separator
struct ToolFormat {
  enum class Calls { kJson, kXml };
  Calls calls = Calls::kJson;
  bool tools_first = false;
  std::string preamble_head, preamble_tail;
  std::string call_open, call_close, call_separator, text_call_separator;
  std::string response_open, response_close, response_separator;
};

// How a family writes reasoning ("thinking"), for checkpoints whose template thinks:
//   a reply:        [prompt_on] {reasoning} close {content}   (prompt_on ends the generation
//                   prompt, so the model's reply starts inside the block)
//   thinking off:   the generation prompt ends with prompt_off (an empty block)
//   history:        an assistant turn after the last user query is written
//                   open {reasoning, trimmed} close {content}; earlier ones {content} only
//                   (their reasoning dropped: the next prompt is no prefix of the last one)
struct ReasoningFormat {
  std::string open, close;
  std::string prompt_on, prompt_off;
};

// Implementations are stateless: every method may be called concurrently.
class ChatTemplate {
 public:
  virtual ~ChatTemplate() = default;

  // The name chat_template_for() knows it by.
  virtual std::string_view name() const = 0;
  // Text before the content of a turn of `role`.
  virtual std::string turn_open(std::string_view role) const = 0;
  // Text after the content of a turn of `role`.
  virtual std::string turn_close(std::string_view role) const = 0;
  // Text after the last turn that makes the model answer as the assistant.
  virtual std::string generation_prompt() const = 0;
  // Special tokens that end the model's answer (its turn close, end of text): generation
  // stops on them, besides the model's eos_token_id.
  virtual std::vector<std::string> end_tokens() const = 0;

  // Text before the first turn; `first_role` is the first message's role, "" when there is
  // no message. Default: nothing.
  virtual std::string conversation_open(std::string_view first_role) const;
  // The family's tool format; null when hypic does not write tools for it (yet).
  virtual const ToolFormat* tool_format() const { return nullptr; }
  // The family's reasoning format; null when hypic does not write reasoning for it (yet).
  // Whether a checkpoint thinks is its own template's say (engine/model_tokenizer.h).
  virtual const ReasoningFormat* reasoning_format() const { return nullptr; }
  // Text around the content of the first message. Default: turn_open / turn_close.
  virtual std::string first_turn_open(std::string_view role) const { return turn_open(role); }
  virtual std::string first_turn_close(std::string_view role) const { return turn_close(role); }

  // Text before / after the content of message `index` (0-based) of role `role`; before the
  // first message this includes conversation_open.
  std::string message_open(size_t index, std::string_view role) const;
  std::string message_close(size_t index, std::string_view role) const;

  // The whole conversation: the pieces above, concatenated.
  std::string render(const std::vector<ChatMessage>& msgs, bool add_generation_prompt) const;
};

// Qwen ChatML: "<|im_start|>{role}\n" {content} "<|im_end|>\n", generation prompt
// "<|im_start|>assistant\n". Two tool formats: Qwen3 / Qwen3-Next's ("chatml") and
// Qwen3.5's ("qwen3.5"); the turns are the same.
class ChatMl final : public ChatTemplate {
 public:
  enum class Tools { kQwen3, kQwen35 };
  explicit ChatMl(Tools tools = Tools::kQwen3) : tools_(tools) {}
  std::string_view name() const override { return tools_ == Tools::kQwen35 ? "qwen3.5" : "chatml"; }
  std::string turn_open(std::string_view role) const override;
  std::string turn_close(std::string_view role) const override;
  std::string generation_prompt() const override;
  std::vector<std::string> end_tokens() const override { return {"<|im_end|>", "<|endoftext|>"}; }
  // Qwen3 / Qwen3-Next's chat template: tools in a <tools> block at the end of the system
  // turn, calls as <tool_call> JSON, results in <tool_response> blocks of a user turn.
  // Qwen3.5's: the tools block opens the system turn, calls are <function=...> elements with
  // a <parameter=...> each.
  const ToolFormat* tool_format() const override;
  // Qwen3.5's: "<think>\n" {reasoning} "\n</think>\n\n" {content}; Qwen3's template writes
  // the same block but hypic does not write it (null).
  const ReasoningFormat* reasoning_format() const override;

 private:
  Tools tools_;
};

// Ling 2.0 / Ring 2.0 / Ring-mini-linear-2.0 / Ring-flash-linear-2.0 ("bailing"), the
// template of inclusionAI/Ring-V2 resource/tokenizer/config_sft/tokenizer_config.json:
//   "<role>SYSTEM</role>" [{system} "\n"] "detailed thinking off<|role_end|>"   (always first)
//   "<role>HUMAN</role>" {user} "<|role_end|>"
//   "<role>ASSISTANT</role>" {assistant} "<|role_end|>"
//   "<role>SYSTEM</role>" {system} "<|role_end|>"                                (not first)
// generation prompt "<role>ASSISTANT</role>". Thinking is always "off": the template sets
// thinking_option = 'off' itself. Not expressible here (the Jinja rewrites content): an
// assistant message containing "</think>" loses its reasoning, or has it re-wrapped, in the
// Jinja; here content is written as given. Roles other than the three are written as user.
class Bailing final : public ChatTemplate {
 public:
  std::string_view name() const override { return "bailing"; }
  std::string turn_open(std::string_view role) const override;
  std::string turn_close(std::string_view role) const override;
  std::string generation_prompt() const override;
  // The turn close <|role_end|> (156895) besides the config's eos <|endoftext|> (156892): the
  // checkpoints' generation_config.json stops on both.
  std::vector<std::string> end_tokens() const override { return {"<|role_end|>", "<|endoftext|>"}; }
  std::string conversation_open(std::string_view first_role) const override;
  std::string first_turn_close(std::string_view role) const override;
};

// MiniMax ("minimax": MiniMax-AI/MiniMax-M1 tokenizer_config.json; "minimax-text-01":
// MiniMaxAI/MiniMax-Text-01's):
//   M1 only: "<begin_of_document>" first
//   "<beginning_of_sentence>system ai_setting=assistant\n" {system} "<end_of_sentence>\n"
//   "<beginning_of_sentence>user name=user\n" {user} "<end_of_sentence>\n"
//   "<beginning_of_sentence>ai name=assistant\n" {assistant} "<end_of_sentence>\n"
// generation prompt "<beginning_of_sentence>ai name=assistant\n". Not expressible here: M1's
// Jinja gathers the text of every system message into one system turn at the top and writes
// none when that text is empty; here each system message is a turn where it stands (exact for
// one non-empty leading system message, or none). Both Jinja templates read only the first
// text part of a user or system message; here a message is its whole text. Roles other than
// the three are written as user.
class MiniMax final : public ChatTemplate {
 public:
  enum class Variant { kM1, kText01 };
  explicit MiniMax(Variant v) : variant_(v) {}
  std::string_view name() const override;
  std::string turn_open(std::string_view role) const override;
  std::string turn_close(std::string_view role) const override;
  std::string generation_prompt() const override;
  std::string conversation_open(std::string_view first_role) const override;
  std::vector<std::string> end_tokens() const override { return {"<end_of_sentence>"}; }

 private:
  Variant variant_;
};

// Kimi ("kimi": Kimi-Linear-48B-A3B-Instruct; tools/family_tokenizers.py KIMI_CHAT_TEMPLATE):
//   "<|im_system|>system<|im_middle|>" {system} "<|im_end|>"
//   "<|im_user|>user<|im_middle|>" {user} "<|im_end|>"
//   "<|im_assistant|>assistant<|im_middle|>" {assistant} "<|im_end|>"
// generation prompt "<|im_assistant|>assistant<|im_middle|>"; no default system message (the
// Kimi-Linear template writes none; Kimi-K2-Instruct's does). Other roles are written as the
// Jinja writes them: "<|im_system|>{role}<|im_middle|>". Not expressible here: a message's
// "name" replacing the role in the header, and a tool result's "## Return of {id}" header.
class Kimi final : public ChatTemplate {
 public:
  std::string_view name() const override { return "kimi"; }
  std::string turn_open(std::string_view role) const override;
  std::string turn_close(std::string_view role) const override;
  std::string generation_prompt() const override;
  // The turn close <|im_end|> (Kimi-Linear's config.json eos_token_id 163586) and the
  // tokenizer's eos [EOS].
  std::vector<std::string> end_tokens() const override { return {"<|im_end|>", "[EOS]"}; }
};

// Ling-3.0 ("ling3", thinking on, the template's default; "ling3-nothink", enable_thinking
// false); the Bailing V3 template as tools/family_tokenizers.py LING3_CHAT_TEMPLATE states it:
//   "<role>SYSTEM</role>" [{system} "\n"] "detailed thinking on|off<|role_end|>"  (always first)
//   "<role>HUMAN</role>" {user} "<|role_end|>"
//   "<role>ASSISTANT</role>\n<think></think>" {assistant} "<|role_end|>"
//   "<role>SYSTEM</role>" {system} "<|role_end|>"                              (not first)
// generation prompt "<role>ASSISTANT</role>\n<think>" (on) or "...\n<think></think>" (off).
// Not "bailing": Ring / Ling 2.0's template fixes thinking off and writes no think block.
// Not expressible here (the Jinja reads the content): a leading system message that already
// holds "detailed thinking on|off" gets no directive added; an assistant message with
// reasoning (reasoning_content, or a "<think>...</think>" prefix in its content) has it inside
// the think block. Roles other than the three are written as user.
class Ling3 final : public ChatTemplate {
 public:
  explicit Ling3(bool thinking) : thinking_(thinking) {}
  std::string_view name() const override { return thinking_ ? "ling3" : "ling3-nothink"; }
  std::string turn_open(std::string_view role) const override;
  std::string turn_close(std::string_view role) const override;
  std::string generation_prompt() const override;
  // As Bailing: the turn close <|role_end|> and <|endoftext|>.
  std::vector<std::string> end_tokens() const override { return {"<|role_end|>", "<|endoftext|>"}; }
  std::string conversation_open(std::string_view first_role) const override;
  std::string first_turn_close(std::string_view role) const override;

 private:
  bool thinking_;
};

// The template called `name`; it lives for the whole program. An unknown name is kNotFound,
// naming the known ones.
Result<const ChatTemplate*> chat_template_for(std::string_view name);

// Adds a template (it must outlive every use: a static object) that chat_template_for()
// finds by its name(). Error when the name is taken.
Status register_chat_template(const ChatTemplate* t);

}  // namespace hypic
