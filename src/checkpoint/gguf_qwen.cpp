// GGUF mappings of the Qwen hybrids (llama.cpp's conversion/qwen.py): qwen35 (Qwen3.5 dense),
// qwen35moe (Qwen3.5-MoE), both from Qwen3_5TextModel / Qwen3_5MoeTextModel over
// _LinearAttentionVReorderBase and Qwen3NextModel, and qwen3next (Qwen3NextModel). Seen as the
// text-only Hugging Face checkpoints (model_type qwen3_5_text, qwen3_5_moe_text, qwen3_next).
#include <cmath>

#include "checkpoint/gguf_hf_map.h"

namespace hypic {

using nlohmann::json;

namespace {

// Qwen3NextModel.modify_tensors stores every RMSNorm weight ending in `norm.weight` except the
// Gated DeltaNet's output norm as 1 + w (Hugging Face keeps the zero-centred w).
Status norm_minus_one(GgufHfMap& m, const std::string& hf, const std::string& gguf) {
  HYPIC_ASSIGN_OR_RETURN(Shape s, m.shape(gguf));
  return m.derive(hf, {gguf}, s, [](const std::vector<Tensor>& in, Tensor& out) {
    for (int64_t i = 0; i < out.numel(); ++i) out.f32()[i] = in[0].f32()[i] - 1.0f;
  });
}

struct GdnSizes {
  int64_t H, nk, nv, dk, dv, K;
  int64_t kd() const { return nk * dk; }
  int64_t vd() const { return nv * dv; }
  int64_t conv_dim() const { return 2 * kd() + vd(); }
};

// Qwen3.5 (_LinearAttentionVReorderBase.modify_tensors, when nk != nv): value heads permuted
// from grouped to tiled order in in_proj_qkv's V rows, in_proj_z, in_proj_b / a, A_log,
// dt_bias, conv1d's V channels and out_proj's columns. The matrices stay as stored (the config
// says so: hypic_gguf_tiled_value_heads, and the Gated DeltaNet mixer reorders its activations
// around them, model/mixers/gated_deltanet.h); the vectors and the conv weights are untiled
// here. With nk == nv the orders coincide.
Status map_gdn_qwen35(GgufHfMap& m, const GdnSizes& z, const std::string& b, const std::string& p) {
  const bool tiled = z.nk != z.nv;
  const int64_t nk = z.nk, nv = z.nv, dv = z.dv, H = z.H, K = z.K, kd2 = 2 * z.kd(), vd = z.vd();
  HYPIC_RETURN_IF_ERROR(m.alias(p + "in_proj_qkv.weight", b + "attn_qkv.weight", {z.conv_dim(), H}));
  HYPIC_RETURN_IF_ERROR(m.alias(p + "in_proj_z.weight", b + "attn_gate.weight", {vd, H}));
  HYPIC_RETURN_IF_ERROR(m.alias(p + "in_proj_b.weight", b + "ssm_beta.weight", {nv, H}));
  HYPIC_RETURN_IF_ERROR(m.alias(p + "in_proj_a.weight", b + "ssm_alpha.weight", {nv, H}));
  HYPIC_RETURN_IF_ERROR(m.alias(p + "out_proj.weight", b + "ssm_out.weight", {H, vd}));
  auto rows = [&](const std::string& hf, const std::string& gguf, Shape s, int64_t row0, int64_t d,
                  int64_t width) -> Status {
    if (!tiled) return m.alias(hf, gguf, s);
    return m.derive(hf, {gguf}, s, [=](const std::vector<Tensor>& in, Tensor& out) {
      std::copy_n(in[0].f32(), out.numel(), out.f32());  // rows outside the V heads
      untile_head_rows(in[0].f32(), out.f32(), row0, nv, nk, d, width);
    });
  };
  // Qwen3NextModel squeezes conv1d [conv_dim, 1, K] to [conv_dim, K].
  HYPIC_RETURN_IF_ERROR(rows(p + "conv1d.weight", b + "ssm_conv1d.weight", {z.conv_dim(), 1, K}, kd2, dv, K));
  HYPIC_RETURN_IF_ERROR(rows(p + "dt_bias", b + "ssm_dt.bias", {nv}, 0, 1, 1));
  // Qwen3NextModel stores A_log as ssm_a = −exp(A_log).
  HYPIC_RETURN_IF_ERROR(m.derive(p + "A_log", {b + "ssm_a"}, {nv}, [=](const std::vector<Tensor>& in, Tensor& out) {
    std::vector<float> a(static_cast<size_t>(nv));
    for (int64_t i = 0; i < nv; ++i) a[size_t(i)] = std::log(-in[0].f32()[i]);
    if (tiled) untile_head_rows(a.data(), out.f32(), 0, nv, nk, 1, 1);
    else std::copy(a.begin(), a.end(), out.f32());
  }));
  return m.alias(p + "norm.weight", b + "ssm_norm.weight", {dv});
}

// Qwen3-Next: Qwen3NextModel.modify_tensors splits in_proj_qkvz (per key head g: q_g, k_g,
// v_g, z_g) into attn_qkv (all q, all k, all v) and attn_gate (all z), value heads kept in
// grouped order — Qwen3.5's contiguous in_proj_qkv / in_proj_z, read as stored (the Qwen
// loader takes either form). in_proj_ba is stored as ssm_ba unchanged (per key head g: its r
// b rows, then its r a rows); split here into in_proj_b / in_proj_a. Files converted before
// llama.cpp #18683 hold the unsplit ssm_in: in_proj_qkvz and in_proj_ba as they are.
Status map_gdn_qwen3next(GgufHfMap& m, const GdnSizes& z, const std::string& b, const std::string& p) {
  const int64_t nk = z.nk, nv = z.nv, r = nv / nk, H = z.H;
  if (m.has(b + "ssm_in.weight")) {
    HYPIC_RETURN_IF_ERROR(m.alias(p + "in_proj_qkvz.weight", b + "ssm_in.weight", {nk * (2 * z.dk + 2 * z.vd() / nk), H}));
    HYPIC_RETURN_IF_ERROR(m.alias(p + "in_proj_ba.weight", b + "ssm_ba.weight", {2 * nv, H}));
  } else {
    HYPIC_RETURN_IF_ERROR(m.alias(p + "in_proj_qkv.weight", b + "attn_qkv.weight", {z.conv_dim(), H}));
    HYPIC_RETURN_IF_ERROR(m.alias(p + "in_proj_z.weight", b + "attn_gate.weight", {z.vd(), H}));
    for (int which = 0; which < 2; ++which)  // 0: b, 1: a
      HYPIC_RETURN_IF_ERROR(m.derive(p + (which ? "in_proj_a.weight" : "in_proj_b.weight"), {b + "ssm_ba.weight"},
                                     {nv, H}, [=](const std::vector<Tensor>& in, Tensor& out) {
        for (int64_t g = 0; g < nk; ++g)
          std::copy_n(in[0].f32() + (g * 2 * r + which * r) * H, r * H, out.f32() + g * r * H);
      }));
  }
  HYPIC_RETURN_IF_ERROR(m.alias(p + "conv1d.weight", b + "ssm_conv1d.weight", {z.conv_dim(), 1, z.K}));
  HYPIC_RETURN_IF_ERROR(m.alias(p + "dt_bias", b + "ssm_dt.bias", {z.nv}));
  HYPIC_RETURN_IF_ERROR(m.derive(p + "A_log", {b + "ssm_a"}, {z.nv}, [](const std::vector<Tensor>& in, Tensor& out) {
    for (int64_t i = 0; i < out.numel(); ++i) out.f32()[i] = std::log(-in[0].f32()[i]);
  }));
  HYPIC_RETURN_IF_ERROR(m.alias(p + "norm.weight", b + "ssm_norm.weight", {z.dv}));
  return m.alias(p + "out_proj.weight", b + "ssm_out.weight", {H, z.vd()});
}

Status map_attention(GgufHfMap& m, const std::string& b, const std::string& p) {
  HYPIC_RETURN_IF_ERROR(m.alias(p + "q_proj.weight", b + "attn_q.weight"));
  HYPIC_RETURN_IF_ERROR(m.alias(p + "k_proj.weight", b + "attn_k.weight"));
  HYPIC_RETURN_IF_ERROR(m.alias(p + "v_proj.weight", b + "attn_v.weight"));
  HYPIC_RETURN_IF_ERROR(m.alias(p + "o_proj.weight", b + "attn_output.weight"));
  HYPIC_RETURN_IF_ERROR(norm_minus_one(m, p + "q_norm.weight", b + "attn_q_norm.weight"));
  return norm_minus_one(m, p + "k_norm.weight", b + "attn_k_norm.weight");
}

// Qwen2MoeModel.modify_tensors stacks the experts into ffn_{gate,up,down}_exps [E, out, in]
// (or, with --fuse-gate-up-exps, gate and up into ffn_gate_up_exps [E, 2I, H]); each expert is
// a row range of the stack.
Status map_moe(GgufHfMap& m, int64_t E, int64_t H, int64_t I, bool shared, const std::string& b,
               const std::string& p) {
  HYPIC_RETURN_IF_ERROR(m.alias(p + "gate.weight", b + "ffn_gate_inp.weight", {E, H}));
  if (m.has(b + "ffn_gate_up_exps.weight")) {
    HYPIC_RETURN_IF_ERROR(m.alias(p + "experts.gate_up_proj", b + "ffn_gate_up_exps.weight", {E, 2 * I, H}));
    HYPIC_RETURN_IF_ERROR(m.alias(p + "experts.down_proj", b + "ffn_down_exps.weight", {E, H, I}));
  } else {
    HYPIC_RETURN_IF_ERROR(alias_stacked_experts(m, E, H, I, b, p, "gate_proj.weight", "up_proj.weight", "down_proj.weight"));
  }
  if (!shared) return Status::ok();
  for (const char* w : {"gate", "up", "down"})
    HYPIC_RETURN_IF_ERROR(m.alias(p + "shared_expert." + w + "_proj.weight", b + "ffn_" + w + "_shexp.weight"));
  return m.alias(p + "shared_expert_gate.weight", b + "ffn_gate_inp_shexp.weight", {1, H});
}

}  // namespace

Status map_gguf_qwen(GgufHfMap& m, json& c) {
  const std::string& arch = m.arch();
  const bool next = arch == "qwen3next", moe = arch != "qwen35";
  HYPIC_ASSIGN_OR_RETURN(int64_t blocks, m.need_int("block_count"));
  HYPIC_ASSIGN_OR_RETURN(std::optional<int64_t> mtp, m.opt_int("nextn_predict_layers"));
  const int64_t n_layer = blocks - mtp.value_or(0);  // the MTP blocks follow; unused here
  HYPIC_ASSIGN_OR_RETURN(Shape embd, m.shape("token_embd.weight"));
  HYPIC_ASSIGN_OR_RETURN(int64_t H, m.need_int("embedding_length"));
  HYPIC_ASSIGN_OR_RETURN(int64_t head_dim, m.need_int("attention.key_length"));
  HYPIC_ASSIGN_OR_RETURN(int64_t rope_dims, m.need_int("rope.dimension_count"));
  GdnSizes z{H, 0, 0, 0, 0, 0};
  HYPIC_ASSIGN_OR_RETURN(z.nk, m.need_int("ssm.group_count"));
  HYPIC_ASSIGN_OR_RETURN(z.nv, m.need_int("ssm.time_step_rank"));
  HYPIC_ASSIGN_OR_RETURN(z.dk, m.need_int("ssm.state_size"));
  HYPIC_ASSIGN_OR_RETURN(int64_t inner, m.need_int("ssm.inner_size"));
  HYPIC_ASSIGN_OR_RETURN(z.K, m.need_int("ssm.conv_kernel"));
  if (n_layer <= 0 || embd.size() != 2 || embd[1] != H || head_dim <= 0 || z.nk <= 0 || z.nv <= 0 ||
      z.nv % z.nk != 0 || inner % z.nv != 0)
    return invalid_argument("'" + m.head().path() + "': inconsistent " + arch + " sizes (block_count " +
                            std::to_string(blocks) + ", token_embd " + shape_str(embd) + ", ssm.group_count " +
                            std::to_string(z.nk) + ", ssm.time_step_rank " + std::to_string(z.nv) + ")");
  z.dv = inner / z.nv;

  c["model_type"] = next ? "qwen3_next" : moe ? "qwen3_5_moe_text" : "qwen3_5_text";
  c["architectures"] = {next ? "Qwen3NextForCausalLM" : moe ? "Qwen3_5MoeForCausalLM" : "Qwen3_5ForCausalLM"};
  c["hidden_size"] = H;
  c["num_hidden_layers"] = n_layer;
  c["vocab_size"] = embd[0];
  HYPIC_ASSIGN_OR_RETURN(c["num_attention_heads"], m.need_int("attention.head_count"));
  HYPIC_ASSIGN_OR_RETURN(c["num_key_value_heads"], m.need_int("attention.head_count_kv"));
  HYPIC_ASSIGN_OR_RETURN(c["rms_norm_eps"], m.need_float("attention.layer_norm_rms_epsilon"));
  HYPIC_ASSIGN_OR_RETURN(std::optional<int64_t> ctx, m.opt_int("context_length"));
  if (ctx) c["max_position_embeddings"] = *ctx;
  c["head_dim"] = head_dim;
  c["linear_conv_kernel_dim"] = z.K;
  c["linear_key_head_dim"] = z.dk;
  c["linear_value_head_dim"] = z.dv;
  c["linear_num_key_heads"] = z.nk;
  c["linear_num_value_heads"] = z.nv;
  if (!next && z.nk != z.nv) c["hypic_gguf_tiled_value_heads"] = true;  // see map_gdn_qwen35
  HYPIC_ASSIGN_OR_RETURN(double theta, m.need_float("rope.freq_base"));
  json rope = {{"rope_type", "default"}, {"rope_theta", theta},
               {"partial_rotary_factor", double(rope_dims) / double(head_dim)}};
  HYPIC_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> sections, m.opt_int_list("rope.dimension_sections"));
  if (!next && sections && sections->size() >= 3) {  // interleaved M-RoPE (the graph's IMROPE)
    rope["mrope_section"] = std::vector<int64_t>(sections->begin(), sections->begin() + 3);
    rope["mrope_interleaved"] = true;
  }
  c["rope_parameters"] = rope;

  // Layer kinds: attention.recurrent_layers where written, else full_attention_interval (as
  // llama.cpp's loader).
  HYPIC_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> recurrent, m.opt_int_list("attention.recurrent_layers"));
  HYPIC_ASSIGN_OR_RETURN(std::optional<int64_t> interval, m.opt_int("full_attention_interval"));
  if (recurrent && int64_t(recurrent->size()) < n_layer)
    return invalid_argument("'" + m.head().path() + "': " + arch + ".attention.recurrent_layers lists " +
                            std::to_string(recurrent->size()) + " layers, block_count implies " + std::to_string(n_layer));
  if (!recurrent && interval.value_or(4) <= 0)
    return invalid_argument("'" + m.head().path() + "': " + arch + ".full_attention_interval must be positive");
  std::vector<std::string> kinds;
  for (int64_t i = 0; i < n_layer; ++i) {
    const bool linear = recurrent ? (*recurrent)[size_t(i)] != 0 : (i + 1) % interval.value_or(4) != 0;
    kinds.push_back(linear ? "linear_attention" : "full_attention");
  }
  c["layer_types"] = kinds;

  int64_t E = 0, I = 0;
  bool shared = false;
  if (moe) {
    HYPIC_ASSIGN_OR_RETURN(E, m.need_int("expert_count"));
    HYPIC_ASSIGN_OR_RETURN(c["num_experts_per_tok"], m.need_int("expert_used_count"));
    HYPIC_ASSIGN_OR_RETURN(I, m.need_int("expert_feed_forward_length"));
    HYPIC_ASSIGN_OR_RETURN(std::optional<int64_t> sh, m.opt_int("expert_shared_feed_forward_length"));
    shared = sh.value_or(0) > 0;
    c["num_experts"] = E;
    c["moe_intermediate_size"] = I;
    c["shared_expert_intermediate_size"] = sh.value_or(0);
    c["norm_topk_prob"] = true;  // llama.cpp's graph renormalises the top-k weights
  }
  if (!moe || next) {
    HYPIC_ASSIGN_OR_RETURN(std::optional<int64_t> ff, m.opt_int("feed_forward_length"));
    if (!moe && !ff) return m.need_int("feed_forward_length").status();
    if (ff) c["intermediate_size"] = *ff;
  }
  if (next) {
    c["decoder_sparse_step"] = 1;
    c["mlp_only_layers"] = json::array();
  }
  c["tie_word_embeddings"] = !m.has("output.weight");
  HYPIC_RETURN_IF_ERROR(map_special_token_ids(m, c));

  HYPIC_RETURN_IF_ERROR(m.alias("model.embed_tokens.weight", "token_embd.weight"));
  HYPIC_RETURN_IF_ERROR(norm_minus_one(m, "model.norm.weight", "output_norm.weight"));
  if (m.has("output.weight")) HYPIC_RETURN_IF_ERROR(m.alias("lm_head.weight", "output.weight"));
  for (int64_t i = 0; i < n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".", p = "model.layers." + std::to_string(i) + ".";
    HYPIC_RETURN_IF_ERROR(norm_minus_one(m, p + "input_layernorm.weight", b + "attn_norm.weight"));
    HYPIC_RETURN_IF_ERROR(norm_minus_one(m, p + "post_attention_layernorm.weight", b + "post_attention_norm.weight"));
    if (kinds[size_t(i)] == "linear_attention") {
      HYPIC_RETURN_IF_ERROR(next ? map_gdn_qwen3next(m, z, b, p + "linear_attn.")
                                 : map_gdn_qwen35(m, z, b, p + "linear_attn."));
    } else {
      HYPIC_RETURN_IF_ERROR(map_attention(m, b, p + "self_attn."));
    }
    if (moe) {
      HYPIC_RETURN_IF_ERROR(map_moe(m, E, H, I, shared, b, p + "mlp."));
    } else {
      for (const char* w : {"gate", "up", "down"})
        HYPIC_RETURN_IF_ERROR(m.alias(p + "mlp." + w + "_proj.weight", b + "ffn_" + w + ".weight"));
    }
  }
  return Status::ok();
}

}  // namespace hypic
