#include "tokenizer/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace hypic {

// ---- TokenizerImpl: the encode pipeline ----
// HF order: added tokens with normalized=false are cut out of the raw text; each remaining
// piece is normalized; added tokens with normalized=true are cut out of that; the rest is
// pre-tokenized and each pre-token goes through BPE.

void TokenizerImpl::encode(std::string_view text, bool parse_special,
                           std::vector<int32_t>& out) const {
  std::string repaired;
  if (unicode::valid_utf8_prefix(text) != text.size()) {
    unicode::append_lossy(text, repaired);
    text = repaired;
  }
  raw_added.split(text, parse_special, [&](std::string_view piece, int32_t id) {
    if (id >= 0) {
      out.push_back(id);
      return;
    }
    std::string normalized;
    if (nfc && !unicode::nfc_quick_check(piece)) {
      unicode::append_nfc(piece, normalized);
      piece = normalized;
    }
    normalized_added.split(piece, parse_special, [&](std::string_view plain, int32_t id2) {
      if (id2 >= 0) out.push_back(id2);
      else encode_plain(plain, out);
    });
  });
}

void TokenizerImpl::encode_plain(std::string_view text, std::vector<int32_t>& out) const {
  auto byte_level = [&](std::string_view piece) {
    std::string prefixed;
    if (add_prefix_space && piece[0] != ' ') {
      prefixed.reserve(piece.size() + 1);
      prefixed.push_back(' ');
      prefixed.append(piece);
      piece = prefixed;
    }
    if (bytelevel_regex) {
      pretok::for_each_piece(pretok::Pattern::kGpt2, piece,
                             [&](std::string_view word) { model.encode_word(word, out); });
    } else {
      model.encode_word(piece, out);
    }
  };
  if (split) pretok::for_each_piece(*split, text, byte_level);
  else byte_level(text);
}

std::string TokenizerImpl::describe() const {
  std::string s = nfc ? "normalizer NFC" : "no normalizer";
  s += ", pre-tokenizer ";
  if (split) s += std::string("Split(") + pretok::pattern_name(*split) + ") + ";
  s += "ByteLevel(";
  s += bytelevel_regex ? "gpt2 regex" : "no regex";
  if (add_prefix_space) s += ", prefix space";
  s += ")";
  return s;
}

// ---- Tokenizer ----

Result<Tokenizer> Tokenizer::load(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return invalid_argument("tokenizer path '" + path + "' is a directory; pass the " +
                            "tokenizer.json file inside it");
  if (!std::filesystem::exists(path, ec))
    return not_found("tokenizer file '" + path + "' does not exist; pass the tokenizer.json " +
                     "that ships with the model");
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  if (f) ss << f.rdbuf();
  if (!f || f.bad())
    return io_error("tokenizer file '" + path + "' cannot be read; check its permissions");
  return from_json(ss.str(), path);
}

Result<Tokenizer> Tokenizer::from_json(std::string_view json_text, const std::string& origin) {
  HYPIC_ASSIGN_OR_RETURN(auto impl, parse_tokenizer_json(json_text, origin));
  return Tokenizer(std::shared_ptr<const TokenizerImpl>(std::move(impl)));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  impl().encode(text, parse_special, ids);
  return ids;
}

void Tokenizer::encode_append(std::string_view text, std::vector<int32_t>& ids,
                              bool parse_special) const {
  impl().encode(text, parse_special, ids);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (!is_known(id)) continue;
    if (skip_special && impl().id_kind[size_t(id)] == TokenizerImpl::kSpecial) continue;
    bytes += impl().id_bytes[size_t(id)];
  }
  if (unicode::valid_utf8_prefix(bytes) == bytes.size()) return bytes;
  std::string out;
  unicode::append_lossy(bytes, out);
  return out;
}

int32_t Tokenizer::token_id(std::string_view token) const {
  if (auto it = impl().added_index.find(token); it != impl().added_index.end()) return it->second;
  if (auto it = impl().vocab.find(token); it != impl().vocab.end()) return it->second;
  return -1;
}

std::string Tokenizer::token_str(int32_t id) const {
  return is_known(id) ? impl().id_str[size_t(id)] : std::string();
}

std::string_view Tokenizer::token_bytes(int32_t id) const {
  return is_known(id) ? std::string_view(impl().id_bytes[size_t(id)]) : std::string_view();
}

int Tokenizer::vocab_size() const { return int(impl().id_kind.size()); }

bool Tokenizer::is_special(int32_t id) const {
  return is_known(id) && impl().id_kind[size_t(id)] == TokenizerImpl::kSpecial;
}

bool Tokenizer::is_known(int32_t id) const {
  return id >= 0 && size_t(id) < impl().id_kind.size() &&
         impl().id_kind[size_t(id)] != TokenizerImpl::kNone;
}

std::string Tokenizer::summary() const {
  return "tokenizer " + impl().origin + ": vocab_size " + std::to_string(vocab_size()) + " (" +
         std::to_string(impl().num_vocab) + " BPE tokens, " +
         std::to_string(impl().num_merges) + " merges, " +
         std::to_string(impl().added_index.size()) + " added), " + impl().describe();
}

void Tokenizer::clear_cache() const { impl().model.cache.clear(); }

// ---- IncrementalDecoder ----

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

std::string IncrementalDecoder::push(int32_t id) {
  if (skip_special_ && tokenizer_.is_special(id)) return {};
  pending_ += tokenizer_.token_bytes(id);
  std::string out;
  size_t used = unicode::append_lossy(pending_, out, /*final=*/false);
  pending_.erase(0, used);
  return out;
}

std::string IncrementalDecoder::push(std::span<const int32_t> ids) {
  std::string out;
  for (int32_t id : ids) out += push(id);
  return out;
}

std::string IncrementalDecoder::flush() {
  std::string out;
  unicode::append_lossy(pending_, out, /*final=*/true);
  pending_.clear();
  return out;
}

}  // namespace hypic
