// ModelConfig::summary: the description `hypic inspect` prints.
#include <algorithm>
#include <cstdio>

#include "model/config.h"

namespace hypic {
namespace {

std::string human_count(int64_t n) {
  char buf[32];
  if (n >= 1'000'000'000)
    std::snprintf(buf, sizeof buf, "%.2fB", double(n) / 1e9);
  else
    std::snprintf(buf, sizeof buf, "%.1fM", double(n) / 1e6);
  return buf;
}

}  // namespace

std::string ModelConfig::summary() const {
  std::string s;
  auto line = [&](const std::string& x) { s += x + "\n"; };
  char buf[512];
  line(std::string("architecture: ") + arch_name() + " (model_type " + model_type +
       (text_model_type != model_type ? ", text " + text_model_type : std::string()) + ")" +
       (dtype.empty() ? "" : ", weights " + dtype));
  std::string mix;
  for (const TokenMixerType* t : token_mixers()) {
    int n = 0;
    for (const LayerSpec& l : layers) n += l.token == t;
    const char letter = t->state() == LayerKind::kFull ? 'F' : 'L';
    mix += std::string(mix.empty() ? "" : " + ") + std::to_string(n) + " " + t->name() + " (" +
           letter + ")";
  }
  line("layers: " + std::to_string(num_hidden_layers) + " = " + mix + ", pattern " +
       layer_pattern());
  std::snprintf(buf, sizeof buf, "hidden %lld, vocab %lld, tied embeddings: %s, rms_norm_eps %g",
                (long long)hidden_size, (long long)vocab_size,
                tie_word_embeddings ? "yes" : "no", rms_norm_eps);
  line(buf);
  for (const TokenMixerType* t : token_mixers()) line(t->describe(*this));
  int moe_layers = 0;
  for (int i = 0; i < num_hidden_layers; ++i) moe_layers += is_moe(i);
  if (moe_layers > 0) {
    std::snprintf(buf, sizeof buf, "mlp: MoE in %d/%lld layers, %lld experts, top-%lld%s, "
                  "expert width %lld, shared expert width %lld",
                  moe_layers, (long long)num_hidden_layers, (long long)moe.experts,
                  (long long)moe.experts_per_tok, moe.norm_topk_prob ? " renormalised" : "",
                  (long long)moe.intermediate_size, (long long)moe.shared_intermediate_size);
    line(buf);
  }
  if (moe_layers < num_hidden_layers) {
    std::snprintf(buf, sizeof buf, "mlp: dense width %lld in %lld layers",
                  (long long)intermediate_size, (long long)(num_hidden_layers - moe_layers));
    line(buf);
  }
  line("parameters: " + human_count(param_count()) + " total, " + human_count(active_param_count()) +
       " active per token (text model, excluding vision tower and MTP layers)");
  line("tensor prefix: " + weight_prefix);
  return s;
}

}  // namespace hypic
