// The state behind a Tokenizer (immutable after loading, except the locked word cache).
// Internal to src/tokenizer.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"

namespace hypic {

struct TokenizerImpl {
  enum Kind : uint8_t { kNone = 0, kVocab = 1, kAdded = 2, kSpecial = 3 };

  std::string origin;  // file the tokenizer came from, for messages
  std::string format = "tokenizer.json";  // or "tiktoken <profile>", for summary()

  // normalizer
  bool nfc = false;
  // pre_tokenizer: optional Split(regex, Isolated), then ByteLevel
  std::optional<pretok::Pattern> split;
  bool add_prefix_space = false;  // ByteLevel.add_prefix_space, applied per piece
  bool bytelevel_regex = false;   // ByteLevel.use_regex (GPT-2 split)

  bpe::Model model;
  size_t num_vocab = 0, num_merges = 0;
  bpe::StringMap vocab;        // vocab string ("Ġthe") -> id
  bpe::StringMap added_index;  // added token content -> id
  AddedTokenMatcher raw_added;         // normalized == false: matched in raw text
  AddedTokenMatcher normalized_added;  // normalized == true: matched after normalization

  // Per id (size = vocab_size): vocab form, bytes emitted by decode, kind.
  std::vector<std::string> id_str;
  std::vector<std::string> id_bytes;
  std::vector<uint8_t> id_kind;

  void encode(std::string_view text, bool parse_special, std::vector<int32_t>& out) const;
  // Normalized text without added tokens: pre-tokenize and run BPE.
  void encode_plain(std::string_view text, std::vector<int32_t>& out) const;
  // Pre-tokenizer/normalizer names, for summary().
  std::string describe() const;
};

// Builds a TokenizerImpl from tokenizer.json text (tokenizer_load.cpp).
Result<std::shared_ptr<TokenizerImpl>> parse_tokenizer_json(std::string_view json_text,
                                                            const std::string& origin);

// Builds a TokenizerImpl from a tiktoken rank file and its tokenizer_config.json
// (tiktoken_load.cpp).
Result<std::shared_ptr<TokenizerImpl>> parse_tiktoken(std::string_view ranks_text,
                                                      std::string_view config_json,
                                                      const std::string& ranks_origin,
                                                      const std::string& config_origin);

}  // namespace hypic
