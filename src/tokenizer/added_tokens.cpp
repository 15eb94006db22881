#include "tokenizer/added_tokens.h"

#include <cstring>

#include "tokenizer/unicode.h"

namespace hypic {
namespace {

namespace ud = unicode_data;

// Start of the character that ends at byte `end` (text is valid UTF-8, end > 0).
size_t char_start_before(std::string_view text, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
  return i;
}

uint8_t flags_at(std::string_view text, size_t i) {
  int len;
  return unicode::props(unicode::decode_valid(text.data(), i, &len));
}

}  // namespace

void AddedTokenMatcher::build(std::vector<AddedToken> tokens, std::vector<std::string> patterns) {
  tokens_ = std::move(tokens);
  patterns_ = std::move(patterns);
  for (auto& b : by_first_byte_) b.clear();
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (patterns_[i].empty()) continue;
    by_first_byte_[static_cast<unsigned char>(patterns_[i][0])].push_back(int(i));
  }
  is_first_byte_.fill(false);
  int distinct = 0;
  for (int c = 0; c < 256; ++c) {
    if (by_first_byte_[size_t(c)].empty()) continue;
    is_first_byte_[size_t(c)] = true;
    only_first_byte_ = c;
    ++distinct;
  }
  if (distinct != 1) only_first_byte_ = -1;
  for (auto& b : by_first_byte_) {
    std::stable_sort(b.begin(), b.end(), [this](int x, int y) {
      return patterns_[size_t(x)].size() > patterns_[size_t(y)].size();
    });
  }
}

AddedTokenMatcher::Match AddedTokenMatcher::find(std::string_view text, size_t from) const {
  for (size_t i = from; i < text.size(); ++i) {
    if (only_first_byte_ >= 0) {  // e.g. all of Qwen's added tokens start with '<'
      const void* p = std::memchr(text.data() + i, only_first_byte_, text.size() - i);
      if (!p) break;
      i = size_t(static_cast<const char*>(p) - text.data());
    } else if (!is_first_byte_[static_cast<unsigned char>(text[i])]) {
      continue;
    }
    for (int t : by_first_byte_[static_cast<unsigned char>(text[i])]) {
      const std::string& p = patterns_[size_t(t)];
      if (p.size() <= text.size() - i && std::memcmp(text.data() + i, p.data(), p.size()) == 0)
        return {i, i + p.size(), t};
    }
  }
  return {text.size(), text.size(), -1};
}

bool AddedTokenMatcher::is_single_word(std::string_view text, size_t start, size_t end) const {
  if (start > 0 && (flags_at(text, char_start_before(text, start)) & ud::kFlagWord)) return false;
  if (end < text.size() && (flags_at(text, end) & ud::kFlagWord)) return false;
  return true;
}

size_t AddedTokenMatcher::whitespace_before(std::string_view text, size_t end) {
  while (end > 0) {
    size_t s = char_start_before(text, end);
    if (!(flags_at(text, s) & ud::kFlagSpace)) break;
    end = s;
  }
  return end;
}

size_t AddedTokenMatcher::whitespace_after(std::string_view text, size_t start) {
  size_t i = start;
  while (i < text.size()) {
    int len;
    uint32_t cp = unicode::decode_valid(text.data(), i, &len);
    if (!(unicode::props(cp) & ud::kFlagSpace)) break;
    i += size_t(len);
  }
  return i - start;
}

}  // namespace hypic
