#include "engine/prompt.h"

namespace hypic {

const ChatTemplate& model_chat_template(const ModelConfig& cfg) {
  std::string_view name;
  switch (cfg.arch) {
    case Arch::kQwen3Next:
    case Arch::kQwen3_5:
    case Arch::kQwen3_5Moe: name = "chatml"; break;
  }
  auto t = chat_template_for(name);
  HYPIC_CHECK(t.is_ok(), t.status().message());
  return *t.value();
}

PromptParts chat_parts(const ChatTemplate& chat, const Tokenizer& tok, const std::string& system,
                       const std::vector<std::string>& segments, const std::string& query) {
  PromptParts p;
  std::string prefix;
  if (!system.empty()) prefix = chat.turn_open("system") + system + chat.turn_close("system");
  prefix += chat.turn_open("user");
  // One text, specials parsed: the system text is the operator's, not a client's.
  p.prefix = tok.encode(prefix, /*parse_special=*/true);
  // Documents are user content: special-token text inside them stays plain text.
  for (const auto& s : segments) p.segments.push_back(tok.encode(s, /*parse_special=*/false));
  p.suffix = tok.encode(query, /*parse_special=*/false);
  tok.encode_append(chat.turn_close("user") + chat.generation_prompt(), p.suffix,
                    /*parse_special=*/true);
  return p;
}

}  // namespace hypic
