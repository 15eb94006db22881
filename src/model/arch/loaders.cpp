#include "model/arch/loaders.h"

#include "model/weight_reader.h"

namespace hypic {

Status load_layer_norms(const WeightReader& rd, const ModelConfig& c, const std::string& p,
                        DecoderLayer* out) {
  const int64_t H = c.hidden_size;
  HYPIC_ASSIGN_OR_RETURN(out->input_norm, rd.vec(p + "input_layernorm.weight", {H}));
  HYPIC_ASSIGN_OR_RETURN(out->post_norm, rd.vec(p + "post_attention_layernorm.weight", {H}));
  return Status::ok();
}

Status load_swiglu(const WeightReader& rd, int64_t H, int64_t I, const std::string& gate,
                   const std::string& up, const std::string& down, MlpWeights& w) {
  HYPIC_ASSIGN_OR_RETURN(Tensor g, rd.raw(gate, {I, H}));
  HYPIC_ASSIGN_OR_RETURN(Tensor u, rd.raw(up, {I, H}));
  HYPIC_ASSIGN_OR_RETURN(w.gate_up, rd.stack({g, u}, gate));
  HYPIC_ASSIGN_OR_RETURN(w.down, rd.mat(down, {H, I}));
  return Status::ok();
}

Status load_swiglu(const WeightReader& rd, int64_t H, int64_t I, const std::string& p,
                   MlpWeights& w) {
  return load_swiglu(rd, H, I, p + "gate_proj.weight", p + "up_proj.weight",
                     p + "down_proj.weight", w);
}

Status load_experts(const WeightReader& rd, int64_t E, int64_t H, int64_t I,
                    const std::string& p, const ExpertNames& names,
                    std::vector<MlpWeights>* experts) {
  experts->assign(size_t(E), MlpWeights{});
  if (rd.has(p + "gate_up_proj")) {
    HYPIC_ASSIGN_OR_RETURN(Tensor gu, rd.raw(p + "gate_up_proj", {E, 2 * I, H}));
    HYPIC_ASSIGN_OR_RETURN(Tensor dn, rd.raw(p + "down_proj", {E, H, I}));
    HYPIC_ASSIGN_OR_RETURN(Tensor gu_c, rd.convert(gu, p + "gate_up_proj"));
    HYPIC_ASSIGN_OR_RETURN(Tensor dn_c, rd.convert(dn, p + "down_proj"));
    for (int64_t e = 0; e < E; ++e) {
      (*experts)[size_t(e)].gate_up = gu_c.rows(e, e + 1).reshape({2 * I, H});
      (*experts)[size_t(e)].down = dn_c.rows(e, e + 1).reshape({H, I});
    }
    return Status::ok();
  }
  for (int64_t e = 0; e < E; ++e) {
    const std::string q = p + std::to_string(e) + ".";
    HYPIC_RETURN_IF_ERROR(load_swiglu(rd, H, I, q + names.gate + ".weight",
                                      q + names.up + ".weight", q + names.down + ".weight",
                                      (*experts)[size_t(e)]));
  }
  return Status::ok();
}

Result<MoeRouter> config_router(const ModelConfig& c) {
  MoeRouter r;
  r.scoring = c.moe.router_sigmoid ? RouterScoring::kSigmoid : RouterScoring::kSoftmax;
  r.top_k = int(c.moe.experts_per_tok);
  r.norm_topk_prob = c.moe.norm_topk_prob;
  r.routed_scaling_factor = float(c.moe.routed_scaling_factor);
  r.n_group = int(c.moe.router_groups);
  r.topk_group = int(c.moe.router_topk_groups);
  HYPIC_RETURN_IF_ERROR(r.validate(c.moe.experts));
  return r;
}

}  // namespace hypic
