#include "tokenizer/pretokenize.h"

#include <array>

#include "tokenizer/unicode.h"

namespace hypic::pretok {
namespace {

namespace ud = unicode_data;

constexpr const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen35Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct Ch {
  uint32_t cp;
  uint8_t flags;
  uint8_t len;
};

const std::array<uint8_t, 128>& ascii_flags() {
  static const std::array<uint8_t, 128> t = [] {
    std::array<uint8_t, 128> a{};
    for (uint32_t c = 0; c < 128; ++c) a[c] = unicode::props(c);
    return a;
  }();
  return t;
}

inline Ch char_at(std::string_view s, size_t i) {
  auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) return {b, ascii_flags()[b], 1};
  int len;
  uint32_t cp = unicode::decode_valid(s.data(), i, &len);
  return {cp, unicode::props(cp), uint8_t(len)};
}

// Advances over characters whose flags satisfy pred.
template <typename Pred>
inline size_t scan(std::string_view s, size_t i, Pred pred) {
  const auto& af = ascii_flags();
  while (i < s.size()) {
    auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      if (!pred(af[b])) break;
      ++i;
      continue;
    }
    Ch c = char_at(s, i);
    if (!pred(c.flags)) break;
    i += c.len;
  }
  return i;
}

inline size_t scan_crlf(std::string_view s, size_t i) {
  while (i < s.size() && (s[i] == '\r' || s[i] == '\n')) ++i;
  return i;
}

// Case-insensitive (Oniguruma folding) for the contraction letters: ASCII and U+017F (ſ).
inline uint32_t fold(uint32_t cp) {
  if (cp >= 'A' && cp <= 'Z') return cp + 32;
  if (cp == 0x17F) return 's';
  return cp;
}

// Piece starting with whitespace at i. with_crlf adds the `\s*[\r\n]+` alternative first;
// then `\s+(?!\S)` (the run minus its last character when a non-space follows) and `\s+`.
inline size_t whitespace_piece(std::string_view s, size_t i, bool with_crlf) {
  size_t j = i, last_start = i, after_newline = 0;
  int count = 0;
  while (j < s.size()) {
    Ch c = char_at(s, j);
    if (!(c.flags & ud::kFlagSpace)) break;
    last_start = j;
    j += c.len;
    ++count;
    if (c.cp == '\r' || c.cp == '\n') after_newline = j;
  }
  if (with_crlf && after_newline) return after_newline;
  if (j == s.size() || count < 2) return j;
  return last_start;
}

size_t qwen_piece(std::string_view s, size_t i, uint8_t letter) {
  const size_t n = s.size();
  const Ch c0 = char_at(s, i);
  const size_t i1 = i + c0.len;
  auto is_letter = [letter](uint8_t f) { return (f & letter) != 0; };
  auto is_other = [letter](uint8_t f) {
    return (f & (letter | ud::kFlagNumber | ud::kFlagSpace)) == 0;
  };

  // (?i:'s|'t|'re|'ve|'m|'ll|'d)
  if (c0.cp == '\'' && i1 < n) {
    const Ch c1 = char_at(s, i1);
    const size_t i2 = i1 + c1.len;
    const uint32_t l1 = fold(c1.cp);
    if (l1 == 's' || l1 == 't' || l1 == 'm' || l1 == 'd') return i2;
    if ((l1 == 'r' || l1 == 'v' || l1 == 'l') && i2 < n) {
      const Ch c2 = char_at(s, i2);
      const uint32_t l2 = fold(c2.cp);
      if ((l1 == 'l' && l2 == 'l') || (l1 != 'l' && l2 == 'e')) return i2 + c2.len;
    }
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+   (Qwen3.5: [\p{L}\p{M}]+; the optional class is unchanged)
  if (is_letter(c0.flags)) return scan(s, i1, is_letter);
  if (!(c0.flags & (ud::kFlagLetter | ud::kFlagNumber)) && c0.cp != '\r' && c0.cp != '\n' &&
      i1 < n) {
    const Ch c1 = char_at(s, i1);
    if (is_letter(c1.flags)) return scan(s, i1 + c1.len, is_letter);
  }
  // \p{N}
  if (c0.flags & ud::kFlagNumber) return i1;
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  if (c0.cp == ' ' && i1 < n) {
    const Ch c1 = char_at(s, i1);
    if (is_other(c1.flags)) return scan_crlf(s, scan(s, i1 + c1.len, is_other));
  }
  if (is_other(c0.flags)) return scan_crlf(s, scan(s, i1, is_other));
  // \s*[\r\n]+|\s+(?!\S)|\s+
  return whitespace_piece(s, i, true);
}

size_t gpt2_piece(std::string_view s, size_t i) {
  const size_t n = s.size();
  const Ch c0 = char_at(s, i);
  const size_t i1 = i + c0.len;
  auto is_letter = [](uint8_t f) { return (f & ud::kFlagLetter) != 0; };
  auto is_number = [](uint8_t f) { return (f & ud::kFlagNumber) != 0; };
  auto is_other = [](uint8_t f) {
    return (f & (ud::kFlagLetter | ud::kFlagNumber | ud::kFlagSpace)) == 0;
  };

  // 's|'t|'re|'ve|'m|'ll|'d   (case-sensitive)
  if (c0.cp == '\'' && i1 < n) {
    const char c1 = s[i1];
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return i1 + 1;
    if (i1 + 1 < n) {
      const char c2 = s[i1 + 1];
      if (((c1 == 'r' || c1 == 'v') && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return i1 + 2;
    }
  }
  // ' ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+'
  if (c0.cp == ' ' && i1 < n) {
    const Ch c1 = char_at(s, i1);
    if (is_letter(c1.flags)) return scan(s, i1 + c1.len, is_letter);
    if (is_number(c1.flags)) return scan(s, i1 + c1.len, is_number);
    if (is_other(c1.flags)) return scan(s, i1 + c1.len, is_other);
  }
  if (is_letter(c0.flags)) return scan(s, i1, is_letter);
  if (is_number(c0.flags)) return scan(s, i1, is_number);
  if (is_other(c0.flags)) return scan(s, i1, is_other);
  // \s+(?!\S)|\s+
  return whitespace_piece(s, i, false);
}

}  // namespace

const char* pattern_regex(Pattern p) {
  switch (p) {
    case Pattern::kQwen2: return kQwen2Regex;
    case Pattern::kQwen35: return kQwen35Regex;
    case Pattern::kGpt2: return kGpt2Regex;
  }
  return "";
}

const char* pattern_name(Pattern p) {
  switch (p) {
    case Pattern::kQwen2: return "qwen2";
    case Pattern::kQwen35: return "qwen3.5";
    case Pattern::kGpt2: return "gpt2";
  }
  return "";
}

std::optional<Pattern> recognize(std::string_view regex) {
  for (Pattern p : {Pattern::kQwen2, Pattern::kQwen35, Pattern::kGpt2})
    if (regex == pattern_regex(p)) return p;
  return std::nullopt;
}

size_t next_piece(Pattern p, std::string_view text, size_t i) {
  switch (p) {
    case Pattern::kQwen2: return qwen_piece(text, i, ud::kFlagLetter);
    case Pattern::kQwen35: return qwen_piece(text, i, ud::kFlagLetter | ud::kFlagMark);
    case Pattern::kGpt2: return gpt2_piece(text, i);
  }
  return text.size();
}

}  // namespace hypic::pretok
