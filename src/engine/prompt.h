// Prompt layouts. A PIC request is a chat with the documents inside the user turn, each
// document a separately tokenised segment; open / close / gen are the pieces of the
// model's ChatTemplate (tokenizer/chat_template.h: message_open / message_close of the
// message's position, generation_prompt):
//   prefix   open(system) {system} close(system) open(user)
//   segment  the document text, as given (tokenised on its own, so its tokens never depend
//            on its neighbours)
//   suffix   {query} close(user) gen
// Without a system message the prefix is just open(user) (for the user turn as the first
// message: with ChatML that is the user turn's opening alone; a template may put a default
// system turn there).
#pragma once

#include <string>
#include <vector>

#include "engine/compose.h"
#include "model/config.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace hypic {

// The chat template its architecture names (Architecture::chat_template).
const ChatTemplate& model_chat_template(const ModelConfig& cfg);

PromptParts chat_parts(const ChatTemplate& chat, const Tokenizer& tok, const std::string& system,
                       const std::vector<std::string>& segments, const std::string& query);

}  // namespace hypic
