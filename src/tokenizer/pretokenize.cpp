#include "tokenizer/pretokenize.h"

#include <array>
#include <mutex>
#include <string>

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
constexpr const char* kBailingRegex =
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";
constexpr const char* kO200kRegex =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// tokenization_kimi.py's pat_str (moonshotai/Kimi-Linear-48B-A3B-Instruct, Kimi-K2): the
// eight alternatives joined by '|'.
constexpr const char* kKimiRegex =
    R"([\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

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

// End of (?i:'s|'t|'re|'ve|'m|'ll|'d) matched at i, or i when it does not match there.
inline size_t contraction_end(std::string_view s, size_t i) {
  const size_t n = s.size();
  if (i + 1 >= n || s[i] != '\'') return i;
  const size_t i1 = i + 1;
  const Ch c1 = char_at(s, i1);
  const size_t i2 = i1 + c1.len;
  const uint32_t l1 = fold(c1.cp);
  if (l1 == 's' || l1 == 't' || l1 == 'm' || l1 == 'd') return i2;
  if ((l1 == 'r' || l1 == 'v' || l1 == 'l') && i2 < n) {
    const Ch c2 = char_at(s, i2);
    const uint32_t l2 = fold(c2.cp);
    if ((l1 == 'l' && l2 == 'l') || (l1 != 'l' && l2 == 'e')) return i2 + c2.len;
  }
  return i;
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
  if (c0.cp == '\'') {
    const size_t e = contraction_end(s, i);
    if (e != i) return e;
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

// The Bailing regex matches the same pieces as Qwen2's, alternative by alternative:
//  * '(?i:[sdmt]|ll|ve|re) is (?i:'s|'t|'re|'ve|'m|'ll|'d) written another way (the
//    apostrophe has no case variants; the seven endings start with distinct letters);
//  * [^\r\n\p{L}\p{N}]?+\p{L}+: giving the optional character back could only help if \p{L}+
//    then matched at that character, which the class excludes, so ?+ matches as ? does;
//  * [^\s\p{L}\p{N}]++[\r\n]*: \r and \n are \s, so the run never has to give one back;
//  * \s*[\r\n] and \s*[\r\n]+ both end at the last \r or \n of the whitespace run.
// The golden tests check this against Oniguruma on random strings.
size_t bailing_piece(std::string_view s, size_t i) { return qwen_piece(s, i, ud::kFlagLetter); }

// o200k. Alternatives 1 and 2 are P? U* W+ C? and P? U+ W* C?, with P = [^\r\n\p{L}\p{N}],
// U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], W = [\p{Ll}\p{Lm}\p{Lo}\p{M}], C the contractions.
// U and W overlap (Lm, Lo, M) and P contains the marks, so backtracking matters; the order in
// which Oniguruma tries things is: alternative 1 with P taken, then without it, then
// alternative 2 likewise; C? is greedy and never fails.
size_t o200k_piece(std::string_view s, size_t i) {
  constexpr size_t kNone = std::string_view::npos;
  const size_t n = s.size();
  const Ch c0 = char_at(s, i);
  const size_t i1 = i + c0.len;
  auto is_up = [](uint8_t f) { return (f & ud::kFlagUpperish) != 0; };
  auto is_low = [](uint8_t f) { return (f & ud::kFlagLowerish) != 0; };
  auto is_other = [](uint8_t f) {
    return (f & (ud::kFlagLetter | ud::kFlagNumber | ud::kFlagSpace)) == 0;
  };
  // U* W+ from st. U* first takes its longest run; if W+ cannot start right after it, U*
  // gives back characters until W+ can start: at the last W character inside the run,
  // where W+ then ends after that one character (nothing W follows it before the run ends).
  auto upper_lower = [&](size_t st) -> size_t {
    size_t j = st, after_last_w = kNone;
    while (j < n) {
      const Ch c = char_at(s, j);
      if (!is_up(c.flags)) break;
      j += c.len;
      if (is_low(c.flags)) after_last_w = j;
    }
    if (j < n) {
      const Ch c = char_at(s, j);
      if (is_low(c.flags)) return scan(s, j + c.len, is_low);
    }
    return after_last_w;
  };
  // U+ W* from st.
  auto upper_then_lower = [&](size_t st) -> size_t {
    if (st >= n) return kNone;
    const Ch c = char_at(s, st);
    if (!is_up(c.flags)) return kNone;
    return scan(s, scan(s, st + c.len, is_up), is_low);
  };
  const bool prefix = !(c0.flags & (ud::kFlagLetter | ud::kFlagNumber)) && c0.cp != '\r' &&
                      c0.cp != '\n';
  size_t e;
  if (prefix && (e = upper_lower(i1)) != kNone) return contraction_end(s, e);
  if ((e = upper_lower(i)) != kNone) return contraction_end(s, e);
  if (prefix && (e = upper_then_lower(i1)) != kNone) return contraction_end(s, e);
  if ((e = upper_then_lower(i)) != kNone) return contraction_end(s, e);
  // \p{N}{1,3}
  if (c0.flags & ud::kFlagNumber) {
    size_t j = i1;
    for (int k = 1; k < 3 && j < n; ++k) {
      const Ch c = char_at(s, j);
      if (!(c.flags & ud::kFlagNumber)) break;
      j += c.len;
    }
    return j;
  }
  // ' ?[^\s\p{L}\p{N}]+[\r\n/]*'
  auto tail = [&](size_t j) {
    while (j < n && (s[j] == '\r' || s[j] == '\n' || s[j] == '/')) ++j;
    return j;
  };
  if (c0.cp == ' ' && i1 < n) {
    const Ch c1 = char_at(s, i1);
    if (is_other(c1.flags)) return tail(scan(s, i1 + c1.len, is_other));
  }
  if (is_other(c0.flags)) return tail(scan(s, i1, is_other));
  // \s*[\r\n]+|\s+(?!\S)|\s+
  return whitespace_piece(s, i, true);
}

// Kimi: o200k's structure (see o200k_piece) with two changes. A run of Han characters is a
// piece of its own, tried first; and Han is taken out of U and W, so a word run stops at Han
// (Han is \p{L}, so it is never the optional leading character either). The punctuation
// alternative takes only [\r\n]* after the run (o200k also takes '/').
size_t kimi_piece(std::string_view s, size_t i) {
  constexpr size_t kNone = std::string_view::npos;
  const size_t n = s.size();
  const Ch c0 = char_at(s, i);
  const size_t i1 = i + c0.len;
  auto han = [](const Ch& c) { return c.len > 1 && unicode::is_han(c.cp); };
  // [\p{Han}]+
  if (han(c0)) {
    size_t j = i1;
    while (j < n) {
      const Ch c = char_at(s, j);
      if (!han(c)) break;
      j += c.len;
    }
    return j;
  }
  auto is_up = [&](const Ch& c) { return (c.flags & ud::kFlagUpperish) && !han(c); };
  auto is_low = [&](const Ch& c) { return (c.flags & ud::kFlagLowerish) && !han(c); };
  auto scan_low = [&](size_t j) {
    while (j < n) {
      const Ch c = char_at(s, j);
      if (!is_low(c)) break;
      j += c.len;
    }
    return j;
  };
  auto scan_up = [&](size_t j) {
    while (j < n) {
      const Ch c = char_at(s, j);
      if (!is_up(c)) break;
      j += c.len;
    }
    return j;
  };
  // U* W+ from st (o200k_piece's upper_lower with the Han-free classes).
  auto upper_lower = [&](size_t st) -> size_t {
    size_t j = st, after_last_w = kNone;
    while (j < n) {
      const Ch c = char_at(s, j);
      if (!is_up(c)) break;
      j += c.len;
      if (is_low(c)) after_last_w = j;
    }
    if (j < n) {
      const Ch c = char_at(s, j);
      if (is_low(c)) return scan_low(j + c.len);
    }
    return after_last_w;
  };
  // U+ W* from st.
  auto upper_then_lower = [&](size_t st) -> size_t {
    if (st >= n) return kNone;
    const Ch c = char_at(s, st);
    if (!is_up(c)) return kNone;
    return scan_low(scan_up(st + c.len));
  };
  const bool prefix = !(c0.flags & (ud::kFlagLetter | ud::kFlagNumber)) && c0.cp != '\r' &&
                      c0.cp != '\n';
  size_t e;
  if (prefix && (e = upper_lower(i1)) != kNone) return contraction_end(s, e);
  if ((e = upper_lower(i)) != kNone) return contraction_end(s, e);
  if (prefix && (e = upper_then_lower(i1)) != kNone) return contraction_end(s, e);
  if ((e = upper_then_lower(i)) != kNone) return contraction_end(s, e);
  // \p{N}{1,3}
  if (c0.flags & ud::kFlagNumber) {
    size_t j = i1;
    for (int k = 1; k < 3 && j < n; ++k) {
      const Ch c = char_at(s, j);
      if (!(c.flags & ud::kFlagNumber)) break;
      j += c.len;
    }
    return j;
  }
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  auto is_other = [](uint8_t f) {
    return (f & (ud::kFlagLetter | ud::kFlagNumber | ud::kFlagSpace)) == 0;
  };
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

namespace {

size_t qwen2_piece(std::string_view s, size_t i) { return qwen_piece(s, i, ud::kFlagLetter); }
size_t qwen35_piece(std::string_view s, size_t i) { return qwen_piece(s, i, ud::kFlagLetter | ud::kFlagMark); }

constexpr Splitter kQwen2Splitter{"qwen2", kQwen2Regex, qwen2_piece};
constexpr Splitter kQwen35Splitter{"qwen3.5", kQwen35Regex, qwen35_piece};
constexpr Splitter kGpt2Splitter{"gpt2", kGpt2Regex, gpt2_piece};
constexpr Splitter kBailingSplitter{"bailing", kBailingRegex, bailing_piece};
constexpr Splitter kO200kSplitter{"o200k", kO200kRegex, o200k_piece};
constexpr Splitter kKimiSplitter{"kimi", kKimiRegex, kimi_piece};

// Those register_pattern() added.
struct Registered {
  std::mutex mu;
  std::vector<Pattern> patterns;
};
Registered& registered() {
  static Registered* const r = new Registered;  // never destroyed: used from static objects
  return *r;
}

}  // namespace

// Constant-initialised (constexpr constructor, constant addresses): usable from any static
// initialiser.
const Pattern Pattern::kQwen2{&kQwen2Splitter};
const Pattern Pattern::kQwen35{&kQwen35Splitter};
const Pattern Pattern::kGpt2{&kGpt2Splitter};
const Pattern Pattern::kBailing{&kBailingSplitter};
const Pattern Pattern::kO200k{&kO200kSplitter};
const Pattern Pattern::kKimi{&kKimiSplitter};

std::vector<Pattern> all_patterns() {
  std::vector<Pattern> all = {Pattern::kQwen2,   Pattern::kQwen35, Pattern::kGpt2,
                              Pattern::kBailing, Pattern::kO200k,  Pattern::kKimi};
  Registered& r = registered();
  std::lock_guard<std::mutex> lock(r.mu);
  all.insert(all.end(), r.patterns.begin(), r.patterns.end());
  return all;
}

Status register_pattern(const Splitter* s) {
  if (s == nullptr || s->name == nullptr || s->regex == nullptr || s->next_piece == nullptr)
    return invalid_argument("register_pattern: a name, a regex and a matcher are needed");
  for (Pattern p : all_patterns())
    if (std::string_view(p.splitter().name) == s->name || std::string_view(p.splitter().regex) == s->regex)
      return invalid_argument(std::string("split pattern '") + s->name + "' (or its regex) is already known as '" +
                              p.splitter().name + "'");
  Registered& r = registered();
  std::lock_guard<std::mutex> lock(r.mu);
  r.patterns.emplace_back(s);
  return Status::ok();
}

std::optional<Pattern> recognize(std::string_view regex) {
  for (Pattern p : all_patterns())
    if (regex == p.splitter().regex) return p;
  return std::nullopt;
}

}  // namespace hypic::pretok
