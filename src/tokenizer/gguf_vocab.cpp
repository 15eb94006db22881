#include "tokenizer/gguf_vocab.h"

#include <string_view>

#include "tokenizer/pretokenize.h"
#include "tokenizer/unicode.h"

namespace hypic {

using nlohmann::json;

namespace {

// llama.cpp's token types (llama-vocab.h LLAMA_TOKEN_TYPE_*).
enum TokenType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

struct PreName {
  const char* gguf;
  const char* hypic;  // pattern name; "gpt2": ByteLevel's own regex
  bool nfc;
};
// NFC where the family's tokenizer.json has it (Qwen), or where hypic's own family tokenizers
// assume it (Bailing, MiniMax: tools/family_tokenizers.py); none for the tiktoken families.
constexpr PreName kPre[] = {
    {"qwen2", "qwen2", true},          {"qwen35", "qwen3.5", true},      {"gpt-2", "gpt2", false},
    {"kimi-k2", "kimi", false},        {"bailingmoe", "bailing", true},  {"bailingmoe2", "bailing", true},
    {"minimax-m2", "o200k", true},     {"gpt-4o", "o200k", false},
};

// The regex source of hypic's split named `name` ("" if none).
std::string regex_of(std::string_view name) {
  for (pretok::Pattern pat : pretok::all_patterns())
    if (name == pretok::pattern_name(pat)) return pretok::pattern_regex(pat);
  return "";
}

const json* field(const std::map<std::string, json>& meta, const char* key) {
  auto it = meta.find(key);
  return it == meta.end() ? nullptr : &it->second;
}

}  // namespace

Result<Tokenizer> tokenizer_from_gguf(const std::map<std::string, json>& meta, const std::string& origin) {
  auto bad = [&origin](const std::string& m) { return corrupt(origin + ": " + m); };
  const json* model = field(meta, "tokenizer.ggml.model");
  if (!model) return not_found(origin + " has no tokenizer (tokenizer.ggml.model is absent)");
  if (*model != "gpt2")
    return unsupported(origin + ": tokenizer.ggml.model is " + model->dump(-1, ' ', false, json::error_handler_t::replace) +
                       "; hypic reads byte-level BPE tokenizers (\"gpt2\") only");
  const json* pre = field(meta, "tokenizer.ggml.pre");
  const std::string pre_name = pre && pre->is_string() ? pre->get<std::string>() : "default";
  const PreName* p = nullptr;
  for (const PreName& c : kPre)
    if (pre_name == c.gguf) p = &c;
  if (!p) {
    std::string known;
    for (const PreName& c : kPre) known += std::string(known.empty() ? "" : ", ") + c.gguf;
    return unsupported(origin + ": tokenizer.ggml.pre is '" + pre_name + "', a split hypic does not implement (it reads " +
                       known + ")");
  }
  const json* tokens = field(meta, "tokenizer.ggml.tokens");
  const json* merges = field(meta, "tokenizer.ggml.merges");
  const json* types = field(meta, "tokenizer.ggml.token_type");
  if (!tokens || !tokens->is_array()) return bad("tokenizer.ggml.tokens is absent or not a list");
  if (!merges || !merges->is_array()) return bad("tokenizer.ggml.merges is absent or not a list");
  for (size_t i = 0; i < merges->size(); ++i) {
    const json& m = (*merges)[i];
    if (!m.is_string() || unicode::valid_utf8_prefix(m.get_ref<const std::string&>()) != m.get_ref<const std::string&>().size())
      return bad("tokenizer.ggml.merges[" + std::to_string(i) + "] is not a UTF-8 string");
  }
  if (types && (!types->is_array() || types->size() != tokens->size()))
    return bad("tokenizer.ggml.token_type does not have one entry per token");

  // The tokenizer.json these describe, read by the same loader as a model directory's.
  json vocab = json::object(), added = json::array();
  for (size_t id = 0; id < tokens->size(); ++id) {
    const json& t = (*tokens)[id];
    if (!t.is_string() || unicode::valid_utf8_prefix(t.get_ref<const std::string&>()) != t.get_ref<const std::string&>().size())
      return bad("tokenizer.ggml.tokens[" + std::to_string(id) + "] is not a UTF-8 string");
    const json& ty = types ? (*types)[id] : json(int(kNormal));
    if (!ty.is_number_integer()) return bad("tokenizer.ggml.token_type[" + std::to_string(id) + "] is not an integer");
    switch (ty.get<int>()) {
      case kUnused: break;  // a hole in the ids
      case kControl:
      case kUserDefined:
        added.push_back({{"id", id}, {"content", t}, {"special", ty.get<int>() == kControl}, {"single_word", false},
                         {"lstrip", false}, {"rstrip", false}, {"normalized", false}});
        break;
      default: vocab[t.get<std::string>()] = id;
    }
  }
  json split = std::string_view(p->hypic) == "gpt2"
                   ? json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", true}}
                   : json{{"type", "Sequence"},
                          {"pretokenizers",
                           {{{"type", "Split"},
                             {"pattern", {{"Regex", regex_of(p->hypic)}}},
                             {"behavior", "Isolated"},
                             {"invert", false}},
                            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false},
                             {"use_regex", false}}}}};
  const json tj{{"normalizer", p->nfc ? json{{"type", "NFC"}} : json(nullptr)},
                {"pre_tokenizer", std::move(split)},
                {"model", {{"type", "BPE"}, {"vocab", std::move(vocab)}, {"merges", *merges}}},
                {"added_tokens", std::move(added)},
                {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}}};
  return Tokenizer::from_json(tj.dump(), origin + " (tokenizer.ggml.*, pre '" + pre_name + "')");
}

}  // namespace hypic
