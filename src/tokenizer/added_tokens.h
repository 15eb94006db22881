// Added tokens (specials such as <|im_end|> and user-added ones): finding them in text the
// way HF AddedVocabulary::find_matches does. Internal to src/tokenizer.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hypic {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool lstrip = false, rstrip = false, single_word = false, normalized = false;
};

// Matches one group of added tokens (HF keeps the normalized=false and normalized=true ones
// apart: the first are looked for in the raw text, the second in normalized text).
class AddedTokenMatcher {
 public:
  // `patterns[i]` is the text to look for for `tokens[i]` (its content, NFC'd when the
  // token is matched in normalized text).
  void build(std::vector<AddedToken> tokens, std::vector<std::string> patterns);
  bool empty() const { return tokens_.empty(); }

  // Cuts `text` into plain runs and added tokens, in order: fn(piece, id) with id == -1 for
  // plain text (never empty) and the token id otherwise (piece is then the matched text,
  // including whitespace taken by lstrip / rstrip). Leftmost-longest matching; a special
  // token is ignored (left in plain text) unless parse_special.
  template <typename Fn>
  void split(std::string_view text, bool parse_special, Fn&& fn) const;

 private:
  struct Match {
    size_t start, end;
    int token;  // index into tokens_; -1: none
  };
  Match find(std::string_view text, size_t from) const;
  bool is_single_word(std::string_view text, size_t start, size_t end) const;
  static size_t whitespace_before(std::string_view text, size_t end);
  static size_t whitespace_after(std::string_view text, size_t start);

  std::vector<AddedToken> tokens_;
  std::vector<std::string> patterns_;
  std::array<std::vector<int>, 256> by_first_byte_;  // longest pattern first
  std::array<bool, 256> is_first_byte_{};
  int only_first_byte_ = -1;  // the one first byte of all patterns, if they share it
};

template <typename Fn>
void AddedTokenMatcher::split(std::string_view text, bool parse_special, Fn&& fn) const {
  if (text.empty()) return;
  if (tokens_.empty()) {
    fn(text, -1);
    return;
  }
  size_t emitted = 0;  // text[0, emitted) has been handed out
  for (size_t from = 0; from < text.size();) {
    Match m = find(text, from);
    if (m.token < 0) break;
    from = m.end;
    const AddedToken& t = tokens_[size_t(m.token)];
    if (t.special && !parse_special) continue;
    if (t.single_word && !is_single_word(text, m.start, m.end)) continue;
    size_t start = m.start, end = m.end;
    if (t.lstrip) start = std::max(whitespace_before(text, start), emitted);
    if (t.rstrip) end += whitespace_after(text, end);
    if (emitted < start) fn(text.substr(emitted, start - emitted), -1);
    start = std::max(start, emitted);
    fn(text.substr(start, end - start), t.id);
    emitted = std::max(emitted, end);
  }
  if (emitted < text.size()) fn(text.substr(emitted), -1);
}

}  // namespace hypic
