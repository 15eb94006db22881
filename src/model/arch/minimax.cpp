// MiniMax-Text-01 / MiniMax-M1: transformers' MiniMaxForCausalLM (model_type minimax, 5.23
// modular_minimax.py) and the original checkpoints' own format (model_type minimax_m1 /
// minimax_text_01, the configuration their remote code and vLLM read).
//   layers    layer_types (minimax) or attn_type_list (original: 0 Lightning, 1 softmax)
//   Lightning SiLU(qkv_proj x) split per head as [q | k | v], no q scaling, no RoPE, decay
//             (2^(−8/H))^(h+1)·(1 − l/(N−1+1e−5) + 1e−5) (transformers) or the ALiBi slopes
//             ·(1 − l/(N−1) + 1e−5) (the original code, vLLM; they differ when H is not a
//             power of two), RMSNorm over all heads (eps 1e−6, MixtralRMSNorm's default and
//             the original's; vLLM uses 1e−5), × σ(output_gate x), out_proj
//   attention q/k/v/o_proj, NeoX RoPE (transformers rotates the whole head; a config with
//             rotary_dim — the original format, MiniMax-M1 ships 64 of 128 — rotates that many
//             dims, as the original code and vLLM do), no q/k norm, no gate
//   residual  "postnorm": h ← α·norm(h) + β·mixer(norm(h)), α/β per mixer kind and for the MLP
//   MLP       Mixtral MoE on every layer: softmax router, top-k, renormalised
// Tensors: model.embed_tokens, model.layers.N.self_attn.{qkv_proj, output_gate, norm, out_proj
// | q_proj, k_proj, v_proj, o_proj}, model.layers.N.block_sparse_moe.{gate, experts.E.w1 (gate),
// w3 (up), w2 (down)} (or transformers' in-memory mlp.{gate, experts.gate_up_proj,
// experts.down_proj}), model.norm, lm_head.
#include <cstring>

#include "model/arch.h"
#include "model/arch/loaders.h"
#include "model/config_fields.h"
#include "model/mixers/gated_attention.h"
#include "model/mixers/lightning.h"
#include "model/weight_reader.h"

namespace hypic {
namespace {

using json = nlohmann::json;

class MiniMax final : public Architecture {
 public:
  const char* name() const override { return "MiniMax"; }
  std::vector<std::string> model_types() const override {
    return {"minimax", "minimax_m1", "minimax_text_01"};
  }
  bool has_class(const std::string& cls) const override {
    return cls == "MiniMaxForCausalLM" || cls == "MiniMaxModel" ||
           cls == "MiniMaxM1ForCausalLM" || cls == "MiniMaxText01ForCausalLM";
  }
  // MiniMax-M1's template for M1 checkpoints; Text-01's for Text-01 (transformers' minimax
  // classes are the converted Text-01).
  const char* chat_template(const ModelConfig& c) const override {
    return c.model_type == "minimax_m1" ? "minimax" : "minimax-text-01";
  }

  Status parse_config(const json& root, const std::string& source, ModelConfig* out) const override {
    ModelConfig& c = *out;
    const bool original = c.model_type != "minimax";
    c.text_model_type = c.model_type;
    Fields f(root, "", source, &c.defaulted_fields);
    // transformers' MiniMaxConfig defaults.
    read_common(f, {32000, 4096, 32, 32, 0, 1e-5, 4096 * 32}, &c);
    c.head_dim = f.i64("head_dim", c.hidden_size / std::max<int64_t>(c.num_attention_heads, 1));
    if (f.has("sliding_window"))
      return unsupported(source + ": field 'sliding_window' is set; hypic's MiniMax attention is "
                         "global (set it to null)");
    // Experts: intermediate_size is the expert width; every layer is MoE.
    c.moe.experts = f.i64("num_local_experts", 8);
    c.moe.experts_per_tok = f.i64("num_experts_per_tok", 2);
    c.moe.intermediate_size = f.i64("intermediate_size", 14336);
    c.moe.norm_topk_prob = true;
    if (f.i64("shared_intermediate_size", 0) != 0)
      return unsupported(source + ": field 'shared_intermediate_size' is non-zero; hypic "
                         "implements MiniMax without a shared expert (as MiniMax-M1 and "
                         "Text-01 ship)");
    HYPIC_RETURN_IF_ERROR(parse_rope(f, source, &c));
    // Residual factors: transformers' names, or the original's layernorm_* (with postnorm).
    const char* names[6][2] = {
        {"full_attn_alpha_factor", "layernorm_full_attention_alpha"},
        {"full_attn_beta_factor", "layernorm_full_attention_beta"},
        {"linear_attn_alpha_factor", "layernorm_linear_attention_alpha"},
        {"linear_attn_beta_factor", "layernorm_linear_attention_beta"},
        {"mlp_alpha_factor", "layernorm_mlp_alpha"},
        {"mlp_beta_factor", "layernorm_mlp_beta"}};
    double* factors[6] = {&c.residual.full_attn_alpha, &c.residual.full_attn_beta, &c.residual.linear_attn_alpha,
                          &c.residual.linear_attn_beta, &c.residual.mlp_alpha, &c.residual.mlp_beta};
    for (int i = 0; i < 6; ++i) *factors[i] = f.f64(names[i][original ? 1 : 0], 1.0);
    // transformers' MiniMaxDecoderLayer always joins the normed input; the original code
    // does when its config says postnorm.
    c.residual.from_norm = original ? f.boolean("postnorm", false) : true;

    c.zero_centred_norms = false;
    c.attn_qk_norm = false;
    ModelConfig::Lightning& l = c.lightning;
    l.heads = c.num_attention_heads;
    l.head_dim = c.head_dim;
    l.silu_qkv = true;  // act_fn = hidden_act (silu, checked)
    l.norm_eps = 1e-6;
    // transformers' slope rule; the original code's (and vLLM's) ALiBi rule. The two agree
    // for a power-of-two head count up to the 1e−5 in the layer factor's denominator.
    l.slopes = original ? ModelConfig::Lightning::Slopes::kAlibi
                        : ModelConfig::Lightning::Slopes::kMiniMax;

    c.tie_word_embeddings = f.boolean("tie_word_embeddings", false);
    c.eos_token_ids = f.i64_list("eos_token_id", /*allow_scalar=*/true);
    if (!f.has("eos_token_id") && !original) c.eos_token_ids = {2};
    c.bos_token_id = f.opt_i64("bos_token_id");
    c.pad_token_id = f.opt_i64("pad_token_id");
    c.dtype = f.has("dtype") ? f.str("dtype", "") : f.str("torch_dtype", "");

    std::vector<const TokenMixerType*> kinds;
    HYPIC_RETURN_IF_ERROR(parse_layers(f, source, original, c.num_hidden_layers, &kinds));
    HYPIC_RETURN_IF_ERROR(f.status());
    c.weight_prefix = "model.";
    c.layers.clear();
    for (const TokenMixerType* k : kinds) c.layers.push_back({k, ChannelMixerKind::kMoe});
    return Status::ok();
  }

  Status validate(const ModelConfig& c) const override { return config_router(c).status(); }

  Status load_layer(const WeightReader& rd, const ModelConfig& c, int layer,
                    const std::string& p, DecoderLayer* out) const override {
    HYPIC_RETURN_IF_ERROR(load_layer_norms(rd, c, p, out));
    const bool linear = c.layer(layer).token == &lightning_type();
    out->token_residual = {c.residual.from_norm,
                           float(linear ? c.residual.linear_attn_alpha : c.residual.full_attn_alpha),
                           float(linear ? c.residual.linear_attn_beta : c.residual.full_attn_beta)};
    out->channel_residual = {c.residual.from_norm, float(c.residual.mlp_alpha), float(c.residual.mlp_beta)};
    HYPIC_RETURN_IF_ERROR(load_token_mixer(rd, c, layer, p + "self_attn.", out));
    const std::string moe = rd.has(p + "mlp.gate.weight") ? p + "mlp." : p + "block_sparse_moe.";
    return load_moe(rd, c, moe, out);
  }

 private:
  // RoPE of the softmax layers: rope_parameters (transformers 5) or rope_theta; rotary_dim
  // (original format) or rope_parameters.partial_rotary_factor rotate part of the head.
  static Status parse_rope(Fields& f, const std::string& source, ModelConfig* c) {
    Fields r = f.object("rope_parameters");
    c->rope_theta = r.has("rope_theta") ? r.f64("rope_theta", 0) : f.f64("rope_theta", 1e6);
    c->rope_type = r.str("rope_type", "default");
    if (f.has("rope_scaling"))
      return unsupported(source + ": field 'rope_scaling' is set; hypic implements plain RoPE");
    int64_t rot = c->head_dim;
    if (f.has("rotary_dim")) rot = f.i64("rotary_dim", c->head_dim);
    else if (r.has("partial_rotary_factor"))
      rot = int64_t(double(c->head_dim) * r.f64("partial_rotary_factor", 1.0));
    c->partial_rotary_factor = c->head_dim > 0 ? double(rot) / double(c->head_dim) : 0;
    return r.status();
  }

  static Status parse_layers(Fields& f, const std::string& source, bool original, int64_t n,
                             std::vector<const TokenMixerType*>* kinds) {
    const char* key = original ? "attn_type_list" : "layer_types";
    if (original && f.has(key)) {
      for (int64_t t : f.i64_list(key)) {
        if (t != 0 && t != 1)
          return invalid_argument(source + ": attn_type_list holds " + std::to_string(t) +
                                  "; expected 0 (linear) or 1 (softmax attention)");
        kinds->push_back(t == 1 ? &attention_type() : &lightning_type());
      }
    } else if (!original && f.has(key)) {
      const std::vector<std::string> types = f.str_list(key);
      for (size_t i = 0; i < types.size(); ++i) {
        if (types[i] != "linear_attention" && types[i] != "full_attention")
          return unsupported(source + ": layer_types[" + std::to_string(i) + "] is '" + types[i] +
                             "'; MiniMax layers are 'linear_attention' or 'full_attention'");
        kinds->push_back(types[i] == "full_attention" ? &attention_type() : &lightning_type());
      }
    } else {
      if (original)
        return invalid_argument(source + ": missing required field 'attn_type_list' (0 = "
                                "linear, 1 = softmax attention, one per layer)");
      for (int64_t i = 0; i < std::max<int64_t>(n, 0); ++i)  // transformers' default
        kinds->push_back((i + 1) % 2 ? &attention_type() : &lightning_type());
    }
    if (int64_t(kinds->size()) != n && f.status().is_ok())
      return invalid_argument(source + ": " + key + " lists " + std::to_string(kinds->size()) +
                              " layers but num_hidden_layers is " + std::to_string(n));
    return Status::ok();
  }

  static Status load_token_mixer(const WeightReader& rd, const ModelConfig& c, int layer,
                                 const std::string& p, DecoderLayer* out) {
    const int64_t H = c.hidden_size, hd = c.head_dim, nh = c.num_attention_heads;
    const int64_t D = nh * hd;
    if (c.layer(layer).token == &lightning_type()) {
      LightningWeights w;
      // qkv_proj rows per head [q | k | v] → [q (all heads) | k | v].
      HYPIC_ASSIGN_OR_RETURN(Tensor qkv, rd.raw(p + "qkv_proj.weight", {3 * D, H}));
      std::vector<Tensor> parts;
      for (int j = 0; j < 3; ++j)
        for (int64_t h = 0; h < nh; ++h)
          parts.push_back(qkv.rows((3 * h + j) * hd, (3 * h + j + 1) * hd));
      HYPIC_ASSIGN_OR_RETURN(w.qkv, rd.stack(parts, p + "qkv_proj.weight"));
      HYPIC_ASSIGN_OR_RETURN(w.gate, rd.mat(p + "output_gate.weight", {D, H}));
      HYPIC_ASSIGN_OR_RETURN(w.norm, rd.vec(p + "norm.weight", {D}));
      HYPIC_ASSIGN_OR_RETURN(w.out, rd.mat(p + "out_proj.weight", {H, D}));
      out->token = make_lightning(c, layer, std::move(w));
      return Status::ok();
    }
    const int64_t kvd = c.num_key_value_heads * hd;
    AttnWeights w;
    HYPIC_ASSIGN_OR_RETURN(Tensor q, rd.raw(p + "q_proj.weight", {D, H}));
    HYPIC_ASSIGN_OR_RETURN(Tensor k, rd.raw(p + "k_proj.weight", {kvd, H}));
    HYPIC_ASSIGN_OR_RETURN(Tensor v, rd.raw(p + "v_proj.weight", {kvd, H}));
    HYPIC_ASSIGN_OR_RETURN(w.qkv, rd.stack({q, k, v}, p + "q/k/v_proj.weight"));
    HYPIC_ASSIGN_OR_RETURN(w.o_proj, rd.mat(p + "o_proj.weight", {H, D}));
    out->token = make_attention(c, attention_type(), std::move(w));
    return Status::ok();
  }

  static Status load_moe(const WeightReader& rd, const ModelConfig& c, const std::string& p,
                         DecoderLayer* out) {
    const int64_t H = c.hidden_size, E = c.moe.experts;
    MoeWeights w;
    HYPIC_ASSIGN_OR_RETURN(w.router, rd.vec(p + "gate.weight", {E, H}));
    HYPIC_ASSIGN_OR_RETURN(w.routing, config_router(c));
    HYPIC_RETURN_IF_ERROR(load_experts(rd, E, H, c.moe.intermediate_size, p + "experts.",
                                       {"w1", "w3", "w2"}, &w.experts));
    out->channel = make_moe(std::move(w));
    return Status::ok();
  }
};

}  // namespace

const Architecture& minimax_architecture() {
  static const MiniMax a;
  return a;
}

}  // namespace hypic
