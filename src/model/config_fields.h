// Typed reading of config.json fields (model-internal; used by the architectures, model/arch/).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json_bounded.h"
#include "core/status.h"
#include "model/config.h"

namespace hypic {

// Reads typed fields of one JSON object. Absent or null fields take the given default (and
// are recorded); a field of the wrong type records the first error, see status().
class Fields {
 public:
  Fields(const nlohmann::json& obj, std::string prefix, std::string source,
         std::vector<std::string>* defaulted)
      : obj_(obj), prefix_(std::move(prefix)), source_(std::move(source)),
        defaulted_(defaulted) {}

  const nlohmann::json* find(const char* key) const {
    auto it = obj_.find(key);
    return it == obj_.end() || it->is_null() ? nullptr : &*it;
  }
  bool has(const char* key) const { return find(key) != nullptr; }

  int64_t i64(const char* key, int64_t def) {
    const nlohmann::json* v = find(key);
    if (!v) return defaulted(key), def;
    int64_t r = def;
    if (!as_i64(*v, &r)) fail(key, "an integer", *v);
    return r;
  }
  double f64(const char* key, double def) {
    const nlohmann::json* v = find(key);
    if (!v) return defaulted(key), def;
    if (!v->is_number()) return fail(key, "a number", *v), def;
    return v->get<double>();
  }
  bool boolean(const char* key, bool def) {
    const nlohmann::json* v = find(key);
    if (!v) return defaulted(key), def;
    if (!v->is_boolean()) return fail(key, "true or false", *v), def;
    return v->get<bool>();
  }
  std::string str(const char* key, const std::string& def) {
    const nlohmann::json* v = find(key);
    if (!v) return defaulted(key), def;
    if (!v->is_string()) return fail(key, "a string", *v), def;
    return v->get<std::string>();
  }
  std::optional<int64_t> opt_i64(const char* key) {
    const nlohmann::json* v = find(key);
    int64_t r = 0;
    if (!v) return std::nullopt;
    if (!as_i64(*v, &r)) return fail(key, "an integer", *v), std::nullopt;
    return r;
  }
  // A list of integers; `allow_scalar` also accepts a single integer (eos_token_id).
  std::vector<int64_t> i64_list(const char* key, bool allow_scalar = false) {
    const nlohmann::json* v = find(key);
    std::vector<int64_t> r;
    if (!v) return r;
    int64_t x = 0;
    if (allow_scalar && as_i64(*v, &x)) return {x};
    if (!v->is_array()) return fail(key, "a list of integers", *v), r;
    for (const nlohmann::json& e : *v) {
      if (!as_i64(e, &x)) return fail(key, "a list of integers", *v), std::vector<int64_t>{};
      r.push_back(x);
    }
    return r;
  }
  std::vector<double> f64_list(const char* key) {
    const nlohmann::json* v = find(key);
    std::vector<double> r;
    if (!v) return r;
    if (!v->is_array()) return fail(key, "a list of numbers", *v), r;
    for (const nlohmann::json& e : *v) {
      if (!e.is_number()) return fail(key, "a list of numbers", *v), std::vector<double>{};
      r.push_back(e.get<double>());
    }
    return r;
  }
  std::vector<std::string> str_list(const char* key) {
    const nlohmann::json* v = find(key);
    std::vector<std::string> r;
    if (!v) return r;
    if (!v->is_array()) return fail(key, "a list of strings", *v), r;
    for (const nlohmann::json& e : *v) {
      if (!e.is_string()) return fail(key, "a list of strings", *v), std::vector<std::string>{};
      r.push_back(e.get<std::string>());
    }
    return r;
  }

  // The nested object `key` (e.g. rope_parameters), read with its own Fields: absent or null
  // reads as {}; any other non-object is recorded here as an error and also reads as {}.
  Fields object(const char* key) {
    static const nlohmann::json kEmpty = nlohmann::json::object();
    const nlohmann::json* v = find(key);
    if (v && !v->is_object()) fail(key, "an object", *v);
    return Fields(v && v->is_object() ? *v : kEmpty, name(key) + ".", source_, nullptr);
  }

  const Status& status() const { return status_; }
  std::string name(const char* key) const { return prefix_ + key; }

 private:
  static bool as_i64(const nlohmann::json& v, int64_t* out) {
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
  void fail(const char* key, const char* want, const nlohmann::json& v) {
    if (status_.is_ok())
      status_ = invalid_argument(source_ + ": field '" + name(key) + "' must be " + want +
                                 ", got " + json_dump_bounded(v));
  }

  const nlohmann::json& obj_;
  std::string prefix_, source_;
  std::vector<std::string>* defaulted_;
  Status status_;
};

// The keys every family reads alike, with the family's defaults (its reference config's
// values): vocab_size, hidden_size, num_hidden_layers, num_attention_heads,
// num_key_value_heads, hidden_act, rms_norm_eps, max_position_embeddings.
struct CommonDefaults {
  int64_t vocab, hidden, layers, heads;
  int64_t kv_heads;  // 0: num_attention_heads
  double rms_norm_eps;
  int64_t max_position;
  // A released checkpoint's name for max_position_embeddings, read instead where present.
  const char* max_position_alias = nullptr;
};

inline void read_common(Fields& f, const CommonDefaults& d, ModelConfig* c) {
  c->vocab_size = f.i64("vocab_size", d.vocab);
  c->hidden_size = f.i64("hidden_size", d.hidden);
  c->num_hidden_layers = f.i64("num_hidden_layers", d.layers);
  c->num_attention_heads = f.i64("num_attention_heads", d.heads);
  c->num_key_value_heads =
      f.i64("num_key_value_heads", d.kv_heads > 0 ? d.kv_heads : c->num_attention_heads);
  c->hidden_act = f.str("hidden_act", "silu");
  c->rms_norm_eps = f.f64("rms_norm_eps", d.rms_norm_eps);
  const bool alias = d.max_position_alias && f.has(d.max_position_alias);
  c->max_position_embeddings =
      f.i64(alias ? d.max_position_alias : "max_position_embeddings", d.max_position);
}

}  // namespace hypic
