// GGUF mapping of MiniMax-Text-01 / MiniMax-M1 (llama.cpp's conversion/minimax.py,
// MiniMaxText01Model; the `minimax-01` architecture): seen as the original checkpoint format
// (model_type minimax_m1, model/arch/minimax.cpp), whose keys the converter read.
//
// What the converter's file does not say, and what is assumed as llama.cpp's loader and graph
// (src/models/minimax-01.cpp) do:
//   * the layer pattern: attn_type_list is not written; `attention.recurrent_layers` is read
//     where present, else `full_attention_interval` (default 8: layer i is softmax attention iff
//     (i + 1) mod 8 = 0 — MiniMax-M1's and Text-01's pattern);
//   * the residuals: one residual_scale for the three layernorm_*_alpha (the converter asserts
//     they are equal and every beta is 1), joined to the normed input ("postnorm");
//   * the router: softmax, top-k renormalised, no shared expert (as MiniMax ships).
#include "checkpoint/gguf_hf_map.h"

namespace hypic {

using nlohmann::json;

Status map_gguf_minimax(GgufHfMap& m, json& c) {
  HYPIC_ASSIGN_OR_RETURN(int64_t n_layer, m.need_int("block_count"));
  HYPIC_ASSIGN_OR_RETURN(int64_t H, m.need_int("embedding_length"));
  HYPIC_ASSIGN_OR_RETURN(Shape embd, m.shape("token_embd.weight"));
  HYPIC_ASSIGN_OR_RETURN(int64_t heads, m.need_int("attention.head_count"));
  HYPIC_ASSIGN_OR_RETURN(int64_t kv_heads, m.need_int("attention.head_count_kv"));
  HYPIC_ASSIGN_OR_RETURN(int64_t hd, m.need_int("attention.key_length"));
  HYPIC_ASSIGN_OR_RETURN(std::optional<int64_t> vd, m.opt_int("attention.value_length"));
  HYPIC_ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> recurrent, m.opt_int_list("attention.recurrent_layers"));
  HYPIC_ASSIGN_OR_RETURN(std::optional<int64_t> interval, m.opt_int("full_attention_interval"));
  if (n_layer <= 0 || embd.size() != 2 || embd[1] != H || heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0 ||
      hd <= 0 || vd.value_or(hd) != hd || (recurrent && int64_t(recurrent->size()) != n_layer) ||
      interval.value_or(8) <= 0)
    return invalid_argument("'" + m.head().path() + "': inconsistent minimax-01 sizes (block_count " +
                            std::to_string(n_layer) + ", token_embd " + shape_str(embd) + ", head_count " +
                            std::to_string(heads) + ", head_count_kv " + std::to_string(kv_heads) +
                            ", key_length " + std::to_string(hd) + ", value_length " + std::to_string(vd.value_or(hd)) +
                            (recurrent ? ", attention.recurrent_layers " + std::to_string(recurrent->size()) + " entries" : "") +
                            ")");
  std::vector<int64_t> types;  // attn_type_list: 0 Lightning, 1 softmax attention
  for (int64_t i = 0; i < n_layer; ++i)
    types.push_back(recurrent ? ((*recurrent)[size_t(i)] ? 0 : 1) : ((i + 1) % interval.value_or(8) == 0 ? 1 : 0));

  c["model_type"] = "minimax_m1";
  c["architectures"] = {"MiniMaxM1ForCausalLM"};
  c["hidden_size"] = H;
  c["num_hidden_layers"] = n_layer;
  c["vocab_size"] = embd[0];
  c["num_attention_heads"] = heads;
  c["num_key_value_heads"] = kv_heads;
  c["head_dim"] = hd;
  c["attn_type_list"] = types;
  HYPIC_ASSIGN_OR_RETURN(c["rms_norm_eps"], m.need_float("attention.layer_norm_rms_epsilon"));
  HYPIC_ASSIGN_OR_RETURN(std::optional<double> theta, m.opt_float("rope.freq_base"));
  c["rope_theta"] = theta.value_or(1e6);
  HYPIC_ASSIGN_OR_RETURN(std::optional<int64_t> rot, m.opt_int("rope.dimension_count"));
  c["rotary_dim"] = rot.value_or(hd);
  HYPIC_ASSIGN_OR_RETURN(std::optional<int64_t> ctx, m.opt_int("context_length"));
  if (ctx) c["max_position_embeddings"] = *ctx;
  HYPIC_ASSIGN_OR_RETURN(double alpha, m.need_float("residual_scale"));
  for (const char* kind : {"full_attention", "linear_attention", "mlp"}) {
    c[std::string("layernorm_") + kind + "_alpha"] = alpha;
    c[std::string("layernorm_") + kind + "_beta"] = 1.0;
  }
  c["postnorm"] = true;
  HYPIC_ASSIGN_OR_RETURN(int64_t E, m.need_int("expert_count"));
  HYPIC_ASSIGN_OR_RETURN(int64_t I, m.need_int("feed_forward_length"));  // the experts' width
  c["num_local_experts"] = E;
  HYPIC_ASSIGN_OR_RETURN(c["num_experts_per_tok"], m.need_int("expert_used_count"));
  c["intermediate_size"] = I;
  c["shared_intermediate_size"] = 0;
  c["hidden_act"] = "silu";
  c["tie_word_embeddings"] = !m.has("output.weight");
  HYPIC_RETURN_IF_ERROR(map_special_token_ids(m, c));

  HYPIC_RETURN_IF_ERROR(m.alias("model.embed_tokens.weight", "token_embd.weight"));
  HYPIC_RETURN_IF_ERROR(m.alias("model.norm.weight", "output_norm.weight"));
  if (m.has("output.weight")) HYPIC_RETURN_IF_ERROR(m.alias("lm_head.weight", "output.weight"));
  const int64_t D = heads * hd, kvd = kv_heads * hd;
  for (int64_t i = 0; i < n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".", p = "model.layers." + std::to_string(i) + ".";
    const std::string a = p + "self_attn.";
    HYPIC_RETURN_IF_ERROR(m.alias(p + "input_layernorm.weight", b + "attn_norm.weight", {H}));
    HYPIC_RETURN_IF_ERROR(m.alias(p + "post_attention_layernorm.weight", b + "ffn_norm.weight", {H}));
    if (types[size_t(i)] == 0) {
      // qkv_proj kept as the checkpoint has it: rows per head [q_h | k_h | v_h].
      HYPIC_RETURN_IF_ERROR(m.alias(a + "qkv_proj.weight", b + "attn_qkv.weight", {3 * D, H}));
      HYPIC_RETURN_IF_ERROR(m.alias(a + "output_gate.weight", b + "attn_gate.weight", {D, H}));
      HYPIC_RETURN_IF_ERROR(m.alias(a + "norm.weight", b + "attn_norm_2.weight", {D}));
      HYPIC_RETURN_IF_ERROR(m.alias(a + "out_proj.weight", b + "attn_output.weight", {H, D}));
    } else {
      HYPIC_RETURN_IF_ERROR(m.alias(a + "q_proj.weight", b + "attn_q.weight", {D, H}));
      HYPIC_RETURN_IF_ERROR(m.alias(a + "k_proj.weight", b + "attn_k.weight", {kvd, H}));
      HYPIC_RETURN_IF_ERROR(m.alias(a + "v_proj.weight", b + "attn_v.weight", {kvd, H}));
      HYPIC_RETURN_IF_ERROR(m.alias(a + "o_proj.weight", b + "attn_output.weight", {H, D}));
    }
    // Experts stacked by modify_tensors (w1 gate, w3 up, w2 down).
    const std::string moe = p + "block_sparse_moe.";
    HYPIC_RETURN_IF_ERROR(m.alias(moe + "gate.weight", b + "ffn_gate_inp.weight", {E, H}));
    HYPIC_RETURN_IF_ERROR(alias_stacked_experts(m, E, H, I, b, moe, "w1.weight", "w3.weight", "w2.weight"));
  }
  return Status::ok();
}

}  // namespace hypic
