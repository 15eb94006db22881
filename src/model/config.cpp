// ModelConfig: config.json → the architecture's parser (model/arch.h), then the checks
// every family shares. The `inspect` summary is in config_summary.cpp.
#include "model/config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_set>

#include "checkpoint/gguf_hf.h"
#include "core/json_bounded.h"
#include "model/arch.h"

namespace hypic {

using json = nlohmann::json;

const char* channel_mixer_name(ChannelMixerKind k) {
  switch (k) {
    case ChannelMixerKind::kSwiGlu: return "dense SwiGLU";
    case ChannelMixerKind::kMoe: return "MoE";
  }
  return "?";
}

bool ModelConfig::uses(const TokenMixerType& t) const {
  return std::any_of(layers.begin(), layers.end(), [&](const LayerSpec& l) { return l.token == &t; });
}
std::vector<const TokenMixerType*> ModelConfig::token_mixers() const {
  std::vector<const TokenMixerType*> r;
  for (const LayerSpec& l : layers)
    if (l.token && std::find(r.begin(), r.end(), l.token) == r.end()) r.push_back(l.token);
  return r;
}
bool ModelConfig::uses(ChannelMixerKind k) const {
  return std::any_of(layers.begin(), layers.end(),
                     [&](const LayerSpec& l) { return l.channel == k; });
}
const char* ModelConfig::arch_name() const { return arch ? arch->name() : "?"; }

Result<ModelConfig> ModelConfig::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (!std::filesystem::exists(path))
      return not_found("model config '" + path + "' does not exist; a model directory needs "
                       "the config.json of its Hugging Face checkpoint");
    return io_error("cannot read model config '" + path + "'");
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return from_json(ss.str(), path);
}

Result<ModelConfig> ModelConfig::from_dir(const std::string& dir) {
  if (is_gguf_path(dir)) {  // its metadata seen as config.json (checkpoint/gguf_hf.h)
    HYPIC_ASSIGN_OR_RETURN(GgufModel g, open_gguf_model(dir));
    return from_json(g.config.dump(), dir + " (metadata)");
  }
  return from_file((std::filesystem::path(dir) / "config.json").string());
}

namespace {

std::string known_model_types() {
  std::string s;
  for (const Architecture* a : architectures())
    for (const std::string& t : a->model_types()) s += (s.empty() ? "" : ", ") + t;
  return s;
}

// config.json's `architectures` (model class names) must belong to the model_type's family.
Status check_classes(const json& root, const std::string& source, const ModelConfig& c) {
  auto it = root.find("architectures");
  if (it == root.end() || it->is_null()) return Status::ok();
  if (!it->is_array())
    return invalid_argument(source + ": field 'architectures' must be a list of model class "
                            "names");
  for (const json& v : *it) {
    if (!v.is_string())
      return invalid_argument(source + ": field 'architectures' must be a list of model class "
                              "names, got " + json_dump_bounded(v));
    const std::string cls = v.get<std::string>();
    if (c.arch->has_class(cls)) continue;
    for (const Architecture* other : architectures())
      if (other != c.arch && other->has_class(cls))
        return invalid_argument(source + ": 'architectures' names " + cls + ", a " +
                                other->name() + " model, but model_type '" + c.model_type +
                                "' is " + c.arch->name() + "; the config contradicts itself "
                                "(fix model_type or architectures)");
    return unsupported(source + ": 'architectures' names '" + cls + "', which is not a " +
                       c.arch->name() + " model class hypic knows");
  }
  return Status::ok();
}

}  // namespace

Result<ModelConfig> ModelConfig::from_json(const std::string& text, const std::string& source) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    return invalid_argument(source + " is not valid JSON (" + e.what() + ")");
  }
  if (!root.is_object()) return invalid_argument(source + " is not a JSON object");
  // Copies and dumps of nlohmann values recurse per level: a damaged file must not reach them.
  if (json_nested_deeper(root, kMaxDumpDepth))
    return invalid_argument(source + " nests values more than " + std::to_string(kMaxDumpDepth) +
                            " levels deep: not a model config (damaged?)");

  ModelConfig c;
  auto mt = root.find("model_type");
  if (mt == root.end() || !mt->is_string())
    return invalid_argument(source + ": missing required field 'model_type' (a string such as "
                            "\"qwen3_next\" or \"qwen3_5\")");
  c.model_type = mt->get<std::string>();
  c.arch = find_architecture(c.model_type);
  if (c.arch == nullptr)
    return unsupported(source + ": model_type '" + c.model_type + "' is not supported; hypic "
                       "runs " + known_model_types());
  HYPIC_RETURN_IF_ERROR(check_classes(root, source, c));
  HYPIC_RETURN_IF_ERROR(c.arch->parse_config(root, source, &c));
  HYPIC_RETURN_IF_ERROR(c.validate().with_context(source));
  return c;
}

Status ModelConfig::validate() const {
  const std::string& p = text_prefix;
  auto positive = [&](const char* field, int64_t v) -> Status {
    if (v > 0) return Status::ok();
    return invalid_argument("field '" + p + field + "' must be positive, got " +
                            std::to_string(v));
  };
  HYPIC_RETURN_IF_ERROR(positive("vocab_size", vocab_size));
  HYPIC_RETURN_IF_ERROR(positive("hidden_size", hidden_size));
  HYPIC_RETURN_IF_ERROR(positive("num_hidden_layers", num_hidden_layers));
  HYPIC_RETURN_IF_ERROR(positive("max_position_embeddings", max_position_embeddings));
  if (arch == nullptr) return invalid_argument("no architecture: parse the config with from_json");
  if (int64_t(layers.size()) != num_hidden_layers)
    return invalid_argument("layer pattern has " + std::to_string(layers.size()) +
                            " entries for " + std::to_string(num_hidden_layers) + " layers");
  for (const LayerSpec& l : layers)
    if (l.token == nullptr) return invalid_argument("a layer has no token mixer");
  if (!(rms_norm_eps > 0))
    return invalid_argument("field '" + p + "rms_norm_eps' must be positive");
  for (const TokenMixerType* t : token_mixers()) HYPIC_RETURN_IF_ERROR(t->validate(*this));
  if (hidden_act != "silu" && hidden_act != "swish")
    return unsupported("field '" + p + "hidden_act' is '" + hidden_act + "'; hypic implements "
                       "only silu");

  if (moe.experts < 0) return invalid_argument("field '" + p + "num_experts' is negative");
  HYPIC_RETURN_IF_ERROR(arch->validate(*this));
  if (uses(ChannelMixerKind::kSwiGlu))
    HYPIC_RETURN_IF_ERROR(positive("intermediate_size", intermediate_size));
  if (uses(ChannelMixerKind::kMoe)) {
    HYPIC_RETURN_IF_ERROR(positive("moe_intermediate_size", moe.intermediate_size));
    if (moe.experts_per_tok <= 0 || moe.experts_per_tok > moe.experts)
      return invalid_argument("field '" + p + "num_experts_per_tok' (" +
                              std::to_string(moe.experts_per_tok) + ") must be in [1, " +
                              "num_experts = " + std::to_string(moe.experts) + "]");
    if (moe.shared_intermediate_size < 0)
      return invalid_argument("field '" + p + "shared_expert_intermediate_size' is negative");
  }
  return Status::ok();
}

int ModelConfig::num_full_layers() const {
  int n = 0;
  for (const LayerSpec& l : layers) n += l.token->state() == LayerKind::kFull;
  return n;
}
int ModelConfig::num_linear_layers() const { return int(layers.size()) - num_full_layers(); }

std::string ModelConfig::layer_pattern() const {
  std::string s;
  for (const LayerSpec& l : layers) s += l.token->state() == LayerKind::kFull ? 'F' : 'L';
  const size_t n = s.size();
  for (size_t p = 1; p < n; ++p) {
    if (n % p != 0) continue;
    bool repeats = true;
    for (size_t i = p; i < n && repeats; ++i) repeats = s[i] == s[i - p];
    if (repeats) return s.substr(0, p) + "×" + std::to_string(n / p);
  }
  return s;
}

namespace {

struct ParamCounts {
  int64_t total = 0, active = 0;
};

ParamCounts count_params(const ModelConfig& c) {
  const int64_t H = c.hidden_size, V = c.vocab_size;
  ParamCounts r;
  auto add = [&](int64_t n, int64_t active) {
    r.total += n;
    r.active += active;
  };
  add(V * H, V * H);                                              // embed_tokens
  if (!c.tie_word_embeddings) add(V * H, V * H);                  // lm_head
  add(H, H);                                                      // final norm
  for (const LayerSpec& l : c.layers) {
    const int64_t n = 2 * H + l.token->params(c);  // + input / post norms
    add(n, n);
    switch (l.channel) {
      case ChannelMixerKind::kMoe: {
        const int64_t expert = 3 * H * c.moe.intermediate_size;
        int64_t shared = H * c.moe.experts + (c.moe.router_bias ? c.moe.experts : 0);  // router
        if (c.moe.shared_intermediate_size > 0)  // + shared_expert_gate
          shared += 3 * H * c.moe.shared_intermediate_size + (c.moe.shared_gated ? H : 0);
        add(c.moe.experts * expert + shared, c.moe.experts_per_tok * expert + shared);
        break;
      }
      case ChannelMixerKind::kSwiGlu:
        add(3 * H * c.intermediate_size, 3 * H * c.intermediate_size);
        break;
    }
  }
  return r;
}

}  // namespace

int64_t ModelConfig::param_count() const { return count_params(*this).total; }
int64_t ModelConfig::active_param_count() const { return count_params(*this).active; }

Result<std::string> detect_weight_prefix(const std::vector<std::string>& tensor_names) {
  const std::unordered_set<std::string> names(tensor_names.begin(), tensor_names.end());
  for (const char* p : {"model.language_model.", "model.", "language_model.model."}) {
    const std::string prefix = p;
    if (names.count(prefix + "embed_tokens.weight") || names.count(prefix + "word_embeddings.weight"))
      return prefix;
    const std::string layer0 = prefix + "layers.0.";
    for (const std::string& n : tensor_names)
      if (n.compare(0, layer0.size(), layer0) == 0) return prefix;
  }
  std::string sample;
  for (size_t i = 0; i < tensor_names.size() && i < 3; ++i)
    sample += (i ? ", '" : "'") + tensor_names[i] + "'";
  return not_found("cannot find the language model's tensors: no 'embed_tokens.weight', "
                   "'word_embeddings.weight' or "
                   "'layers.0.*' under 'model.language_model.' or 'model.' (" +
                   std::to_string(tensor_names.size()) + " tensors" +
                   (sample.empty() ? "" : ", e.g. " + sample) + ")");
}

}  // namespace hypic
