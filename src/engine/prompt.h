// Prompt layouts. A PIC request is ChatML with the documents inside the user turn, each
// document a separately tokenised segment:
//   prefix   "<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n"
//   segment  the document text, as given (tokenised on its own, so its tokens never depend
//            on its neighbours)
//   suffix   "{query}<|im_end|>\n<|im_start|>assistant\n"
// Without a system message the prefix is just "<|im_start|>user\n".
#pragma once

#include <string>
#include <vector>

#include "engine/compose.h"
#include "tokenizer/tokenizer.h"

namespace hypic {

PromptParts chat_parts(const Tokenizer& tok, const std::string& system,
                       const std::vector<std::string>& segments, const std::string& query);

}  // namespace hypic
