// Model::load: config.json + safetensors -> ModelWeights in the engine's one layout.
#include <cmath>
#include <cstring>

#include <fstream>
#include <sstream>

#include "core/log.h"
#include "core/hash.h"
#include "core/timer.h"
#include "kernels/rope.h"
#include "model/checkpoint.h"
#include "model/model.h"

namespace hypic {
namespace {

// Reads tensors by name (relative to a prefix) with shape checks, converting as asked.
class Reader {
 public:
  Reader(const Checkpoint& ck, DType compute) : ck_(ck), compute_(compute) {}

  Result<Tensor> raw(const std::string& name, const Shape& shape) const {
    return ck_.get(name, shape);
  }
  // Matrix in the compute type (zero-copy when the checkpoint already stores it that way).
  Result<Tensor> mat(const std::string& name, const Shape& shape) const {
    HYPIC_ASSIGN_OR_RETURN(Tensor t, ck_.get(name, shape));
    return t.dtype() == compute_ ? t : t.to(compute_);
  }
  Result<Tensor> vec(const std::string& name, const Shape& shape) const {
    HYPIC_ASSIGN_OR_RETURN(Tensor t, ck_.get(name, shape));
    return t.dtype() == DType::kF32 ? t.clone() : t.to(DType::kF32);
  }
  bool has(const std::string& name) const { return ck_.has(name); }
  DType compute() const { return compute_; }

 private:
  const Checkpoint& ck_;
  DType compute_;
};

// Rows of `parts` stacked into one [Σrows, cols] matrix of type t.
Tensor concat_rows(const std::vector<Tensor>& parts, DType t) {
  int64_t rows = 0;
  for (const auto& p : parts) rows += p.dim(0);
  Tensor out = Tensor::zeros(t, {rows, parts[0].dim(1)});
  char* dst = static_cast<char*>(out.raw());
  for (const auto& p : parts) {
    Tensor c = p.dtype() == t ? p : p.to(t);
    std::memcpy(dst, c.raw(), c.nbytes());
    dst += c.nbytes();
  }
  return out;
}

// Row block [r0, r0 + n) of a 2-D matrix, as a copy.
Tensor row_block(const Tensor& m, int64_t r0, int64_t n) { return m.rows(r0, r0 + n); }

Status load_gdn(const Reader& rd, const ModelConfig& c, const std::string& p, GdnWeights& w) {
  const int64_t H = c.hidden_size, nk = c.linear_num_key_heads, nv = c.linear_num_value_heads;
  const int64_t dk = c.linear_key_head_dim, dv = c.linear_value_head_dim, r = nv / nk;
  const int64_t kd = nk * dk, vd = nv * dv, conv_dim = 2 * kd + vd, K = c.linear_conv_kernel_dim;
  const DType ct = rd.compute();
  if (rd.has(p + "in_proj_qkvz.weight")) {
    // Qwen3-Next: per key-head group g, rows [q (dk) | k (dk) | v (r·dv) | z (r·dv)] and
    // in_proj_ba rows [b (r) | a (r)]; regroup into contiguous [q | k | v], [z], [b | a].
    const int64_t G = 2 * dk + 2 * r * dv;
    HYPIC_ASSIGN_OR_RETURN(Tensor qkvz, rd.raw(p + "in_proj_qkvz.weight", {nk * G, H}));
    HYPIC_ASSIGN_OR_RETURN(Tensor bam, rd.raw(p + "in_proj_ba.weight", {2 * nv, H}));
    std::vector<Tensor> q, k, v, z, b, a;
    for (int64_t g = 0; g < nk; ++g) {
      q.push_back(row_block(qkvz, g * G, dk));
      k.push_back(row_block(qkvz, g * G + dk, dk));
      v.push_back(row_block(qkvz, g * G + 2 * dk, r * dv));
      z.push_back(row_block(qkvz, g * G + 2 * dk + r * dv, r * dv));
      b.push_back(row_block(bam, g * 2 * r, r));
      a.push_back(row_block(bam, g * 2 * r + r, r));
    }
    std::vector<Tensor> qkv = q;
    qkv.insert(qkv.end(), k.begin(), k.end());
    qkv.insert(qkv.end(), v.begin(), v.end());
    std::vector<Tensor> ba = b;
    ba.insert(ba.end(), a.begin(), a.end());
    w.in_qkv = concat_rows(qkv, ct);
    w.in_z = concat_rows(z, ct);
    w.in_ba = concat_rows(ba, ct);
  } else {
    // Qwen3.5: separate contiguous projections.
    HYPIC_ASSIGN_OR_RETURN(w.in_qkv, rd.mat(p + "in_proj_qkv.weight", {conv_dim, H}));
    HYPIC_ASSIGN_OR_RETURN(w.in_z, rd.mat(p + "in_proj_z.weight", {vd, H}));
    HYPIC_ASSIGN_OR_RETURN(Tensor b, rd.raw(p + "in_proj_b.weight", {nv, H}));
    HYPIC_ASSIGN_OR_RETURN(Tensor a, rd.raw(p + "in_proj_a.weight", {nv, H}));
    w.in_ba = concat_rows({b, a}, ct);
  }
  HYPIC_ASSIGN_OR_RETURN(Tensor conv, rd.vec(p + "conv1d.weight", {conv_dim, 1, K}));
  w.conv_w = Tensor::zeros_f32({K, conv_dim});  // transposed: [K, conv_dim]
  for (int64_t c = 0; c < conv_dim; ++c)
    for (int64_t j = 0; j < K; ++j) w.conv_w.f32()[j * conv_dim + c] = conv.f32()[c * K + j];
  HYPIC_ASSIGN_OR_RETURN(Tensor A_log, rd.vec(p + "A_log", {nv}));
  w.neg_A = A_log;
  for (int64_t i = 0; i < nv; ++i) w.neg_A.f32()[i] = -std::exp(A_log.f32()[i]);
  HYPIC_ASSIGN_OR_RETURN(w.dt_bias, rd.vec(p + "dt_bias", {nv}));
  HYPIC_ASSIGN_OR_RETURN(w.norm_w, rd.vec(p + "norm.weight", {dv}));
  HYPIC_ASSIGN_OR_RETURN(w.out_proj, rd.mat(p + "out_proj.weight", {H, vd}));
  return Status::ok();
}

Status load_attn(const Reader& rd, const ModelConfig& c, const std::string& p, AttnWeights& w) {
  const int64_t H = c.hidden_size, nh = c.num_attention_heads, nkv = c.num_key_value_heads;
  const int64_t hd = c.head_dim;
  HYPIC_ASSIGN_OR_RETURN(Tensor q, rd.raw(p + "q_proj.weight", {nh * 2 * hd, H}));
  HYPIC_ASSIGN_OR_RETURN(Tensor k, rd.raw(p + "k_proj.weight", {nkv * hd, H}));
  HYPIC_ASSIGN_OR_RETURN(Tensor v, rd.raw(p + "v_proj.weight", {nkv * hd, H}));
  w.qkv = concat_rows({q, k, v}, rd.compute());
  HYPIC_ASSIGN_OR_RETURN(w.q_norm, rd.vec(p + "q_norm.weight", {hd}));
  HYPIC_ASSIGN_OR_RETURN(w.k_norm, rd.vec(p + "k_norm.weight", {hd}));
  HYPIC_ASSIGN_OR_RETURN(w.o_proj, rd.mat(p + "o_proj.weight", {H, nh * hd}));
  return Status::ok();
}

Status load_mlp(const Reader& rd, int64_t H, int64_t I, const std::string& p, MlpWeights& w) {
  HYPIC_ASSIGN_OR_RETURN(Tensor g, rd.raw(p + "gate_proj.weight", {I, H}));
  HYPIC_ASSIGN_OR_RETURN(Tensor u, rd.raw(p + "up_proj.weight", {I, H}));
  w.gate_up = concat_rows({g, u}, rd.compute());
  HYPIC_ASSIGN_OR_RETURN(w.down, rd.mat(p + "down_proj.weight", {H, I}));
  return Status::ok();
}

Status load_moe(const Reader& rd, const ModelConfig& c, const std::string& p, MoeWeights& w) {
  const int64_t H = c.hidden_size, E = c.num_experts, I = c.moe_intermediate_size;
  HYPIC_ASSIGN_OR_RETURN(w.router, rd.vec(p + "gate.weight", {E, H}));
  w.experts.resize(size_t(E));
  if (rd.has(p + "experts.gate_up_proj")) {
    // Packed: gate_up_proj [E, 2I, H] (first I rows gate), down_proj [E, H, I].
    HYPIC_ASSIGN_OR_RETURN(Tensor gu, rd.raw(p + "experts.gate_up_proj", {E, 2 * I, H}));
    HYPIC_ASSIGN_OR_RETURN(Tensor dn, rd.raw(p + "experts.down_proj", {E, H, I}));
    Tensor gu_c = gu.dtype() == rd.compute() ? gu : gu.to(rd.compute());
    Tensor dn_c = dn.dtype() == rd.compute() ? dn : dn.to(rd.compute());
    for (int64_t e = 0; e < E; ++e) {
      w.experts[size_t(e)].gate_up = gu_c.rows(e, e + 1).reshape({2 * I, H});
      w.experts[size_t(e)].down = dn_c.rows(e, e + 1).reshape({H, I});
    }
  } else {
    for (int64_t e = 0; e < E; ++e)
      HYPIC_RETURN_IF_ERROR(load_mlp(rd, H, I, p + "experts." + std::to_string(e) + ".",
                                     w.experts[size_t(e)]));
  }
  w.has_shared = c.shared_expert_intermediate_size > 0;
  if (w.has_shared) {
    HYPIC_RETURN_IF_ERROR(
        load_mlp(rd, H, c.shared_expert_intermediate_size, p + "shared_expert.", w.shared));
    HYPIC_ASSIGN_OR_RETURN(w.shared_gate, rd.vec(p + "shared_expert_gate.weight", {1, H}));
  }
  return Status::ok();
}

// Identity of the weights for segment keys, without hashing gigabytes at every start:
// SHA-256 over config.json, every tensor's name, dtype, shape and byte range, and the first
// and last 64 KiB of every tensor's data. Two checkpoints that differ only in the interior
// of a tensor collide; retrained or re-quantised weights change the sampled bytes.
std::string checkpoint_fingerprint(const std::string& dir, const Checkpoint& ck) {
  Sha256 h;
  std::ifstream f(dir + "/config.json", std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  h.update(ss.str());
  for (const std::string& name : ck.names()) {
    const SafetensorsEntry* e = ck.entry(name);
    h.update(name + "|" + e->dtype + "|" + shape_str(e->shape) + "|" + std::to_string(e->nbytes()) + "\n");
    auto raw = ck.get_raw(name);
    if (!raw) continue;
    const auto& b = raw->bytes;
    const size_t k = std::min<size_t>(b.size(), 64 << 10);
    h.update(b.data(), k);
    if (b.size() > k) h.update(b.data() + b.size() - k, k);
  }
  return h.final_hex();
}

}  // namespace

Result<std::unique_ptr<Model>> Model::load(const std::string& dir, const LoadOptions& opt) {
  if (opt.compute != DType::kF32 && opt.compute != DType::kBF16)
    return invalid_argument("compute type must be F32 or BF16");
  Timer timer;
  HYPIC_ASSIGN_OR_RETURN(ModelConfig cfg, ModelConfig::from_dir(dir));
  HYPIC_ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::open(dir));
  HYPIC_ASSIGN_OR_RETURN(cfg.weight_prefix, detect_weight_prefix(ck.names()));
  std::unique_ptr<Model> m(new Model());
  m->cfg_ = cfg;
  m->compute_ = opt.compute;
  m->dir_ = dir;
  const bool loud = opt.progress && ck.total_bytes() >= Checkpoint::kLargeBytes;
  const Reader rd(ck, opt.compute);
  const std::string& P = cfg.weight_prefix;
  const int64_t H = cfg.hidden_size, V = cfg.vocab_size;
  auto& w = m->w_;
  auto ctx = [&](const char* what) { return std::string("loading ") + what + " from " + dir; };

  {
    auto e = ck.get(P + "embed_tokens.weight", {V, H});
    if (!e.is_ok()) return e.status().with_context(ctx("embeddings"));
    w.embed = e.value();
  }
  w.layers.resize(size_t(cfg.num_hidden_layers));
  for (int i = 0; i < cfg.num_hidden_layers; ++i) {
    LayerWeights& lw = w.layers[size_t(i)];
    const std::string p = P + "layers." + std::to_string(i) + ".";
    lw.kind = cfg.layer_kind(i);
    lw.is_moe = cfg.is_moe(i);
    Status s = [&]() -> Status {
      HYPIC_ASSIGN_OR_RETURN(lw.input_norm, rd.vec(p + "input_layernorm.weight", {H}));
      HYPIC_ASSIGN_OR_RETURN(lw.post_norm, rd.vec(p + "post_attention_layernorm.weight", {H}));
      switch (lw.kind) {
        case LayerKind::kLinear: HYPIC_RETURN_IF_ERROR(load_gdn(rd, cfg, p + "linear_attn.", lw.gdn)); break;
        case LayerKind::kFull: HYPIC_RETURN_IF_ERROR(load_attn(rd, cfg, p + "self_attn.", lw.attn)); break;
      }
      if (lw.is_moe) return load_moe(rd, cfg, p + "mlp.", lw.moe);
      return load_mlp(rd, H, cfg.intermediate_size, p + "mlp.", lw.mlp);
    }();
    if (!s.is_ok()) return s.with_context("loading layer " + std::to_string(i) + " from " + dir);
    if (loud)
      HYPIC_LOG_INFO("loading %s: layer %d/%d (%.1f s)", dir.c_str(), i + 1,
                     int(cfg.num_hidden_layers), timer.seconds());
  }
  {
    auto n = rd.vec(P + "norm.weight", {H});
    if (!n.is_ok()) return n.status().with_context(ctx("final norm"));
    w.final_norm = n.value();
  }
  if (cfg.tie_word_embeddings || !ck.has("lm_head.weight")) {
    if (!cfg.tie_word_embeddings)
      return not_found("lm_head.weight is missing from " + dir +
                       " and tie_word_embeddings is false; the checkpoint is incomplete");
    w.lm_head = w.embed.dtype() == opt.compute ? w.embed : w.embed.to(opt.compute);
  } else {
    auto t = rd.mat("lm_head.weight", {V, H});
    if (!t.is_ok()) return t.status().with_context(ctx("lm_head"));
    w.lm_head = t.value();
  }
  m->rope_ = std::make_shared<kernels::Rope>(int(cfg.rotary_dim()), float(cfg.rope_theta));
  m->fingerprint_ = checkpoint_fingerprint(dir, ck);
  if (loud) HYPIC_LOG_INFO("loaded %s in %.1f s", dir.c_str(), timer.seconds());
  return m;
}

}  // namespace hypic
