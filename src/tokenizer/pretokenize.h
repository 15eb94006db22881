// Pre-tokenizer splitting: hand-coded matchers for the regexes that byte-level BPE models ship.
// Each one reproduces the leftmost-first (backtracking) semantics of Oniguruma, which is what
// Hugging Face tokenizers runs, for one fixed pattern; other patterns are rejected at load.
//
// Why not PCRE2 (+ ICU for NFC): exactness and speed. The character classes must be the ones
// of the Oniguruma inside `tokenizers` (a newer Unicode than Debian's PCRE2 10.42 or ICU 72),
// and HF's NFC uses an older Unicode than ICU (ICU composes U+11935 U+11930, HF does not).
// Tables generated from `tokenizers` itself (gen_unicode_tables.py) match both exactly, add no
// system dependency, and a matcher specialised to one pattern runs at ~100 MB/s.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace hypic::pretok {

// A hand-coded matcher for one split regex.
struct Splitter {
  const char* name;   // "qwen2"
  const char* regex;  // the regex source exactly as tokenizer.json writes it
  // End (byte offset, > i) of the piece that starts at byte i of `text` (valid UTF-8, i <
  // text.size()). Every character belongs to some piece, so pieces tile the text.
  size_t (*next_piece)(std::string_view text, size_t i);
};

// A split pattern: a built-in matcher (below) or one a model family registers
// (register_pattern). Copyable; compares by identity.
class Pattern {
 public:
  // The built-in patterns:
  // Qwen2 / Qwen2.5 / Qwen3 / Qwen3-Next:
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|
  // \s*[\r\n]+|\s+(?!\S)|\s+
  static const Pattern kQwen2;
  // Qwen3.5: as kQwen2 with [\p{L}\p{M}]+ for letters and \p{M} excluded from punctuation.
  static const Pattern kQwen35;
  // GPT-2 (ByteLevel use_regex=true):
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  static const Pattern kGpt2;
  // Bailing: Ling 2.0 / Ring 2.0 / Ring-linear 2.0 (inclusionAI; llama.cpp "bailingmoe"):
  // '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|
  // \s*[\r\n]|\s+(?!\S)|\s+
  // It splits exactly as kQwen2 does (see bailing_piece in pretokenize.cpp).
  static const Pattern kBailing;
  // o200k (GPT-4o; MiniMax-Text-01 / M1 / M2): words split by letter case, contractions
  // kept on the word, numbers in runs of up to three:
  // [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+
  // [\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
  // \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
  static const Pattern kO200k;
  // Kimi (Kimi-K2, Kimi-Linear; tiktoken, so Rust's fancy-regex, whose classes and
  // backtracking order agree with Oniguruma's here): o200k with Han runs split off first and
  // Han removed from both letter-case classes, and only [\r\n]* after punctuation:
  // [\p{Han}]+|[^\r\n\p{L}\p{N}]?[U&&[^\p{Han}]]*[W&&[^\p{Han}]]+C?|
  // [^\r\n\p{L}\p{N}]?[U&&[^\p{Han}]]+[W&&[^\p{Han}]]*C?|\p{N}{1,3}|
  // ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  // with U = \p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}, W = \p{Ll}\p{Lm}\p{Lo}\p{M}, C the contractions.
  static const Pattern kKimi;

  constexpr explicit Pattern(const Splitter* s) : s_(s) {}
  const Splitter& splitter() const { return *s_; }
  bool operator==(const Pattern& o) const { return s_ == o.s_; }

 private:
  const Splitter* s_;
};

// Every pattern, built-in first, in the order error messages list them.
std::vector<Pattern> all_patterns();

// Adds a matcher (it must outlive every use: a static object). Error when its name or regex
// is taken.
Status register_pattern(const Splitter* s);

inline const char* pattern_regex(Pattern p) { return p.splitter().regex; }
inline const char* pattern_name(Pattern p) { return p.splitter().name; }

// The pattern whose regex source is exactly `regex`, if one is implemented.
std::optional<Pattern> recognize(std::string_view regex);

inline size_t next_piece(Pattern p, std::string_view text, size_t i) {
  return p.splitter().next_piece(text, i);
}

// Calls fn(piece) for each piece of `text`, in order.
template <typename Fn>
void for_each_piece(Pattern p, std::string_view text, Fn&& fn) {
  for (size_t i = 0; i < text.size();) {
    size_t e = next_piece(p, text, i);
    fn(text.substr(i, e - i));
    i = e;
  }
}

}  // namespace hypic::pretok
