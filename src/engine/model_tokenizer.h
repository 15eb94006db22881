// The tokenizer of a --model path: a GGUF file's vocabulary (tokenizer/gguf_vocab.h), or the
// Hugging Face directory's tokenizer.json / tiktoken.model (Tokenizer::load).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "model/config.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace hypic {

Result<Tokenizer> load_model_tokenizer(const std::string& model);

// How a file's Jinja chat template relates to hypic's built-in format `t`: whether it holds
// every marker (<|…|>, <…>, [TOKEN]) that t writes in its turns and generation prompt, or which
// it lacks. One line for the log.
std::string compare_chat_template(const ChatTemplate& t, std::string_view jinja);

// For a GGUF model: logs which chat format hypic uses (chosen by architecture) and how the
// file's tokenizer.chat_template compares (compare_chat_template). Nothing for a directory.
void log_chat_format(const std::string& model, const ModelConfig& cfg);

// The checkpoint's own Jinja chat template: a GGUF file's tokenizer.chat_template, or the
// directory's chat_template.jinja / tokenizer_config.json "chat_template" (its "default"
// entry when it is a list); none when it has none.
std::optional<std::string> checkpoint_chat_template(const std::string& model);

// Whether replies reason, for --reasoning `mode`: "on" (the family's reasoning format; an
// error when hypic has none for it), "off" (null: no reasoning markup) or "auto" (on when the
// checkpoint's template writes "<think>" and hypic has the family's format).
Result<const ReasoningFormat*> model_reasoning(const std::string& model, const ModelConfig& cfg, std::string_view mode);

}  // namespace hypic
