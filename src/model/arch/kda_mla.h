// What Kimi-Linear and Ling-3.0 share (model-internal; model/arch/): KDA layers, MLA layers
// and the DeepSeek-V3 MoE, read from their checkpoints' tensors. Both names of each tensor
// are accepted: the released checkpoints' (q_conv1d / k_conv1d / v_conv1d, per-expert experts)
// and transformers' in-memory form (one conv1d, forget_gate.*, packed experts).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "model/config.h"
#include "model/weights.h"

namespace hypic {

class Fields;
class WeightReader;

// The DeepSeek-V3 MoE keys, under the released names (num_experts, num_experts_per_token,
// num_shared_experts, moe_renormalize, num_expert_group) or transformers' (num_local_experts,
// num_experts_per_tok, n_shared_experts, norm_topk_prob, n_group), with topk_group and
// routed_scaling_factor: sigmoid scores, a selection bias, ungated shared experts.
struct DeepseekMoeDefaults {
  int64_t experts, top_k, shared, groups, topk_groups;
  double scaling;
};
void parse_deepseek_moe(Fields& f, const DeepseekMoeDefaults& d, ModelConfig* c);
// Per layer dense or MoE: mlp_layer_types ("dense" / "sparse"), else the first
// first_k_dense_replace layers dense (default `dense`).
Status deepseek_mlp_kinds(Fields& f, const std::string& source, int64_t n, int64_t dense,
                          std::vector<ChannelMixerKind>* out);
// layer_types: "linear_attention" → KDA, "full_attention" → MLA.
Status kda_mla_layer_types(Fields& f, const std::string& source, int64_t n,
                           std::vector<const TokenMixerType*>* kinds);

// A config asking for RoPE inside the KDA layers is refused, not ignored: a per-channel decay
// does not commute with the rotation, so a cached KDA state has no exact re-rotation (SPEC §2),
// and neither released family rotates there. The keys: `linear_rope` (Bailing's switch for
// rotating its linear layers, as in Ring-linear) or `use_rope` / `rope` in `la` (Kimi's
// linear_attn_config; null where there is none) set true.
Status refuse_rotated_kda(Fields& f, Fields* la, const std::string& source);

// A KDA layer under `p` ("model.layers.3.self_attn."): q/k/v_proj, the short convs, the
// forget gate (Kimi: f_a_proj / f_b_proj; Ling: f_proj), dt_bias, A_log, b_proj, the output
// gate (Kimi: g_a_proj / g_b_proj; Ling: g_proj), o_norm and the output projection `out`.
Status load_kda_layer(const WeightReader& rd, const ModelConfig& c, const std::string& p,
                      const char* out, DecoderLayer* layer);

// An MLA layer under `p`: q_proj or q_a_proj / q_a_layernorm / q_b_proj, kv_a_proj_with_mqa,
// kv_a_layernorm, kv_b_proj, g_proj (the head gate, when the config has one), `out`.
Status load_mla_layer(const WeightReader& rd, const ModelConfig& c, const std::string& p,
                      const char* out, DecoderLayer* layer);

// The DeepSeek-V3 MoE under `p` ("model.layers.3.mlp."): gate.weight and the selection bias
// gate.`bias` ([E] F32), routed experts (per expert gate_proj / up_proj / down_proj or w1 /
// w3 / w2, or packed), shared_experts.{gate,up,down}_proj (ungated).
// Decoder layer `layer_index`'s channel mixer under `p`: the dense SwiGLU (intermediate_size,
// {gate,up,down}_proj) or the MoE below, as the config's layer list says.
Status load_deepseek_channel(const WeightReader& rd, const ModelConfig& c, int layer_index,
                             const std::string& p, const char* bias, DecoderLayer* layer);
Status load_deepseek_moe(const WeightReader& rd, const ModelConfig& c, int layer_index,
                         const std::string& p, const char* bias, DecoderLayer* layer);

}  // namespace hypic
