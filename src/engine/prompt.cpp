#include "engine/prompt.h"

namespace hypic {

PromptParts chat_parts(const Tokenizer& tok, const std::string& system,
                       const std::vector<std::string>& segments, const std::string& query) {
  PromptParts p;
  std::string prefix;
  if (!system.empty()) prefix = "<|im_start|>system\n" + system + "<|im_end|>\n";
  prefix += "<|im_start|>user\n";
  p.prefix = tok.encode(prefix, /*parse_special=*/true);
  // Documents are user content: special-token text inside them stays plain text.
  for (const auto& s : segments) p.segments.push_back(tok.encode(s, /*parse_special=*/false));
  p.suffix = tok.encode(query, /*parse_special=*/false);
  const auto tail = tok.encode("<|im_end|>\n<|im_start|>assistant\n", /*parse_special=*/true);
  p.suffix.insert(p.suffix.end(), tail.begin(), tail.end());
  return p;
}

}  // namespace hypic
