#include "model/arch/qwen_common.h"

#include "model/arch/loaders.h"

#include <algorithm>
#include <cmath>

#include "model/mixers/gated_attention.h"
#include "model/mixers/gated_deltanet.h"
#include "model/mixers/moe.h"
#include "model/mixers/swiglu.h"
#include "model/weight_reader.h"

namespace hypic {

using json = nlohmann::json;

void read_qwen_experts(Fields& f, const QwenDefaults& d, ModelConfig* c) {
  c->moe.experts = f.i64("num_experts", d.experts);
  c->moe.experts_per_tok = f.i64("num_experts_per_tok", d.experts_per_tok);
  c->moe.intermediate_size = f.i64("moe_intermediate_size", 512);
  c->moe.shared_intermediate_size = f.i64("shared_expert_intermediate_size", 512);
}

Status parse_qwen_config(const json& root, const std::string& source, const QwenFamily& fam,
                         ModelConfig* out) {
  ModelConfig& c = *out;
  const bool nested = !fam.vl_model_type.empty() && c.model_type == fam.vl_model_type;
  const std::string& expected_text_type = fam.text_model_type;
  c.text_model_type = c.model_type;
  c.text_prefix = nested ? "text_config." : "";
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
  const QwenDefaults& d = fam.defaults;

  read_common(f, {d.vocab, d.hidden, d.layers, d.heads, d.kv_heads, 1e-6, 32768}, &c);
  c.head_dim = f.i64("head_dim", 256);
  c.attention_bias = f.boolean("attention_bias", false);
  c.linear.conv_kernel = f.i64("linear_conv_kernel_dim", 4);
  c.linear.key_head_dim = f.i64("linear_key_head_dim", 128);
  c.linear.value_head_dim = f.i64("linear_value_head_dim", 128);
  c.linear.key_heads = f.i64("linear_num_key_heads", 16);
  c.linear.value_heads = f.i64("linear_num_value_heads", 32);
  // Set only by the GGUF view (checkpoint/gguf_hf.h), never by a Hugging Face config.
  c.linear.tiled_value_heads = f.has("hypic_gguf_tiled_value_heads") && f.boolean("hypic_gguf_tiled_value_heads", false);
  c.mtp_num_hidden_layers = f.has("mtp_num_hidden_layers") ? f.i64("mtp_num_hidden_layers", 0) : 0;

  fam.read_mlp(f, d, &c);

  // Token mixers: layer_types wins over full_attention_interval.
  std::vector<const TokenMixerType*> kinds;
  if (f.has("layer_types")) {
    const std::vector<std::string> types = f.str_list("layer_types");
    if (f.status().is_ok() && int64_t(types.size()) != c.num_hidden_layers)
      return invalid_argument(source + ": " + f.name("layer_types") + " lists " +
                              std::to_string(types.size()) + " layers but num_hidden_layers "
                              "is " + std::to_string(c.num_hidden_layers));
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i] == "linear_attention") {
        kinds.push_back(&gated_deltanet_type());
      } else if (types[i] == "full_attention") {
        kinds.push_back(&gated_attention_type());
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
      kinds.push_back((i + 1) % interval == 0 ? &gated_attention_type()
                                              : &gated_deltanet_type());
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
  c.layers.clear();
  for (size_t i = 0; i < kinds.size(); ++i)
    c.layers.push_back({kinds[i], fam.is_moe(c, int(i)) ? ChannelMixerKind::kMoe
                                                        : ChannelMixerKind::kSwiGlu});
  return Status::ok();
}

namespace {

// Row block [r0, r0 + n) of a 2-D matrix, as a copy.
Tensor row_block(const Tensor& m, int64_t r0, int64_t n) { return m.rows(r0, r0 + n); }

// Qwen3-Next: per key-head group g, rows [q (dk) | k (dk) | v (r·dv) | z (r·dv)] of
// in_proj_qkvz and rows [b (r) | a (r)] of in_proj_ba; regrouped into contiguous [q | k | v],
// [z], [b | a].
Status load_gdn_interleaved(const WeightReader& rd, const ModelConfig& c, const std::string& p,
                            GdnWeights& w) {
  const int64_t H = c.hidden_size, nk = c.linear.key_heads, nv = c.linear.value_heads;
  const int64_t dk = c.linear.key_head_dim, dv = c.linear.value_head_dim, r = nv / nk;
  const int64_t G = 2 * dk + 2 * r * dv;
  HYPIC_ASSIGN_OR_RETURN(Tensor qkvz, rd.raw(p + "in_proj_qkvz.weight", {nk * G, H}));
  HYPIC_ASSIGN_OR_RETURN(Tensor bam, rd.raw(p + "in_proj_ba.weight", {2 * nv, H}));
  std::vector<Tensor> q, k, v, z, b, a;
  for (int64_t g = 0; g < nk; ++g) {
    q.push_back(row_block(qkvz, g * G, dk));
    k.push_back(row_block(qkvz, g * G + dk, dk));
    v.push_back(row_block(qkvz, g * G + 2 * dk, r * dv));
    z.push_back(row_block(qkvz, g * G + 2 * dk + r * dv, r * dv));
    b.push_back(row_block(bam, g * 2 * r, r));
    a.push_back(row_block(bam, g * 2 * r + r, r));
  }
  std::vector<Tensor> qkv = q;
  qkv.insert(qkv.end(), k.begin(), k.end());
  qkv.insert(qkv.end(), v.begin(), v.end());
  std::vector<Tensor> ba = b;
  ba.insert(ba.end(), a.begin(), a.end());
  HYPIC_ASSIGN_OR_RETURN(w.in_qkv, rd.stack(qkv, p + "in_proj_qkvz.weight"));
  HYPIC_ASSIGN_OR_RETURN(w.in_z, rd.stack(z, p + "in_proj_qkvz.weight"));
  HYPIC_ASSIGN_OR_RETURN(w.in_ba, rd.stack(ba, p + "in_proj_ba.weight"));
  return Status::ok();
}

// Qwen3.5: separate contiguous projections.
Status load_gdn_contiguous(const WeightReader& rd, const ModelConfig& c, const std::string& p,
                           GdnWeights& w) {
  const int64_t H = c.hidden_size, nv = c.linear.value_heads;
  const int64_t vd = nv * c.linear.value_head_dim;
  const int64_t conv_dim = 2 * c.linear.key_heads * c.linear.key_head_dim + vd;
  HYPIC_ASSIGN_OR_RETURN(w.in_qkv, rd.mat(p + "in_proj_qkv.weight", {conv_dim, H}));
  HYPIC_ASSIGN_OR_RETURN(w.in_z, rd.mat(p + "in_proj_z.weight", {vd, H}));
  HYPIC_ASSIGN_OR_RETURN(Tensor b, rd.raw(p + "in_proj_b.weight", {nv, H}));
  HYPIC_ASSIGN_OR_RETURN(Tensor a, rd.raw(p + "in_proj_a.weight", {nv, H}));
  HYPIC_ASSIGN_OR_RETURN(w.in_ba, rd.stack({b, a}, p + "in_proj_b/a.weight"));
  return Status::ok();
}

// The rest of a Gated DeltaNet layer, named alike in both families.
Status load_gdn_common(const WeightReader& rd, const ModelConfig& c, const std::string& p,
                       GdnWeights& w) {
  const int64_t H = c.hidden_size, nv = c.linear.value_heads;
  const int64_t dv = c.linear.value_head_dim, vd = nv * dv, K = c.linear.conv_kernel;
  const int64_t conv_dim = 2 * c.linear.key_heads * c.linear.key_head_dim + vd;
  HYPIC_ASSIGN_OR_RETURN(Tensor conv, rd.vec(p + "conv1d.weight", {conv_dim, 1, K}));
  w.conv_w = Tensor::zeros_f32({K, conv_dim});  // transposed: [K, conv_dim]
  for (int64_t c = 0; c < conv_dim; ++c)
    for (int64_t j = 0; j < K; ++j) w.conv_w.f32()[j * conv_dim + c] = conv.f32()[c * K + j];
  HYPIC_ASSIGN_OR_RETURN(Tensor A_log, rd.vec(p + "A_log", {nv}));
  w.neg_A = A_log;
  for (int64_t i = 0; i < nv; ++i) w.neg_A.f32()[i] = -std::exp(A_log.f32()[i]);
  HYPIC_ASSIGN_OR_RETURN(w.dt_bias, rd.vec(p + "dt_bias", {nv}));
  HYPIC_ASSIGN_OR_RETURN(w.norm_w, rd.vec(p + "norm.weight", {dv}));
  HYPIC_ASSIGN_OR_RETURN(w.out_proj, rd.mat(p + "out_proj.weight", {H, vd}));
  return Status::ok();
}

Status load_attn(const WeightReader& rd, const ModelConfig& c, const std::string& p, AttnWeights& w) {
  const int64_t H = c.hidden_size, nh = c.num_attention_heads, nkv = c.num_key_value_heads;
  const int64_t hd = c.head_dim;
  HYPIC_ASSIGN_OR_RETURN(Tensor q, rd.raw(p + "q_proj.weight", {nh * 2 * hd, H}));
  HYPIC_ASSIGN_OR_RETURN(Tensor k, rd.raw(p + "k_proj.weight", {nkv * hd, H}));
  HYPIC_ASSIGN_OR_RETURN(Tensor v, rd.raw(p + "v_proj.weight", {nkv * hd, H}));
  HYPIC_ASSIGN_OR_RETURN(w.qkv, rd.stack({q, k, v}, p + "q/k/v_proj.weight"));
  HYPIC_ASSIGN_OR_RETURN(w.q_norm, rd.vec(p + "q_norm.weight", {hd}));
  HYPIC_ASSIGN_OR_RETURN(w.k_norm, rd.vec(p + "k_norm.weight", {hd}));
  HYPIC_ASSIGN_OR_RETURN(w.o_proj, rd.mat(p + "o_proj.weight", {H, nh * hd}));
  return Status::ok();
}

Status load_moe(const WeightReader& rd, const ModelConfig& c, const std::string& p, MoeWeights& w) {
  const int64_t H = c.hidden_size, E = c.moe.experts, I = c.moe.intermediate_size;
  HYPIC_ASSIGN_OR_RETURN(w.router, rd.vec(p + "gate.weight", {E, H}));
  // Qwen's router: softmax over the experts, top-k, optional renormalisation.
  HYPIC_ASSIGN_OR_RETURN(w.routing, config_router(c));
  HYPIC_RETURN_IF_ERROR(load_experts(rd, E, H, I, p + "experts.", {}, &w.experts));
  w.has_shared = c.moe.shared_intermediate_size > 0;
  if (w.has_shared) {
    HYPIC_RETURN_IF_ERROR(
        load_swiglu(rd, H, c.moe.shared_intermediate_size, p + "shared_expert.", w.shared));
    HYPIC_ASSIGN_OR_RETURN(w.shared_gate, rd.vec(p + "shared_expert_gate.weight", {1, H}));
  }
  return Status::ok();
}

}  // namespace

Status load_qwen_token_mixer(const WeightReader& rd, const ModelConfig& c, int layer,
                             const std::string& p,  bool interleaved_gdn,
                             DecoderLayer* out) {
  const LayerSpec& spec = c.layer(layer);
  if (spec.token == &gated_deltanet_type()) {
    GdnWeights w;
    const std::string q = p + "linear_attn.";
    // Qwen3-Next read from a GGUF file has Qwen3.5's contiguous projections (gguf_qwen.cpp).
    const bool interleaved = interleaved_gdn && !rd.has(q + "in_proj_qkv.weight");
    HYPIC_RETURN_IF_ERROR(interleaved ? load_gdn_interleaved(rd, c, q, w) : load_gdn_contiguous(rd, c, q, w));
    HYPIC_RETURN_IF_ERROR(load_gdn_common(rd, c, q, w));
    w.tiled_key_heads = c.linear.tiled_value_heads ? c.linear.key_heads : 0;
    out->token = make_gated_deltanet(c, std::move(w));
    return Status::ok();
  }
  if (spec.token == &gated_attention_type()) {
    AttnWeights w;
    HYPIC_RETURN_IF_ERROR(load_attn(rd, c, p + "self_attn.", w));
    out->token = make_gated_attention(c, std::move(w));
    return Status::ok();
  }
  return unsupported(std::string("Qwen checkpoints have no ") + spec.token->name() + " layers");
}

Status load_qwen_channel_mixer(const WeightReader& rd, const ModelConfig& c, int layer,
                               const std::string& p, DecoderLayer* out) {
  switch (c.layer(layer).channel) {
    case ChannelMixerKind::kMoe: {
      MoeWeights w;
      HYPIC_RETURN_IF_ERROR(load_moe(rd, c, p + "mlp.", w));
      out->channel = make_moe(std::move(w));
      return Status::ok();
    }
    case ChannelMixerKind::kSwiGlu: {
      MlpWeights w;
      HYPIC_RETURN_IF_ERROR(load_swiglu(rd, c.hidden_size, c.intermediate_size, p + "mlp.", w));
      out->channel = make_swiglu(std::move(w));
      return Status::ok();
    }
  }
  return internal_error("unknown channel mixer");
}

Status load_qwen_layer(const WeightReader& rd, const ModelConfig& c, int layer,
                       const std::string& p,  bool interleaved_gdn,
                       DecoderLayer* out) {
  HYPIC_RETURN_IF_ERROR(load_layer_norms(rd, c, p, out));
  HYPIC_RETURN_IF_ERROR(load_qwen_token_mixer(rd, c, layer, p, interleaved_gdn, out));
  return load_qwen_channel_mixer(rd, c, layer, p, out);
}

}  // namespace hypic
