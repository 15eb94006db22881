#include "model/config.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_set>

#include "core/json_bounded.h"

namespace hypic {
namespace {

using json = nlohmann::json;

// Reads typed fields of one JSON object. Absent or null fields take the given default (and
// are recorded); a field of the wrong type records the first error, see status().
class Fields {
 public:
  Fields(const json& obj, std::string prefix, std::string source,
         std::vector<std::string>* defaulted)
      : obj_(obj), prefix_(std::move(prefix)), source_(std::move(source)),
        defaulted_(defaulted) {}

  const json* find(const char* key) const {
    auto it = obj_.find(key);
    return it == obj_.end() || it->is_null() ? nullptr : &*it;
  }
  bool has(const char* key) const { return find(key) != nullptr; }

  int64_t i64(const char* key, int64_t def) {
    const json* v = find(key);
    if (!v) return defaulted(key), def;
    int64_t r = def;
    if (!as_i64(*v, &r)) fail(key, "an integer", *v);
    return r;
  }
  double f64(const char* key, double def) {
    const json* v = find(key);
    if (!v) return defaulted(key), def;
    if (!v->is_number()) return fail(key, "a number", *v), def;
    return v->get<double>();
  }
  bool boolean(const char* key, bool def) {
    const json* v = find(key);
    if (!v) return defaulted(key), def;
    if (!v->is_boolean()) return fail(key, "true or false", *v), def;
    return v->get<bool>();
  }
  std::string str(const char* key, const std::string& def) {
    const json* v = find(key);
    if (!v) return defaulted(key), def;
    if (!v->is_string()) return fail(key, "a string", *v), def;
    return v->get<std::string>();
  }
  std::optional<int64_t> opt_i64(const char* key) {
    const json* v = find(key);
    int64_t r = 0;
    if (!v) return std::nullopt;
    if (!as_i64(*v, &r)) return fail(key, "an integer", *v), std::nullopt;
    return r;
  }
  // A list of integers; `allow_scalar` also accepts a single integer (eos_token_id).
  std::vector<int64_t> i64_list(const char* key, bool allow_scalar = false) {
    const json* v = find(key);
    std::vector<int64_t> r;
    if (!v) return r;
    int64_t x = 0;
    if (allow_scalar && as_i64(*v, &x)) return {x};
    if (!v->is_array()) return fail(key, "a list of integers", *v), r;
    for (const json& e : *v) {
      if (!as_i64(e, &x)) return fail(key, "a list of integers", *v), std::vector<int64_t>{};
      r.push_back(x);
    }
    return r;
  }
  std::vector<std::string> str_list(const char* key) {
    const json* v = find(key);
    std::vector<std::string> r;
    if (!v) return r;
    if (!v->is_array()) return fail(key, "a list of strings", *v), r;
    for (const json& e : *v) {
      if (!e.is_string()) return fail(key, "a list of strings", *v), std::vector<std::string>{};
      r.push_back(e.get<std::string>());
    }
    return r;
  }

  const Status& status() const { return status_; }
  std::string name(const char* key) const { return prefix_ + key; }

 private:
  static bool as_i64(const json& v, int64_t* out) {
    if (v.is_number_unsigned()) {
      if (v.get<uint64_t>() > uint64_t(INT64_MAX)) return false;
      *out = int64_t(v.get<uint64_t>());
      return true;
    }
    if (v.is_number_integer()) {
      *out = v.get<int64_t>();
      return true;
    }
    return false;
  }
  void defaulted(const char* key) {
    if (defaulted_) defaulted_->push_back(name(key));
  }
  void fail(const char* key, const char* want, const json& v) {
    if (status_.is_ok())
      status_ = invalid_argument(source_ + ": field '" + name(key) + "' must be " + want +
                                 ", got " + json_dump_bounded(v));
  }

  const json& obj_;
  std::string prefix_, source_;
  std::vector<std::string>* defaulted_;
  Status status_;
};

// transformers 5.x defaults that differ between the three config classes.
struct ArchDefaults {
  int64_t vocab, hidden, intermediate, layers, heads, kv_heads;
  int64_t experts, experts_per_tok;
};
ArchDefaults defaults_for(Arch a) {
  switch (a) {
    case Arch::kQwen3Next: return {151936, 2048, 5632, 48, 16, 2, 512, 10};
    case Arch::kQwen3_5: return {248320, 4096, 12288, 32, 16, 4, 0, 0};
    case Arch::kQwen3_5Moe: return {248320, 2048, 0, 40, 16, 2, 256, 8};
  }
  return {};
}

bool is_nested_type(const std::string& model_type) {
  return model_type == "qwen3_5" || model_type == "qwen3_5_moe";
}

std::string human_count(int64_t n) {
  char buf[32];
  if (n >= 1'000'000'000)
    std::snprintf(buf, sizeof buf, "%.2fB", double(n) / 1e9);
  else
    std::snprintf(buf, sizeof buf, "%.1fM", double(n) / 1e6);
  return buf;
}

}  // namespace

const char* arch_name(Arch a) {
  switch (a) {
    case Arch::kQwen3Next: return "Qwen3-Next";
    case Arch::kQwen3_5: return "Qwen3.5";
    case Arch::kQwen3_5Moe: return "Qwen3.5-MoE";
  }
  return "?";
}

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
  return from_file((std::filesystem::path(dir) / "config.json").string());
}

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
  std::string expected_text_type;
  if (c.model_type == "qwen3_next") {
    c.arch = Arch::kQwen3Next;
  } else if (c.model_type == "qwen3_5" || c.model_type == "qwen3_5_text") {
    c.arch = Arch::kQwen3_5;
    expected_text_type = "qwen3_5_text";
  } else if (c.model_type == "qwen3_5_moe" || c.model_type == "qwen3_5_moe_text") {
    c.arch = Arch::kQwen3_5Moe;
    expected_text_type = "qwen3_5_moe_text";
  } else {
    return unsupported(source + ": model_type '" + c.model_type + "' is not supported; hypic "
                       "runs qwen3_next, qwen3_5 and qwen3_5_moe (and their *_text configs)");
  }
  const bool nested = is_nested_type(c.model_type);
  c.text_model_type = c.model_type;
  const json* text_obj = &root;
  if (nested) {
    auto tc = root.find("text_config");
    if (tc == root.end() || tc->is_null())
      return invalid_argument(source + ": missing required field 'text_config' (model_type '" +
                              c.model_type + "' keeps the language model's settings there)");
    if (!tc->is_object())
      return invalid_argument(source + ": field 'text_config' must be an object");
    text_obj = &*tc;
    auto tmt = tc->find("model_type");
    if (tmt != tc->end() && tmt->is_string()) {
      c.text_model_type = tmt->get<std::string>();
      if (c.text_model_type != expected_text_type && c.text_model_type != c.model_type)
        return invalid_argument(source + ": text_config.model_type is '" + c.text_model_type +
                                "', but model_type '" + c.model_type + "' needs '" +
                                expected_text_type + "'");
    } else {
      c.text_model_type = expected_text_type;
    }
  }

  Fields f(*text_obj, nested ? "text_config." : "", source, &c.defaulted_fields);
  Fields top(root, "", source, nullptr);
  const ArchDefaults d = defaults_for(c.arch);

  c.vocab_size = f.i64("vocab_size", d.vocab);
  c.hidden_size = f.i64("hidden_size", d.hidden);
  c.num_hidden_layers = f.i64("num_hidden_layers", d.layers);
  c.num_attention_heads = f.i64("num_attention_heads", d.heads);
  c.num_key_value_heads = f.i64("num_key_value_heads", d.kv_heads);
  c.head_dim = f.i64("head_dim", 256);
  c.attention_bias = f.boolean("attention_bias", false);
  c.hidden_act = f.str("hidden_act", "silu");
  c.max_position_embeddings = f.i64("max_position_embeddings", 32768);
  c.rms_norm_eps = f.f64("rms_norm_eps", 1e-6);
  c.linear_conv_kernel_dim = f.i64("linear_conv_kernel_dim", 4);
  c.linear_key_head_dim = f.i64("linear_key_head_dim", 128);
  c.linear_value_head_dim = f.i64("linear_value_head_dim", 128);
  c.linear_num_key_heads = f.i64("linear_num_key_heads", 16);
  c.linear_num_value_heads = f.i64("linear_num_value_heads", 32);
  c.mtp_num_hidden_layers = f.has("mtp_num_hidden_layers") ? f.i64("mtp_num_hidden_layers", 0) : 0;

  switch (c.arch) {
    case Arch::kQwen3Next:
      c.intermediate_size = f.i64("intermediate_size", d.intermediate);
      c.num_experts = f.i64("num_experts", d.experts);
      c.num_experts_per_tok = f.i64("num_experts_per_tok", d.experts_per_tok);
      c.moe_intermediate_size = f.i64("moe_intermediate_size", 512);
      c.shared_expert_intermediate_size = f.i64("shared_expert_intermediate_size", 512);
      c.norm_topk_prob = f.boolean("norm_topk_prob", true);
      c.decoder_sparse_step = f.i64("decoder_sparse_step", 1);
      c.mlp_only_layers = f.i64_list("mlp_only_layers");
      break;
    case Arch::kQwen3_5:
      c.intermediate_size = f.i64("intermediate_size", d.intermediate);
      break;
    case Arch::kQwen3_5Moe:
      // No dense MLP, no decoder_sparse_step / mlp_only_layers: every layer is MoE and the
      // router always renormalises its top-k weights (modeling_qwen3_5_moe.py).
      c.num_experts = f.i64("num_experts", d.experts);
      c.num_experts_per_tok = f.i64("num_experts_per_tok", d.experts_per_tok);
      c.moe_intermediate_size = f.i64("moe_intermediate_size", 512);
      c.shared_expert_intermediate_size = f.i64("shared_expert_intermediate_size", 512);
      c.norm_topk_prob = true;
      break;
  }

  // Layer kinds: layer_types wins over full_attention_interval.
  if (f.has("layer_types")) {
    const std::vector<std::string> types = f.str_list("layer_types");
    if (f.status().is_ok() && int64_t(types.size()) != c.num_hidden_layers)
      return invalid_argument(source + ": " + f.name("layer_types") + " lists " +
                              std::to_string(types.size()) + " layers but num_hidden_layers "
                              "is " + std::to_string(c.num_hidden_layers));
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i] == "linear_attention") {
        c.layer_kinds.push_back(LayerKind::kLinear);
      } else if (types[i] == "full_attention") {
        c.layer_kinds.push_back(LayerKind::kFull);
      } else {
        return unsupported(source + ": " + f.name("layer_types") + "[" + std::to_string(i) +
                           "] is '" + types[i] + "'; hypic supports 'linear_attention' and "
                           "'full_attention'");
      }
    }
  } else {
    const int64_t interval = f.i64("full_attention_interval", 4);
    if (f.status().is_ok() && interval <= 0)
      return invalid_argument(source + ": " + f.name("full_attention_interval") +
                              " must be positive, got " + std::to_string(interval));
    for (int64_t i = 0; i < std::max<int64_t>(c.num_hidden_layers, 0) && interval > 0; ++i)
      c.layer_kinds.push_back((i + 1) % interval == 0 ? LayerKind::kFull : LayerKind::kLinear);
  }

  // RoPE: rope_parameters (transformers 5) or the legacy rope_scaling dict; rope_theta and
  // partial_rotary_factor inside it win over top-level fields.
  const char* rope_key = f.has("rope_parameters") ? "rope_parameters" : "rope_scaling";
  const json* rp = f.find(rope_key);
  if (rp && !rp->is_object())
    return invalid_argument(source + ": field '" + f.name(rope_key) + "' must be an object");
  std::string rp_prefix = f.name(rope_key) + ".";
  if (rp && rp->contains("full_attention") && (*rp)["full_attention"].is_object()) {
    rp = &(*rp)["full_attention"];  // nested per layer type
    rp_prefix += "full_attention.";
  }
  static const json kEmpty = json::object();
  Fields r(rp ? *rp : kEmpty, rp_prefix, source, nullptr);
  c.rope_theta = r.has("rope_theta") ? r.f64("rope_theta", 0) : f.f64("rope_theta", 10000.0);
  c.partial_rotary_factor = r.has("partial_rotary_factor")
                                ? r.f64("partial_rotary_factor", 0)
                                : f.f64("partial_rotary_factor", 0.25);
  c.rope_type = r.has("rope_type") ? r.str("rope_type", "default") : r.str("type", "default");
  c.mrope_section = r.i64_list("mrope_section");
  c.mrope_interleaved = r.has("mrope_interleaved") && r.boolean("mrope_interleaved", false);

  // Fields that VL configs may keep on either level: the text level first, except for
  // tie_word_embeddings, which the VL model reads from the top level.
  auto either = [&](const char* key) -> Fields& {
    return f.has(key) || !nested ? f : top;
  };
  if (nested && top.has("tie_word_embeddings"))
    c.tie_word_embeddings = top.boolean("tie_word_embeddings", false);
  else
    c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
  c.eos_token_ids = either("eos_token_id").i64_list("eos_token_id", /*allow_scalar=*/true);
  c.bos_token_id = either("bos_token_id").opt_i64("bos_token_id");
  c.pad_token_id = either("pad_token_id").opt_i64("pad_token_id");
  for (const char* key : {"dtype", "torch_dtype"}) {
    if (!c.dtype.empty()) break;
    if (either(key).has(key)) c.dtype = either(key).str(key, "");
  }

  for (const Fields* x : {&f, &top, &r})
    if (!x->status().is_ok()) return x->status();
  c.weight_prefix = nested ? "model.language_model." : "model.";
  HYPIC_RETURN_IF_ERROR(c.validate().with_context(source));
  return c;
}

Status ModelConfig::validate() const {
  const std::string p = is_nested_type(model_type) ? "text_config." : "";
  auto positive = [&](const char* field, int64_t v) -> Status {
    if (v > 0) return Status::ok();
    return invalid_argument("field '" + p + field + "' must be positive, got " +
                            std::to_string(v));
  };
  HYPIC_RETURN_IF_ERROR(positive("vocab_size", vocab_size));
  HYPIC_RETURN_IF_ERROR(positive("hidden_size", hidden_size));
  HYPIC_RETURN_IF_ERROR(positive("num_hidden_layers", num_hidden_layers));
  HYPIC_RETURN_IF_ERROR(positive("num_attention_heads", num_attention_heads));
  HYPIC_RETURN_IF_ERROR(positive("num_key_value_heads", num_key_value_heads));
  HYPIC_RETURN_IF_ERROR(positive("head_dim", head_dim));
  HYPIC_RETURN_IF_ERROR(positive("max_position_embeddings", max_position_embeddings));
  HYPIC_RETURN_IF_ERROR(positive("linear_num_key_heads", linear_num_key_heads));
  HYPIC_RETURN_IF_ERROR(positive("linear_num_value_heads", linear_num_value_heads));
  HYPIC_RETURN_IF_ERROR(positive("linear_key_head_dim", linear_key_head_dim));
  HYPIC_RETURN_IF_ERROR(positive("linear_value_head_dim", linear_value_head_dim));
  HYPIC_RETURN_IF_ERROR(positive("linear_conv_kernel_dim", linear_conv_kernel_dim));
  if (int64_t(layer_kinds.size()) != num_hidden_layers)
    return invalid_argument("layer pattern has " + std::to_string(layer_kinds.size()) +
                            " entries for " + std::to_string(num_hidden_layers) + " layers");
  if (!(rms_norm_eps > 0))
    return invalid_argument("field '" + p + "rms_norm_eps' must be positive");
  if (!(rope_theta > 0)) return invalid_argument("rope_theta must be positive");
  if (num_attention_heads % num_key_value_heads != 0)
    return invalid_argument("field '" + p + "num_attention_heads' (" +
                            std::to_string(num_attention_heads) + ") must be a multiple of '" +
                            p + "num_key_value_heads' (" + std::to_string(num_key_value_heads) +
                            ") for grouped-query attention");
  if (linear_num_value_heads % linear_num_key_heads != 0)
    return invalid_argument("field '" + p + "linear_num_value_heads' (" +
                            std::to_string(linear_num_value_heads) + ") must be a multiple of '" +
                            p + "linear_num_key_heads' (" +
                            std::to_string(linear_num_key_heads) +
                            "): each key head serves a whole group of value heads");
  if (!(partial_rotary_factor > 0 && partial_rotary_factor <= 1))
    return invalid_argument("partial_rotary_factor must be in (0, 1], got " +
                            std::to_string(partial_rotary_factor));
  const int64_t rd = rotary_dim();
  if (rd <= 0 || rd % 2 != 0)
    return invalid_argument("head_dim " + std::to_string(head_dim) + " × partial_rotary_factor " +
                            std::to_string(partial_rotary_factor) + " gives " +
                            std::to_string(rd) + " rotary dims; it must be a positive even "
                            "number (NeoX RoPE rotates pairs)");
  if (rope_type != "default" && rope_type != "mrope")
    return unsupported("rope_type '" + rope_type + "' is not supported (hypic implements plain "
                       "RoPE); remove the scaling entry from config.json to run without "
                       "context extension");
  if (!mrope_section.empty()) {
    int64_t sum = 0;
    for (int64_t s : mrope_section) {
      if (s < 0) return invalid_argument("mrope_section has a negative entry");
      sum += s;
    }
    if (2 * sum != rd)
      return invalid_argument("mrope_section sums to " + std::to_string(sum) + " frequency "
                              "pairs, but there are " + std::to_string(rd) + " rotary dims");
  }
  if (hidden_act != "silu" && hidden_act != "swish")
    return unsupported("field '" + p + "hidden_act' is '" + hidden_act + "'; hypic implements "
                       "only silu");
  if (attention_bias)
    return unsupported("field '" + p + "attention_bias' is true; hypic supports only "
                       "bias-free attention projections");

  if (num_experts < 0) return invalid_argument("field '" + p + "num_experts' is negative");
  if (arch == Arch::kQwen3_5Moe) HYPIC_RETURN_IF_ERROR(positive("num_experts", num_experts));
  if (arch == Arch::kQwen3Next) {
    HYPIC_RETURN_IF_ERROR(positive("decoder_sparse_step", decoder_sparse_step));
    for (int64_t l : mlp_only_layers)
      if (l < 0 || l >= num_hidden_layers)
        return invalid_argument("field 'mlp_only_layers' has layer " + std::to_string(l) +
                                ", outside [0, " + std::to_string(num_hidden_layers) + ")");
  }
  bool any_dense = false, any_moe = false;
  for (int i = 0; i < num_hidden_layers; ++i) (is_moe(i) ? any_moe : any_dense) = true;
  if (any_dense) HYPIC_RETURN_IF_ERROR(positive("intermediate_size", intermediate_size));
  if (any_moe) {
    HYPIC_RETURN_IF_ERROR(positive("moe_intermediate_size", moe_intermediate_size));
    if (num_experts_per_tok <= 0 || num_experts_per_tok > num_experts)
      return invalid_argument("field '" + p + "num_experts_per_tok' (" +
                              std::to_string(num_experts_per_tok) + ") must be in [1, " +
                              "num_experts = " + std::to_string(num_experts) + "]");
    if (shared_expert_intermediate_size < 0)
      return invalid_argument("field '" + p + "shared_expert_intermediate_size' is negative");
  }
  return Status::ok();
}

bool ModelConfig::is_moe(int layer) const {
  switch (arch) {
    case Arch::kQwen3Next:
      // modeling_qwen3_next.py Qwen3NextDecoderLayer.__init__
      return num_experts > 0 && decoder_sparse_step > 0 &&
             (layer + 1) % decoder_sparse_step == 0 &&
             std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) ==
                 mlp_only_layers.end();
    case Arch::kQwen3_5: return false;
    case Arch::kQwen3_5Moe: return true;
  }
  return false;
}

int ModelConfig::num_full_layers() const {
  return int(std::count(layer_kinds.begin(), layer_kinds.end(), LayerKind::kFull));
}
int ModelConfig::num_linear_layers() const { return int(layer_kinds.size()) - num_full_layers(); }

std::string ModelConfig::layer_pattern() const {
  std::string s;
  for (LayerKind k : layer_kinds) s += k == LayerKind::kFull ? 'F' : 'L';
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
  const int64_t kd = c.linear_num_key_heads * c.linear_key_head_dim;
  const int64_t vd = c.linear_num_value_heads * c.linear_value_head_dim;
  const int64_t nv = c.linear_num_value_heads;
  const int64_t qd = c.num_attention_heads * c.head_dim;
  const int64_t kvd = c.num_key_value_heads * c.head_dim;
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    int64_t n = 2 * H;  // input / post-attention norms
    if (c.is_full(i)) {
      n += H * 2 * qd + 2 * H * kvd + qd * H + 2 * c.head_dim;  // q(+gate), k, v, o, q/k norm
    } else {
      n += H * (2 * kd + 2 * vd) + H * 2 * nv;           // qkv, z, b, a projections
      n += (2 * kd + vd) * c.linear_conv_kernel_dim;     // depthwise conv
      n += 2 * nv + c.linear_value_head_dim + vd * H;    // A_log, dt_bias, norm, out_proj
    }
    add(n, n);
    if (c.is_moe(i)) {
      const int64_t expert = 3 * H * c.moe_intermediate_size;
      int64_t shared = H * c.num_experts;  // router
      if (c.shared_expert_intermediate_size > 0)
        shared += 3 * H * c.shared_expert_intermediate_size + H;  // + shared_expert_gate
      add(c.num_experts * expert + shared, c.num_experts_per_tok * expert + shared);
    } else {
      add(3 * H * c.intermediate_size, 3 * H * c.intermediate_size);
    }
  }
  return r;
}

}  // namespace

int64_t ModelConfig::param_count() const { return count_params(*this).total; }
int64_t ModelConfig::active_param_count() const { return count_params(*this).active; }

std::string ModelConfig::summary() const {
  std::string s;
  auto line = [&](const std::string& x) { s += x + "\n"; };
  char buf[512];
  line(std::string("architecture: ") + arch_name(arch) + " (model_type " + model_type +
       (text_model_type != model_type ? ", text " + text_model_type : std::string()) + ")" +
       (dtype.empty() ? "" : ", weights " + dtype));
  std::snprintf(buf, sizeof buf, "layers: %lld = %d Gated DeltaNet (L) + %d full attention (F), "
                "pattern %s", (long long)num_hidden_layers, num_linear_layers(),
                num_full_layers(), layer_pattern().c_str());
  line(buf);
  std::snprintf(buf, sizeof buf, "hidden %lld, vocab %lld, tied embeddings: %s, rms_norm_eps %g",
                (long long)hidden_size, (long long)vocab_size,
                tie_word_embeddings ? "yes" : "no", rms_norm_eps);
  line(buf);
  std::snprintf(buf, sizeof buf, "attention: %lld heads, %lld KV heads, head_dim %lld, RoPE on "
                "%lld dims (theta %.0f), max positions %lld",
                (long long)num_attention_heads, (long long)num_key_value_heads,
                (long long)head_dim, (long long)rotary_dim(), rope_theta,
                (long long)max_position_embeddings);
  line(buf);
  std::snprintf(buf, sizeof buf, "gated deltanet: %lld key heads x %lld, %lld value heads x "
                "%lld, conv %lld",
                (long long)linear_num_key_heads, (long long)linear_key_head_dim,
                (long long)linear_num_value_heads, (long long)linear_value_head_dim,
                (long long)linear_conv_kernel_dim);
  line(buf);
  int moe_layers = 0;
  for (int i = 0; i < num_hidden_layers; ++i) moe_layers += is_moe(i);
  if (moe_layers > 0) {
    std::snprintf(buf, sizeof buf, "mlp: MoE in %d/%lld layers, %lld experts, top-%lld%s, "
                  "expert width %lld, shared expert width %lld",
                  moe_layers, (long long)num_hidden_layers, (long long)num_experts,
                  (long long)num_experts_per_tok, norm_topk_prob ? " renormalised" : "",
                  (long long)moe_intermediate_size, (long long)shared_expert_intermediate_size);
    line(buf);
  }
  if (moe_layers < num_hidden_layers) {
    std::snprintf(buf, sizeof buf, "mlp: dense width %lld in %lld layers",
                  (long long)intermediate_size, (long long)(num_hidden_layers - moe_layers));
    line(buf);
  }
  const ParamCounts pc = count_params(*this);
  line("parameters: " + human_count(pc.total) + " total, " + human_count(pc.active) +
       " active per token (text model, excluding vision tower and MTP layers)");
  line("tensor prefix: " + weight_prefix);
  return s;
}

Result<std::string> detect_weight_prefix(const std::vector<std::string>& tensor_names) {
  const std::unordered_set<std::string> names(tensor_names.begin(), tensor_names.end());
  for (const char* p : {"model.language_model.", "model.", "language_model.model."}) {
    const std::string prefix = p;
    if (names.count(prefix + "embed_tokens.weight")) return prefix;
    const std::string layer0 = prefix + "layers.0.";
    for (const std::string& n : tensor_names)
      if (n.compare(0, layer0.size(), layer0) == 0) return prefix;
  }
  std::string sample;
  for (size_t i = 0; i < tensor_names.size() && i < 3; ++i)
    sample += (i ? ", '" : "'") + tensor_names[i] + "'";
  return not_found("cannot find the language model's tensors: no 'embed_tokens.weight' or "
                   "'layers.0.*' under 'model.language_model.' or 'model.' (" +
                   std::to_string(tensor_names.size()) + " tensors" +
                   (sample.empty() ? "" : ", e.g. " + sample) + ")");
}

}  // namespace hypic
