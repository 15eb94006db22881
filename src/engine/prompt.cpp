#include "engine/prompt.h"

#include "model/arch.h"

namespace hypic {

const ChatTemplate& model_chat_template(const ModelConfig& cfg) {
  HYPIC_CHECK(cfg.arch != nullptr, "model_chat_template: a config without an architecture");
  auto t = chat_template_for(cfg.arch->chat_template(cfg));
  HYPIC_CHECK(t.is_ok(), std::string(cfg.arch->name()) + ": " + t.status().message());
  return *t.value();
}

PromptParts chat_parts(const ChatTemplate& chat, const Tokenizer& tok, const std::string& system,
                       const std::vector<std::string>& segments, const std::string& query) {
  PromptParts p;
  std::string prefix;
  size_t user = 0;  // index of the user message
  if (!system.empty()) {
    prefix = chat.message_open(0, "system") + system + chat.message_close(0, "system");
    user = 1;
  }
  prefix += chat.message_open(user, "user");
  // One text, specials parsed: the system text is the operator's, not a client's.
  p.prefix = tok.encode(prefix, /*parse_special=*/true);
  // Documents are user content: special-token text inside them stays plain text.
  for (const auto& s : segments) p.segments.push_back(tok.encode(s, /*parse_special=*/false));
  p.suffix = tok.encode(query, /*parse_special=*/false);
  tok.encode_append(chat.message_close(user, "user") + chat.generation_prompt(), p.suffix,
                    /*parse_special=*/true);
  return p;
}

}  // namespace hypic
