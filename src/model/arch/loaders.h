// Tensor-reading pieces several architectures share (model-internal; model/arch/).
#pragma once

#include <string>

#include "core/status.h"
#include "model/config.h"
#include "model/mixers/moe.h"
#include "model/mixers/swiglu.h"
#include "model/weights.h"

namespace hypic {

class WeightReader;

// input_layernorm.weight and post_attention_layernorm.weight [H] under `p`.
Status load_layer_norms(const WeightReader& rd, const ModelConfig& c, const std::string& p,
                        DecoderLayer* out);

// A SwiGLU MLP of width I from three [I, H], [I, H], [H, I] matrices named in full.
Status load_swiglu(const WeightReader& rd, int64_t H, int64_t I, const std::string& gate,
                   const std::string& up, const std::string& down, MlpWeights& w);
// The common names: `p` + gate_proj / up_proj / down_proj + ".weight".
Status load_swiglu(const WeightReader& rd, int64_t H, int64_t I, const std::string& p,
                   MlpWeights& w);

// Routed experts of width I under `p`: packed `p`gate_up_proj [E, 2I, H] (first I rows gate)
// and `p`down_proj [E, H, I] when present, else per expert `p`{e}.{gate}/{up}/{down}.weight.
struct ExpertNames {
  const char* gate = "gate_proj";
  const char* up = "up_proj";
  const char* down = "down_proj";
};
Status load_experts(const WeightReader& rd, int64_t E, int64_t H, int64_t I,
                    const std::string& p, const ExpertNames& names,
                    std::vector<MlpWeights>* experts);

// The router a config describes (ModelConfig's router fields, num_experts_per_tok,
// norm_topk_prob), validated for E experts; the selection bias is read separately.
Result<MoeRouter> config_router(const ModelConfig& c);

}  // namespace hypic
