// Qwen3.5 dense and MoE (model_type qwen3_5 / qwen3_5_moe: vision-language configs with the
// text model under text_config and its tensors under model.language_model.; qwen3_5_text /
// qwen3_5_moe_text: text-only, flat). Gated DeltaNet and gated attention layers with
// contiguous projections; dense MLP in every layer (qwen3_5) or MoE in every layer
// (qwen3_5_moe, whose router always renormalises its top-k weights).
#include "model/arch.h"
#include "model/arch/qwen_common.h"

namespace hypic {
namespace {

class Qwen3_5 final : public Architecture {
 public:
  explicit Qwen3_5(bool moe) : moe_(moe) {}
  const char* name() const override { return moe_ ? "Qwen3.5-MoE" : "Qwen3.5"; }
  std::vector<std::string> model_types() const override {
    if (moe_) return {"qwen3_5_moe", "qwen3_5_moe_text"};
    return {"qwen3_5", "qwen3_5_text"};
  }
  bool has_class(const std::string& cls) const override {
    const std::string base = moe_ ? "Qwen3_5Moe" : "Qwen3_5";
    for (const char* head : {"ForConditionalGeneration", "ForCausalLM", "Model", "TextModel"})
      if (cls == base + head) return true;
    return false;
  }
  const char* chat_template(const ModelConfig&) const override { return "qwen3.5"; }

  Status parse_config(const nlohmann::json& root, const std::string& source,
                      ModelConfig* c) const override {
    QwenFamily fam;
    fam.vl_model_type = moe_ ? "qwen3_5_moe" : "qwen3_5";
    fam.text_model_type = fam.vl_model_type + "_text";
    if (moe_) {
      fam.defaults = {248320, 2048, 0, 40, 16, 2, 256, 8};
      // No dense MLP, no decoder_sparse_step / mlp_only_layers (modeling_qwen3_5_moe.py).
      fam.read_mlp = [](Fields& f, const QwenDefaults& d, ModelConfig* m) {
        read_qwen_experts(f, d, m);
        m->moe.norm_topk_prob = true;
      };
    } else {
      fam.defaults = {248320, 4096, 12288, 32, 16, 4, 0, 0};
      fam.read_mlp = [](Fields& f, const QwenDefaults& d, ModelConfig* m) {
        m->intermediate_size = f.i64("intermediate_size", d.intermediate);
      };
    }
    const bool moe = moe_;
    fam.is_moe = [moe](const ModelConfig&, int) { return moe; };
    return parse_qwen_config(root, source, fam, c);
  }

  Status validate(const ModelConfig& c) const override {
    if (moe_ && c.moe.experts <= 0)
      return invalid_argument("field '" + c.text_prefix + "num_experts' must be positive, got " +
                              std::to_string(c.moe.experts));
    return Status::ok();
  }

  Status load_layer(const WeightReader& rd, const ModelConfig& c, int layer,
                    const std::string& prefix,  DecoderLayer* out) const override {
    return load_qwen_layer(rd, c, layer, prefix, /*interleaved_gdn=*/false, out);
  }

 private:
  bool moe_;
};

}  // namespace

const Architecture& qwen3_5_architecture() {
  static const Qwen3_5 a(false);
  return a;
}
const Architecture& qwen3_5_moe_architecture() {
  static const Qwen3_5 a(true);
  return a;
}

}  // namespace hypic
