// tokenizer.json -> TokenizerImpl. Every refusal names the file, the JSON field and what is
// wrong, and for an unsupported component what is supported.
#include <nlohmann/json.hpp>

#include "core/json_bounded.h"
#include "core/log.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace hypic {
namespace {

using json = nlohmann::json;

class Loader {
 public:
  Loader(const std::string& origin, TokenizerImpl& impl) : origin_(origin), t_(impl) {}

  Status load(const json& j) {
    if (!j.is_object()) return corrupt_("the top level is not a JSON object");
    HYPIC_RETURN_IF_ERROR(normalizer(j.value("normalizer", json())));
    HYPIC_RETURN_IF_ERROR(pre_tokenizer(j.value("pre_tokenizer", json())));
    HYPIC_RETURN_IF_ERROR(decoder(j.value("decoder", json())));
    if (!j.contains("model")) return corrupt_("no \"model\" section");
    HYPIC_RETURN_IF_ERROR(model(j["model"]));
    HYPIC_RETURN_IF_ERROR(added_tokens(j.value("added_tokens", json::array())));
    build_id_tables();
    return Status::ok();
  }

 private:
  Status corrupt_(const std::string& what) const {
    return corrupt("tokenizer file '" + origin_ + "': " + what +
                   "; the file looks damaged, re-download it");
  }
  Status unsupported_(const std::string& what) const {
    return unsupported("tokenizer file '" + origin_ + "': " + what);
  }
  static std::string type_of(const json& j) {
    return j.is_object() && j.contains("type") && j["type"].is_string()
               ? j["type"].get<std::string>() : std::string("(no type)");
  }

  Status normalizer(const json& n) {
    if (n.is_null()) return Status::ok();
    std::string type = type_of(n);
    if (type == "NFC") {
      t_.nfc = true;
      return Status::ok();
    }
    if (type == "Sequence") {
      for (const json& sub : n.value("normalizers", json::array()))
        HYPIC_RETURN_IF_ERROR(normalizer(sub));
      return Status::ok();
    }
    return unsupported_("normalizer '" + type +
                        "' is not supported (supported: NFC, none, or a Sequence of those)");
  }

  Status byte_level(const json& p) {
    t_.add_prefix_space = p.value("add_prefix_space", true);
    t_.bytelevel_regex = p.value("use_regex", true);
    return Status::ok();
  }

  Status split(const json& p) {
    const json& pat = p.value("pattern", json());
    if (!pat.is_object() || !pat.contains("Regex") || !pat["Regex"].is_string())
      return unsupported_("pre_tokenizer Split needs a {\"Regex\": ...} pattern; string "
                          "patterns are not supported");
    std::string rx = pat["Regex"].get<std::string>();
    auto pattern = pretok::recognize(rx);
    if (!pattern) {
      std::string known;
      for (pretok::Pattern p : pretok::all_patterns()) {
        known += known.empty() ? "" : "; ";
        known += std::string(pretok::pattern_name(p)) + ": " + json(pretok::pattern_regex(p)).dump();
      }
      return unsupported_("pre_tokenizer Split regex " + json(rx).dump() +
                          " is not one of the implemented patterns (" + known + ")");
    }
    std::string behavior = p.value("behavior", std::string("Isolated"));
    if (behavior != "Isolated")
      return unsupported_("pre_tokenizer Split behavior '" + behavior +
                          "' is not supported (only Isolated)");
    if (p.value("invert", false)) return unsupported_("pre_tokenizer Split with invert=true");
    t_.split = *pattern;
    return Status::ok();
  }

  Status pre_tokenizer(const json& p) {
    const std::string need =
        " (supported: ByteLevel, or Sequence[Split(Regex, Isolated), ByteLevel])";
    if (p.is_null()) return unsupported_("no pre_tokenizer; byte-level BPE needs one" + need);
    std::string type = type_of(p);
    if (type == "ByteLevel") return byte_level(p);
    if (type != "Sequence") return unsupported_("pre_tokenizer '" + type + "'" + need);
    const json& list = p.value("pretokenizers", json::array());
    if (list.size() == 2 && type_of(list[0]) == "Split" && type_of(list[1]) == "ByteLevel") {
      HYPIC_RETURN_IF_ERROR(split(list[0]));
      return byte_level(list[1]);
    }
    if (list.size() == 1 && type_of(list[0]) == "ByteLevel") return byte_level(list[0]);
    std::string types;
    for (const json& sub : list) types += (types.empty() ? "" : ", ") + type_of(sub);
    return unsupported_("pre_tokenizer Sequence[" + types + "]" + need);
  }

  Status decoder(const json& d) {
    std::string type = d.is_null() ? "null" : type_of(d);
    if (type == "ByteLevel") return Status::ok();
    if (type == "Sequence") {
      const json& list = d.value("decoders", json::array());
      if (list.size() == 1 && type_of(list[0]) == "ByteLevel") return Status::ok();
    }
    return unsupported_("decoder '" + type + "' is not supported (only ByteLevel)");
  }

  Status model(const json& m) {
    if (!m.is_object()) return corrupt_("\"model\" is not an object");
    std::string type = m.value("type", std::string("BPE"));
    if (type != "BPE")
      return unsupported_("model type '" + type + "' is not supported (only byte-level BPE)");
    if (m.contains("dropout") && !m["dropout"].is_null() && m["dropout"].get<double>() != 0.0)
      return unsupported_("BPE dropout is not supported (set \"dropout\": null)");
    if (m.value("byte_fallback", false))
      return unsupported_("BPE byte_fallback is not supported with a ByteLevel pre-tokenizer");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      if (m.contains(key) && !m[key].is_null() && !m[key].get<std::string>().empty())
        return unsupported_(std::string("BPE ") + key + " is not supported");
    }
    t_.model.ignore_merges = m.value("ignore_merges", false);
    t_.model.fuse_unk = m.value("fuse_unk", false);

    const json& vocab = m.value("vocab", json());
    if (!vocab.is_object()) return corrupt_("model.vocab is missing or not an object");
    t_.vocab.reserve(vocab.size());
    std::string bytes;
    for (auto it = vocab.begin(); it != vocab.end(); ++it) {
      if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
          it.value().get<int64_t>() > (1 << 30))
        return corrupt_("model.vocab entry " + json(it.key()).dump() + " has id " +
                        json_dump_bounded(it.value()) + ", not a non-negative integer");
      int32_t id = it.value().get<int32_t>();
      t_.vocab[it.key()] = id;
      if (bpe::bytelevel_to_bytes(it.key(), &bytes)) t_.model.bytes_to_id[bytes] = id;
    }
    t_.num_vocab = vocab.size();
    t_.model.byte_id.fill(-1);
    for (int b = 0; b < 256; ++b) {
      auto it = t_.model.bytes_to_id.find(std::string(1, char(b)));
      if (it != t_.model.bytes_to_id.end()) t_.model.byte_id[size_t(b)] = it->second;
    }
    if (m.contains("unk_token") && m["unk_token"].is_string()) {
      std::string unk = m["unk_token"].get<std::string>();
      auto it = t_.vocab.find(unk);
      if (it != t_.vocab.end()) t_.model.unk_id = it->second;
      else HYPIC_LOG_WARN("%s: unk_token '%s' is not in the vocab; unknown bytes are dropped",
                          origin_.c_str(), unk.c_str());
    }
    return merges(m.value("merges", json::array()));
  }

  Status merges(const json& list) {
    if (!list.is_array()) return corrupt_("model.merges is not an array");
    t_.model.merges.reserve(list.size());
    std::string a, b;
    int32_t rank = 0;
    for (const json& e : list) {
      if (e.is_string()) {
        const std::string& s = e.get_ref<const std::string&>();
        size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
          return corrupt_("model.merges[" + std::to_string(rank) + "] = " + json_dump_bounded(e) +
                          " is not two tokens separated by one space");
        a = s.substr(0, sp);
        b = s.substr(sp + 1);
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
        a = e[0].get<std::string>();
        b = e[1].get<std::string>();
      } else {
        return corrupt_("model.merges[" + std::to_string(rank) + "] = " + json_dump_bounded(e) +
                        " is neither \"a b\" nor [\"a\", \"b\"]");
      }
      auto ia = t_.vocab.find(a), ib = t_.vocab.find(b), iab = t_.vocab.find(a + b);
      for (auto [it, tok] : {std::pair{ia, &a}, std::pair{ib, &b}}) {
        if (it == t_.vocab.end())
          return corrupt_("model.merges[" + std::to_string(rank) + "] uses token " +
                          json(*tok).dump() + ", which is not in model.vocab");
      }
      if (iab == t_.vocab.end())
        return corrupt_("model.merges[" + std::to_string(rank) + "] makes " +
                        json(a + b).dump() + ", which is not in model.vocab");
      t_.model.merges.insert(ia->second, ib->second, rank, iab->second);
      ++rank;
    }
    t_.num_merges = size_t(rank);
    return Status::ok();
  }

  Status added_tokens(const json& list) {
    if (!list.is_array()) return corrupt_("added_tokens is not an array");
    std::vector<AddedToken> raw, norm;
    std::vector<std::string> raw_pat, norm_pat;
    for (const json& e : list) {
      if (!e.is_object() || !e.contains("id") || !e["id"].is_number_integer() ||
          !e.contains("content") || !e["content"].is_string() || e["id"].get<int64_t>() < 0)
        return corrupt_("added_tokens entry " + json_dump_bounded(e) + " lacks an integer id or content");
      AddedToken t;
      t.id = e["id"].get<int32_t>();
      t.content = e["content"].get<std::string>();
      t.special = e.value("special", false);
      t.lstrip = e.value("lstrip", false);
      t.rstrip = e.value("rstrip", false);
      t.single_word = e.value("single_word", false);
      t.normalized = e.value("normalized", !t.special);
      if (unicode::valid_utf8_prefix(t.content) != t.content.size())
        return corrupt_("added token " + std::to_string(t.id) + " is not valid UTF-8");
      t_.added_index.emplace(t.content, t.id);
      added_.push_back(t);
      if (t.normalized) {
        std::string pat;
        if (t_.nfc) unicode::append_nfc(t.content, pat);
        else pat = t.content;
        norm_pat.push_back(std::move(pat));
        norm.push_back(std::move(t));
      } else {
        raw_pat.push_back(t.content);
        raw.push_back(std::move(t));
      }
    }
    t_.raw_added.build(std::move(raw), std::move(raw_pat));
    t_.normalized_added.build(std::move(norm), std::move(norm_pat));
    return Status::ok();
  }

  void build_id_tables() {
    int32_t max_id = -1;
    for (const auto& [s, id] : t_.vocab) max_id = std::max(max_id, id);
    for (const AddedToken& t : added_) max_id = std::max(max_id, t.id);
    size_t n = size_t(max_id + 1);
    t_.id_str.assign(n, {});
    t_.id_bytes.assign(n, {});
    t_.id_kind.assign(n, TokenizerImpl::kNone);
    for (const auto& [s, id] : t_.vocab) {
      t_.id_str[size_t(id)] = s;
      t_.id_kind[size_t(id)] = TokenizerImpl::kVocab;
    }
    for (const AddedToken& t : added_) {  // added tokens win, as in HF id_to_token
      t_.id_str[size_t(t.id)] = t.content;
      t_.id_kind[size_t(t.id)] = t.special ? TokenizerImpl::kSpecial : TokenizerImpl::kAdded;
    }
    // ByteLevel decoder: a token made only of byte-level characters stands for those bytes;
    // any other token (e.g. an added "<think>" with a space) is emitted as its own UTF-8.
    for (size_t id = 0; id < n; ++id) {
      if (!bpe::bytelevel_to_bytes(t_.id_str[id], &t_.id_bytes[id])) t_.id_bytes[id] = t_.id_str[id];
    }
  }

  const std::string& origin_;
  TokenizerImpl& t_;
  std::vector<AddedToken> added_;
};

}  // namespace

Result<std::shared_ptr<TokenizerImpl>> parse_tokenizer_json(std::string_view json_text,
                                                            const std::string& origin) {
  auto impl = std::make_shared<TokenizerImpl>();
  impl->origin = origin;
  json j;
  try {
    j = json::parse(json_text.begin(), json_text.end());
  } catch (const json::exception& e) {
    return corrupt("tokenizer file '" + origin + "' is not valid JSON (" + e.what() +
                   "); the file looks damaged or truncated, re-download it");
  }
  // Copies and dumps of nlohmann values recurse per level: a damaged file must not reach them.
  if (json_nested_deeper(j, kMaxDumpDepth))
    return corrupt("tokenizer file '" + origin + "' nests values more than " + std::to_string(kMaxDumpDepth) +
                   " levels deep: not a Hugging Face tokenizer.json (damaged?), re-download it");
  try {
    Loader loader(origin, *impl);
    HYPIC_RETURN_IF_ERROR(loader.load(j));
  } catch (const json::exception& e) {
    return corrupt("tokenizer file '" + origin + "' has an unexpected structure (" + e.what() +
                   "); expected a Hugging Face tokenizer.json");
  }
  return impl;
}

}  // namespace hypic
