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
  std::string s = format + ", ";
  s += nfc ? "normalizer NFC" : "no normalizer";
  s += ", pre-tokenizer ";
  if (split) s += std::string("Split(") + pretok::pattern_name(*split) + ") + ";
  if (model.rank_merges) {
    s += "bytes, BPE by rank";
    return s;
  }
  s += "ByteLevel(";
  s += bytelevel_regex ? "gpt2 regex" : "no regex";
  if (add_prefix_space) s += ", prefix space";
  s += ")";
  return s;
}

// ---- Tokenizer ----

namespace {

namespace fs = std::filesystem;

// The whole file, or an error naming it; `what` says what the file is for messages.
Result<std::string> read_whole(const std::string& path, const std::string& what,
                               const std::string& hint) {
  std::error_code ec;
  if (!fs::exists(path, ec))
    return not_found(what + " '" + path + "' does not exist; " + hint);
  if (fs::is_directory(path, ec))
    return invalid_argument(what + " '" + path + "' is a directory, not a file");
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  if (f) ss << f.rdbuf();
  if (!f || f.bad()) return io_error(what + " '" + path + "' cannot be read; check its permissions");
  return ss.str();
}

Result<Tokenizer> load_tiktoken_file(const std::string& ranks_path) {
  const std::string config_path = (fs::path(ranks_path).parent_path() / "tokenizer_config.json").string();
  HYPIC_ASSIGN_OR_RETURN(std::string ranks,
                         read_whole(ranks_path, "tiktoken rank file",
                                    "pass the tiktoken.model that ships with the model"));
  HYPIC_ASSIGN_OR_RETURN(std::string config,
                         read_whole(config_path, "tokenizer config",
                                    "a tiktoken rank file needs the model's tokenizer_config.json "
                                    "beside it (its special tokens and tokenizer class)"));
  return Tokenizer::from_tiktoken(ranks, config, ranks_path, config_path);
}

}  // namespace

Result<Tokenizer> Tokenizer::load(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path dir(path);
    if (fs::exists(dir / "tokenizer.json", ec)) return load((dir / "tokenizer.json").string());
    if (fs::exists(dir / "tiktoken.model", ec)) return load_tiktoken_file((dir / "tiktoken.model").string());
    return not_found("model directory '" + path + "' has no tokenizer: hypic reads tokenizer.json "
                     "(Hugging Face) or tiktoken.model with tokenizer_config.json (tiktoken, as "
                     "Kimi ships it); copy the model's tokenizer files there");
  }
  if (!fs::exists(path, ec))
    return not_found("tokenizer file '" + path + "' does not exist; pass the model directory or "
                     "the tokenizer.json / tiktoken.model that ships with the model");
  if (fs::path(path).extension() != ".json") return load_tiktoken_file(path);
  HYPIC_ASSIGN_OR_RETURN(std::string text,
                         read_whole(path, "tokenizer file", "pass the tokenizer.json that ships with the model"));
  return from_json(text, path);
}

Result<Tokenizer> Tokenizer::from_json(std::string_view json_text, const std::string& origin) {
  HYPIC_ASSIGN_OR_RETURN(auto impl, parse_tokenizer_json(json_text, origin));
  return Tokenizer(std::shared_ptr<const TokenizerImpl>(std::move(impl)));
}

Result<Tokenizer> Tokenizer::from_tiktoken(std::string_view ranks_text, std::string_view config_json,
                                           const std::string& ranks_origin,
                                           const std::string& config_origin) {
  HYPIC_ASSIGN_OR_RETURN(auto impl, parse_tiktoken(ranks_text, config_json, ranks_origin, config_origin));
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
         (impl().model.rank_merges ? std::string("ranked")
                                   : std::to_string(impl().num_merges) + " merges") + ", " +
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
