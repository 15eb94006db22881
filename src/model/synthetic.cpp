#include "model/synthetic.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "core/log.h"
#include "core/parallel.h"
#include "core/tensor.h"
#include "model/safetensors.h"

namespace hypic {
namespace {

struct Shape35 {
  std::string model_type;  // config model_type
  int64_t hidden, vocab, heads, kv_heads, head_dim, nk, nv, dk, dv;
  int64_t experts, topk, moe_inter, shared_inter, dense_inter;
  bool tie;
};

const std::map<std::string, Shape35>& shapes() {
  static const std::map<std::string, Shape35> m = {
      {"qwen3.5-35b-a3b", {"qwen3_5_moe", 2048, 248320, 16, 2, 256, 16, 32, 128, 128, 256, 8, 512, 512, 0, false}},
      {"qwen3-next-80b-a3b", {"qwen3_next", 2048, 151936, 16, 2, 256, 16, 32, 128, 128, 512, 10, 512, 512, 5120, false}},
      {"qwen3.5-27b", {"qwen3_5", 5120, 248320, 24, 4, 256, 16, 48, 128, 128, 0, 0, 0, 0, 17408, false}},
      // Not a released model: Qwen3.5's dense layout and head widths at hidden 1024, small
      // enough for several processes on one small machine (cluster benchmarks).
      {"qwen3.5-h1024", {"qwen3_5", 1024, 248320, 8, 2, 256, 8, 16, 128, 128, 0, 0, 0, 0, 3072, true}},
  };
  return m;
}

// Counter-based uniform generator (splitmix64), so shards can be filled in parallel and the
// result does not depend on the thread count.
inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

Tensor random_bf16(Shape s, float mean, float stddev, uint64_t seed) {
  Tensor t = Tensor::zeros(DType::kBF16, std::move(s));
  uint16_t* p = t.u16();
  const int64_t n = t.numel(), block = 1 << 16;
  const float a = stddev * std::sqrt(3.0f);  // uniform(-a, a) has this std
  parallel_for((n + block - 1) / block, [&](int64_t b) {
    for (int64_t i = b * block; i < std::min(n, (b + 1) * block); ++i) {
      const float u = float(mix(seed * 0x100000001b3ull + uint64_t(i)) >> 40) / float(1 << 24);
      p[i] = f32_to_bf16(mean + a * (2.0f * u - 1.0f));
    }
  });
  return t;
}

}  // namespace

std::vector<std::string> synthetic_shapes() {
  std::vector<std::string> r;
  for (const auto& [k, v] : shapes()) r.push_back(k);
  return r;
}

Status write_synthetic_checkpoint(const std::string& shape, int layers, const std::string& out_dir,
                                  uint64_t seed) {
  auto it = shapes().find(shape);
  if (it == shapes().end()) {
    std::string known;
    for (const auto& s : synthetic_shapes()) known += " " + s;
    return invalid_argument("unknown shape '" + shape + "'; known:" + known);
  }
  if (layers < 1 || layers > 128) return invalid_argument("--layers must be in 1..128");
  const Shape35& S = it->second;
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return io_error("cannot create '" + out_dir + "': " + ec.message());

  const bool vl = S.model_type != "qwen3_next";
  const std::string P = vl ? "model.language_model." : "model.";
  std::vector<std::string> layer_types;
  for (int i = 0; i < layers; ++i)
    layer_types.push_back((i + 1) % 4 == 0 ? "full_attention" : "linear_attention");
  nlohmann::json text = {
      {"vocab_size", S.vocab}, {"hidden_size", S.hidden}, {"num_hidden_layers", layers},
      {"num_attention_heads", S.heads}, {"num_key_value_heads", S.kv_heads},
      {"head_dim", S.head_dim}, {"linear_num_key_heads", S.nk},
      {"linear_num_value_heads", S.nv}, {"linear_key_head_dim", S.dk},
      {"linear_value_head_dim", S.dv}, {"linear_conv_kernel_dim", 4},
      {"layer_types", layer_types}, {"full_attention_interval", 4},
      {"rms_norm_eps", 1e-6}, {"max_position_embeddings", 262144}, {"hidden_act", "silu"},
      {"attention_bias", false}, {"tie_word_embeddings", S.tie},
      {"rope_parameters", {{"rope_type", "default"}, {"rope_theta", 10000000.0},
                           {"partial_rotary_factor", 0.25}}},
      {"eos_token_id", 248046}, {"dtype", "bfloat16"}};
  if (S.experts > 0) {
    text["num_experts"] = S.experts;
    text["num_experts_per_tok"] = S.topk;
    text["moe_intermediate_size"] = S.moe_inter;
    text["shared_expert_intermediate_size"] = S.shared_inter;
    text["norm_topk_prob"] = true;
    text["decoder_sparse_step"] = 1;
    text["mlp_only_layers"] = nlohmann::json::array();
  }
  if (S.dense_inter > 0) text["intermediate_size"] = S.dense_inter;
  nlohmann::json cfg;
  if (vl) {
    text["model_type"] = S.model_type + "_text";
    cfg = {{"model_type", S.model_type}, {"architectures", {S.model_type == "qwen3_5_moe" ? "Qwen3_5MoeForConditionalGeneration" : "Qwen3_5ForConditionalGeneration"}},
           {"text_config", text}, {"tie_word_embeddings", S.tie}};
  } else {
    cfg = text;
    cfg["model_type"] = S.model_type;
    cfg["architectures"] = {"Qwen3NextForCausalLM"};
  }
  {
    std::ofstream f(out_dir + "/config.json");
    f << cfg.dump(2) << "\n";
    if (!f) return io_error("cannot write " + out_dir + "/config.json");
  }

  const int64_t H = S.hidden, kd = S.nk * S.dk, vd = S.nv * S.dv;
  const int shards = layers + 1;
  nlohmann::json weight_map = nlohmann::json::object();
  uint64_t total = 0, tensor_seed = seed * 1000003;
  auto shard_name = [&](int k) {
    char b[64];
    std::snprintf(b, sizeof b, "model-%05d-of-%05d.safetensors", k + 1, shards);
    return std::string(b);
  };
  for (int k = 0; k < shards; ++k) {
    std::vector<std::pair<std::string, Tensor>> ts;
    auto add = [&](const std::string& name, Shape s, float mean = 0.0f, float sd = 0.02f) {
      ts.push_back({name, random_bf16(std::move(s), mean, sd, ++tensor_seed)});
    };
    if (k == layers) {
      add(P + "embed_tokens.weight", {S.vocab, H});
      add(P + "norm.weight", {H}, 0.0f, 0.02f);
      if (!S.tie) add("lm_head.weight", {S.vocab, H});
    } else {
      const std::string p = P + "layers." + std::to_string(k) + ".";
      add(p + "input_layernorm.weight", {H});
      add(p + "post_attention_layernorm.weight", {H});
      if (layer_types[size_t(k)] == "linear_attention") {
        const std::string q = p + "linear_attn.";
        if (vl) {
          add(q + "in_proj_qkv.weight", {2 * kd + vd, H});
          add(q + "in_proj_z.weight", {vd, H});
          add(q + "in_proj_b.weight", {S.nv, H});
          add(q + "in_proj_a.weight", {S.nv, H});
        } else {
          add(q + "in_proj_qkvz.weight", {2 * kd + 2 * vd, H});
          add(q + "in_proj_ba.weight", {2 * S.nv, H});
        }
        add(q + "conv1d.weight", {2 * kd + vd, 1, 4}, 0.0f, 0.3f);
        add(q + "A_log", {S.nv}, 0.5f, 0.5f);
        add(q + "dt_bias", {S.nv}, 1.0f, 0.2f);
        add(q + "norm.weight", {S.dv}, 1.0f, 0.02f);
        add(q + "out_proj.weight", {H, vd});
      } else {
        const std::string q = p + "self_attn.";
        add(q + "q_proj.weight", {S.heads * 2 * S.head_dim, H});
        add(q + "k_proj.weight", {S.kv_heads * S.head_dim, H});
        add(q + "v_proj.weight", {S.kv_heads * S.head_dim, H});
        add(q + "o_proj.weight", {H, S.heads * S.head_dim});
        add(q + "q_norm.weight", {S.head_dim});
        add(q + "k_norm.weight", {S.head_dim});
      }
      const std::string m = p + "mlp.";
      if (S.experts > 0) {
        add(m + "gate.weight", {S.experts, H});
        for (int64_t e = 0; e < S.experts; ++e) {
          const std::string x = m + "experts." + std::to_string(e) + ".";
          add(x + "gate_proj.weight", {S.moe_inter, H});
          add(x + "up_proj.weight", {S.moe_inter, H});
          add(x + "down_proj.weight", {H, S.moe_inter});
        }
        add(m + "shared_expert.gate_proj.weight", {S.shared_inter, H});
        add(m + "shared_expert.up_proj.weight", {S.shared_inter, H});
        add(m + "shared_expert.down_proj.weight", {H, S.shared_inter});
        add(m + "shared_expert_gate.weight", {1, H});
      } else {
        add(m + "gate_proj.weight", {S.dense_inter, H});
        add(m + "up_proj.weight", {S.dense_inter, H});
        add(m + "down_proj.weight", {H, S.dense_inter});
      }
    }
    for (const auto& [name, t] : ts) {
      weight_map[name] = shard_name(k);
      total += t.nbytes();
    }
    HYPIC_RETURN_IF_ERROR(write_safetensors(out_dir + "/" + shard_name(k), ts, {{"format", "pt"}}));
    HYPIC_LOG_INFO("make-model: wrote shard %d/%d (%.2f GiB so far)", k + 1, shards,
                   double(total) / (1u << 30));
  }
  nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  std::ofstream f(out_dir + "/model.safetensors.index.json");
  f << index.dump(2) << "\n";
  if (!f) return io_error("cannot write the index in " + out_dir);
  return Status::ok();
}

}  // namespace hypic
