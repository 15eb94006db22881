// Chat templates: how a model family writes a conversation as prompt text.
//
// A conversation is, per message, turn_open(role) + content + turn_close(role), and then
// generation_prompt() when the model is to answer. render() is defined from these pieces,
// so layouts that tokenise a conversation piecewise (PIC: documents as segments inside the
// user turn; the server's content parts) reproduce its text exactly.
//
// Template text carries special-token markers: encode it with parse_special=true and the
// content with parse_special=false, so that content can never inject a marker.
//
// Roles are the OpenAI / Hugging Face names ("system", "user", "assistant"); a template
// maps them to its own spelling.
//
// Adding a family: one implementation file (as chat_ml.cpp), its class below and its entry
// in chat_template_for().
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hypic {

struct ChatMessage {
  std::string role, content;
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

  // The whole conversation: the pieces above, concatenated.
  std::string render(const std::vector<ChatMessage>& msgs, bool add_generation_prompt) const;
};

// Qwen ChatML ("chatml"): "<|im_start|>{role}\n" {content} "<|im_end|>\n", generation
// prompt "<|im_start|>assistant\n".
class ChatMl final : public ChatTemplate {
 public:
  std::string_view name() const override { return "chatml"; }
  std::string turn_open(std::string_view role) const override;
  std::string turn_close(std::string_view role) const override;
  std::string generation_prompt() const override;
};

// The template called `name`; it lives for the whole program. An unknown name is kNotFound,
// naming the known ones.
Result<const ChatTemplate*> chat_template_for(std::string_view name);

}  // namespace hypic
