// Qwen3-Next (model_type qwen3_next; transformers' Qwen3NextConfig / modeling_qwen3_next.py):
// Gated DeltaNet and gated attention layers (3 : 1 by default), MoE in every
// decoder_sparse_step-th layer except mlp_only_layers, dense MLP elsewhere. Checkpoints keep
// the linear layers' q/k/v/z and b/a projections interleaved per key-head group.
#include <algorithm>

#include "model/arch.h"
#include "model/arch/qwen_common.h"

namespace hypic {
namespace {

class Qwen3Next final : public Architecture {
 public:
  const char* name() const override { return "Qwen3-Next"; }
  std::vector<std::string> model_types() const override { return {"qwen3_next"}; }
  bool has_class(const std::string& cls) const override {
    return cls == "Qwen3NextForCausalLM" || cls == "Qwen3NextModel";
  }
  const char* chat_template(const ModelConfig&) const override { return "chatml"; }

  Status parse_config(const nlohmann::json& root, const std::string& source,
                      ModelConfig* c) const override {
    QwenFamily fam;
    fam.defaults = {151936, 2048, 5632, 48, 16, 2, 512, 10};
    fam.read_mlp = [](Fields& f, const QwenDefaults& d, ModelConfig* m) {
      m->intermediate_size = f.i64("intermediate_size", d.intermediate);
      read_qwen_experts(f, d, m);
      m->moe.norm_topk_prob = f.boolean("norm_topk_prob", true);
      m->moe.decoder_sparse_step = f.i64("decoder_sparse_step", 1);
      m->moe.mlp_only_layers = f.i64_list("mlp_only_layers");
    };
    // Qwen3NextDecoderLayer.__init__
    fam.is_moe = [](const ModelConfig& m, int layer) {
      return m.moe.experts > 0 && m.moe.decoder_sparse_step > 0 &&
             (layer + 1) % m.moe.decoder_sparse_step == 0 &&
             std::find(m.moe.mlp_only_layers.begin(), m.moe.mlp_only_layers.end(), layer) ==
                 m.moe.mlp_only_layers.end();
    };
    return parse_qwen_config(root, source, fam, c);
  }

  Status validate(const ModelConfig& c) const override {
    if (c.moe.decoder_sparse_step <= 0)
      return invalid_argument("field 'decoder_sparse_step' must be positive, got " +
                              std::to_string(c.moe.decoder_sparse_step));
    for (int64_t l : c.moe.mlp_only_layers)
      if (l < 0 || l >= c.num_hidden_layers)
        return invalid_argument("field 'mlp_only_layers' has layer " + std::to_string(l) +
                                ", outside [0, " + std::to_string(c.num_hidden_layers) + ")");
    return Status::ok();
  }

  Status load_layer(const WeightReader& rd, const ModelConfig& c, int layer,
                    const std::string& prefix,  DecoderLayer* out) const override {
    return load_qwen_layer(rd, c, layer, prefix, /*interleaved_gdn=*/true, out);
  }
};

}  // namespace

const Architecture& qwen3_next_architecture() {
  static const Qwen3Next a;
  return a;
}

}  // namespace hypic
