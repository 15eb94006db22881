// UTF-8 handling, character classes and NFC for the tokenizer. Internal to src/tokenizer.
//
// Invalid UTF-8 is replaced, never passed on: each maximal ill-formed subpart becomes one
// U+FFFD (Unicode ch. 3 "U+FFFD substitution of maximal subparts"), which is what Python's
// bytes.decode("utf-8", "replace") and Rust's String::from_utf8_lossy do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tokenizer/unicode_tables.h"

namespace hypic::unicode {

inline constexpr uint32_t kReplacementChar = 0xFFFD;

// Flags (unicode_data::kFlag*) of one code point; cp must be < 0x110000.
uint8_t props(uint32_t cp);

// Decodes one code point of *valid* UTF-8 at s[i] (i < n); stores its byte length in *len.
inline uint32_t decode_valid(const char* s, size_t i, int* len) {
  const auto* p = reinterpret_cast<const unsigned char*>(s) + i;
  unsigned c = p[0];
  if (c < 0x80) { *len = 1; return c; }
  if (c < 0xE0) { *len = 2; return ((c & 0x1F) << 6) | (p[1] & 0x3F); }
  if (c < 0xF0) { *len = 3; return ((c & 0x0F) << 12) | ((p[1] & 0x3F) << 6) | (p[2] & 0x3F); }
  *len = 4;
  return ((c & 0x07) << 18) | ((p[1] & 0x3F) << 12) | ((p[2] & 0x3F) << 6) | (p[3] & 0x3F);
}

void append_utf8(uint32_t cp, std::string& out);

// Length of the longest prefix of `s` that is valid UTF-8.
size_t valid_utf8_prefix(std::string_view s);

// Appends `s` to `out` with invalid sequences replaced by U+FFFD. When `final` is false an
// incomplete sequence at the end (one that more bytes could still complete) is held back.
// Returns the number of bytes of `s` consumed.
size_t append_lossy(std::string_view s, std::string& out, bool final = true);

// True when `s` (valid UTF-8) is certainly in NFC, judged per character without allocating.
bool nfc_quick_check(std::string_view s);

// Appends the NFC form of `s` (valid UTF-8) to `out`. Only the spans around characters that
// may change are rewritten; everything else is copied.
void append_nfc(std::string_view s, std::string& out);

// \p{Han} (Script=Han), as Oniguruma and Rust's regex crate (tiktoken) both define it.
bool is_han(uint32_t cp);

// Canonical combining class (0 for starters and unassigned code points).
uint8_t combining_class(uint32_t cp);

}  // namespace hypic::unicode
