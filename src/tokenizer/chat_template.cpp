#include "tokenizer/chat_template.h"

namespace hypic {

std::string ChatTemplate::render(const std::vector<ChatMessage>& msgs,
                                 bool add_generation_prompt) const {
  std::string out;
  for (const ChatMessage& m : msgs) {
    out += turn_open(m.role);
    out += m.content;
    out += turn_close(m.role);
  }
  if (add_generation_prompt) out += generation_prompt();
  return out;
}

Result<const ChatTemplate*> chat_template_for(std::string_view name) {
  static const ChatMl chat_ml;
  static const ChatTemplate* const known[] = {&chat_ml};
  std::string names;
  for (const ChatTemplate* t : known) {
    if (t->name() == name) return t;
    names += (names.empty() ? "" : ", ") + std::string(t->name());
  }
  return not_found("unknown chat template '" + std::string(name) + "' (known: " + names + ")");
}

}  // namespace hypic
