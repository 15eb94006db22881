#include "model/arch/kda_mla.h"

#include <cmath>
#include <utility>

#include "model/arch/loaders.h"
#include "model/config_fields.h"
#include "model/mixers/kda.h"
#include "model/mixers/mla.h"
#include "model/mixers/moe.h"
#include "model/weight_reader.h"

namespace hypic {
namespace {

// The depthwise conv kernels of q, k, v ([D, 1, K] each, or one [3D, 1, K]) as [K, 3D] F32.
Result<Tensor> load_conv(const WeightReader& rd, const std::string& p, int64_t D, int64_t K) {
  std::vector<Tensor> parts;
  if (rd.has(p + "conv1d.weight")) {
    HYPIC_ASSIGN_OR_RETURN(Tensor t, rd.vec(p + "conv1d.weight", {3 * D, 1, K}));
    parts.push_back(t);
  } else {
    for (const char* n : {"q_conv1d.weight", "k_conv1d.weight", "v_conv1d.weight"}) {
      HYPIC_ASSIGN_OR_RETURN(Tensor t, rd.vec(p + n, {D, 1, K}));
      parts.push_back(t);
    }
  }
  Tensor w = Tensor::zeros_f32({K, 3 * D});
  int64_t c0 = 0;
  for (const Tensor& t : parts) {
    const int64_t n = t.dim(0);
    for (int64_t ch = 0; ch < n; ++ch)
      for (int64_t j = 0; j < K; ++j) w.f32()[j * 3 * D + c0 + ch] = t.f32()[ch * K + j];
    c0 += n;
  }
  return w;
}

}  // namespace

void parse_deepseek_moe(Fields& f, const DeepseekMoeDefaults& d, ModelConfig* c) {
  auto key = [&](const char* released, const char* hf) { return f.has(released) ? released : hf; };
  c->moe.experts = f.i64(key("num_experts", "num_local_experts"), d.experts);
  c->moe.experts_per_tok = f.i64(key("num_experts_per_token", "num_experts_per_tok"), d.top_k);
  c->moe.shared_intermediate_size =
      c->moe.intermediate_size * f.i64(key("num_shared_experts", "n_shared_experts"), d.shared);
  c->moe.shared_gated = false;
  c->moe.norm_topk_prob = f.boolean(key("moe_renormalize", "norm_topk_prob"), true);
  c->moe.router_sigmoid = true;
  c->moe.router_bias = true;  // e_score_correction_bias (a buffer: zeros when untrained)
  c->moe.router_groups = std::max<int64_t>(f.i64(key("num_expert_group", "n_group"), d.groups), 1);
  c->moe.router_topk_groups = std::max<int64_t>(f.i64("topk_group", d.topk_groups), 1);
  c->moe.routed_scaling_factor = f.f64("routed_scaling_factor", d.scaling);
}

Status deepseek_mlp_kinds(Fields& f, const std::string& source, int64_t n, int64_t dense,
                          std::vector<ChannelMixerKind>* out) {
  out->assign(size_t(std::max<int64_t>(n, 0)), ChannelMixerKind::kMoe);
  if (f.has("mlp_layer_types")) {
    const std::vector<std::string> types = f.str_list("mlp_layer_types");
    if (int64_t(types.size()) != n)
      return invalid_argument(source + ": mlp_layer_types lists " + std::to_string(types.size()) +
                              " layers but num_hidden_layers is " + std::to_string(n));
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i] != "dense" && types[i] != "sparse")
        return invalid_argument(source + ": mlp_layer_types[" + std::to_string(i) + "] is '" +
                                types[i] + "' (expected 'dense' or 'sparse')");
      (*out)[i] = types[i] == "dense" ? ChannelMixerKind::kSwiGlu : ChannelMixerKind::kMoe;
    }
    return Status::ok();
  }
  const int64_t k = f.i64("first_k_dense_replace", dense);
  for (int64_t i = 0; i < std::min<int64_t>(k, n); ++i) (*out)[size_t(i)] = ChannelMixerKind::kSwiGlu;
  return Status::ok();
}

Status kda_mla_layer_types(Fields& f, const std::string& source, int64_t n,
                           std::vector<const TokenMixerType*>* kinds) {
  const std::vector<std::string> types = f.str_list("layer_types");
  if (int64_t(types.size()) != n)
    return invalid_argument(source + ": layer_types lists " + std::to_string(types.size()) +
                            " layers but num_hidden_layers is " + std::to_string(n));
  kinds->resize(types.size());
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i] != "linear_attention" && types[i] != "full_attention")
      return unsupported(source + ": layer_types[" + std::to_string(i) + "] is '" + types[i] +
                         "'; layers are 'linear_attention' (KDA) or 'full_attention' (MLA)");
    (*kinds)[i] = types[i] == "full_attention" ? &mla_type() : &kda_type();
  }
  return Status::ok();
}

Status refuse_rotated_kda(Fields& f, Fields* la, const std::string& source) {
  const std::pair<Fields*, const char*> keys[] = {
      {&f, "linear_rope"}, {la, "use_rope"}, {la, "rope"}};
  for (const auto& [fields, key] : keys)
    if (fields && fields->has(key) && fields->boolean(key, false))
      return unsupported(source + ": field '" + fields->name(key) + "' asks for RoPE in "
                         "the KDA layers; hypic runs KDA without positional encoding (a "
                         "rotated KDA state has no exact re-rotation for position-independent "
                         "segments). Remove the key or set it to false");
  return Status::ok();
}

Status load_kda_layer(const WeightReader& rd, const ModelConfig& c, const std::string& p,
                      const char* out, DecoderLayer* layer) {
  const int64_t H = c.hidden_size, nh = c.linear.key_heads, hd = c.linear.key_head_dim;
  const int64_t D = nh * hd, K = c.linear.conv_kernel;
  const std::string fg = rd.has(p + "forget_gate.dt_bias") ? p + "forget_gate." : p;
  KdaWeights w;
  std::vector<Tensor> rows;
  for (const char* n : {"q_proj.weight", "k_proj.weight", "v_proj.weight"}) {
    HYPIC_ASSIGN_OR_RETURN(Tensor t, rd.raw(p + n, {D, H}));
    rows.push_back(t);
  }
  if (c.kda.low_rank_gates) {  // Kimi: rank head_dim
    HYPIC_ASSIGN_OR_RETURN(Tensor fa, rd.raw(fg + "f_a_proj.weight", {hd, H}));
    HYPIC_ASSIGN_OR_RETURN(Tensor ga, rd.raw(p + "g_a_proj.weight", {hd, H}));
    rows.push_back(fa);
    rows.push_back(ga);
    HYPIC_ASSIGN_OR_RETURN(w.f_up, rd.mat(fg + "f_b_proj.weight", {D, hd}));
    HYPIC_ASSIGN_OR_RETURN(w.g_up, rd.mat(p + "g_b_proj.weight", {D, hd}));
    w.f_rows = w.g_rows = hd;
  } else {  // Ling: full rank
    HYPIC_ASSIGN_OR_RETURN(Tensor f, rd.raw(fg + "f_proj.weight", {D, H}));
    HYPIC_ASSIGN_OR_RETURN(Tensor g, rd.raw(p + "g_proj.weight", {D, H}));
    rows.push_back(f);
    rows.push_back(g);
    w.f_rows = w.g_rows = D;
  }
  HYPIC_ASSIGN_OR_RETURN(Tensor b, rd.raw(p + "b_proj.weight", {nh, H}));
  rows.push_back(b);
  HYPIC_ASSIGN_OR_RETURN(w.in_proj, rd.stack(rows, p + "q/k/v/gate/b projections"));
  HYPIC_ASSIGN_OR_RETURN(w.conv_w, load_conv(rd, p, D, K));
  // A_log: [nh] (Ling) or [1, 1, nh, 1] (Kimi).
  const std::string a_log = fg + "A_log";
  Result<Tensor> a = rd.vec(a_log, {nh});
  if (!a.is_ok()) a = rd.vec(a_log, {1, 1, nh, 1});
  HYPIC_RETURN_IF_ERROR(a.status());
  w.decay = Tensor::zeros_f32({nh});
  for (int64_t h = 0; h < nh; ++h) w.decay.f32()[h] = std::exp(a->f32()[h]);
  HYPIC_ASSIGN_OR_RETURN(w.dt_bias, rd.vec(fg + "dt_bias", {D}));
  HYPIC_ASSIGN_OR_RETURN(w.norm_w, rd.vec(p + "o_norm.weight", {hd}));
  HYPIC_ASSIGN_OR_RETURN(w.o_proj, rd.mat(p + out + ".weight", {H, D}));
  layer->token = make_kda(c, std::move(w));
  return Status::ok();
}

Status load_mla_layer(const WeightReader& rd, const ModelConfig& c, const std::string& p,
                      const char* out, DecoderLayer* layer) {
  const ModelConfig::Mla& m = c.mla;
  const int64_t H = c.hidden_size, nh = c.num_attention_heads;
  const int64_t qkw = nh * (m.qk_nope_head_dim + m.qk_rope_head_dim);
  MlaWeights w;
  std::vector<Tensor> rows;
  if (m.q_lora_rank > 0) {
    HYPIC_ASSIGN_OR_RETURN(Tensor qa, rd.raw(p + "q_a_proj.weight", {m.q_lora_rank, H}));
    rows.push_back(qa);
    HYPIC_ASSIGN_OR_RETURN(w.q_a_norm, rd.vec(p + "q_a_layernorm.weight", {m.q_lora_rank}));
    HYPIC_ASSIGN_OR_RETURN(w.q_b, rd.mat(p + "q_b_proj.weight", {qkw, m.q_lora_rank}));
  } else {
    HYPIC_ASSIGN_OR_RETURN(Tensor q, rd.raw(p + "q_proj.weight", {qkw, H}));
    rows.push_back(q);
  }
  HYPIC_ASSIGN_OR_RETURN(Tensor kva, rd.raw(p + "kv_a_proj_with_mqa.weight",
                                            {m.kv_lora_rank + m.qk_rope_head_dim, H}));
  rows.push_back(kva);
  if (m.head_gate) {
    HYPIC_ASSIGN_OR_RETURN(Tensor g, rd.raw(p + "g_proj.weight", {nh, H}));
    rows.push_back(g);
  }
  HYPIC_ASSIGN_OR_RETURN(w.in_proj, rd.stack(rows, p + "q / kv_a / gate projections"));
  HYPIC_ASSIGN_OR_RETURN(w.kv_a_norm, rd.vec(p + "kv_a_layernorm.weight", {m.kv_lora_rank}));
  HYPIC_ASSIGN_OR_RETURN(w.kv_b, rd.mat(p + "kv_b_proj.weight",
                                        {nh * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank}));
  HYPIC_ASSIGN_OR_RETURN(w.o_proj, rd.mat(p + out + ".weight", {H, nh * m.v_head_dim}));
  mla_absorb_weights(c, &w);
  layer->token = make_mla(c, std::move(w));
  return Status::ok();
}

Status load_deepseek_moe(const WeightReader& rd, const ModelConfig& c, int layer_index,
                         const std::string& p, const char* bias, DecoderLayer* layer) {
  const int64_t H = c.hidden_size, E = c.moe.experts;
  MoeWeights w;
  HYPIC_ASSIGN_OR_RETURN(w.router, rd.vec(p + "gate.weight", {E, H}));
  HYPIC_ASSIGN_OR_RETURN(w.routing, config_router(c));
  if (c.moe.router_bias) {
    HYPIC_ASSIGN_OR_RETURN(w.routing.selection_bias, rd.vec(p + "gate." + bias, {E}));
  }
  ExpertNames names;
  if (rd.has(p + "experts.0.w1.weight")) names = {"w1", "w3", "w2"};
  HYPIC_RETURN_IF_ERROR(
      load_experts(rd, E, H, c.moe.intermediate_size, p + "experts.", names, &w.experts));
  w.has_shared = c.moe.shared_intermediate_size > 0;
  if (w.has_shared)
    HYPIC_RETURN_IF_ERROR(
        load_swiglu(rd, H, c.moe.shared_intermediate_size, p + "shared_experts.", w.shared));
  const auto limit = [&](const std::vector<double>& v) {
    return v.empty() ? 0.0f : float(v.at(size_t(layer_index)));
  };
  for (MlpWeights& e : w.experts) e.limit = limit(c.moe.swiglu_limits);
  w.shared.limit = limit(c.moe.swiglu_limits_shared);
  layer->channel = make_moe(std::move(w));
  return Status::ok();
}

Status load_deepseek_channel(const WeightReader& rd, const ModelConfig& c, int layer_index,
                             const std::string& p, const char* bias, DecoderLayer* layer) {
  switch (c.layer(layer_index).channel) {
    case ChannelMixerKind::kSwiGlu: {
      MlpWeights w;
      HYPIC_RETURN_IF_ERROR(load_swiglu(rd, c.hidden_size, c.intermediate_size, p, w));
      layer->channel = make_swiglu(std::move(w));
      return Status::ok();
    }
    case ChannelMixerKind::kMoe:
      return load_deepseek_moe(rd, c, layer_index, p, bias, layer);
  }
  return internal_error("unknown channel mixer");
}

}  // namespace hypic
