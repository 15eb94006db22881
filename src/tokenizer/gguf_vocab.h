// The tokenizer a GGUF file carries (llama.cpp's `tokenizer.ggml.*` metadata) as hypic's
// byte-level BPE: model "gpt2" (byte-level BPE: tokens as byte-level strings, merges "a b"),
// its token types (CONTROL: a special added token, USER_DEFINED: a plain one, UNUSED: a hole
// in the ids), and `pre`, llama.cpp's name of the split regex, which selects hypic's matcher:
//   qwen2 -> Qwen2, qwen35 -> Qwen3.5, gpt-2 -> GPT-2, kimi-k2 -> Kimi, bailingmoe /
//   bailingmoe2 -> Bailing, minimax-m2 / gpt-4o -> o200k
// with NFC as hypic's tokenizer of that family has it.
// Any other model or pre name is refused naming it. Pure function of the metadata.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace hypic {

Result<Tokenizer> tokenizer_from_gguf(const std::map<std::string, nlohmann::json>& meta, const std::string& origin);

}  // namespace hypic
