// MLA over the pieces of a pass (mla.h). Pieces run in prompt order: each places its latent
// rows ("ckv", k_rope rotated at the true positions) into the sequence's cache, then a
// computed piece attends causally over the cache, expanded or absorbed (mla_path()).
#include "model/mixers/mla.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "core/profile.h"
#include "core/workspace.h"
#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/rope.h"
#include "kernels/small_gemm.h"
#include "model/pass.h"
#include "model/slots.h"

namespace hypic {
namespace {

enum : size_t { kCkv };  // LayerState::rows

std::atomic<int> g_path{-1};  // −1: HYPIC_MLA not read yet

MlaPath path_from_env() {
  const char* e = std::getenv("HYPIC_MLA");
  const std::string v = e ? e : "";
  if (v == "expanded") return MlaPath::kExpanded;
  if (v == "absorbed") return MlaPath::kAbsorbed;
  return MlaPath::kAuto;
}

// Columns [c0, c0 + n) of the rows of src [R, ld] into dst [R, n].
void copy_cols(const float* src, int64_t R, int64_t ld, int64_t c0, int64_t n, float* dst) {
  parallel_for(R, [&](int64_t t) {
    std::memcpy(dst + t * n, src + t * ld + c0, size_t(n) * sizeof(float));
  });
}

class Mla final : public TokenMixer {
 public:
  Mla(const ModelConfig& c, MlaWeights w)
      : w_(std::move(w)), nh_(int(c.num_attention_heads)), dn_(int(c.mla.qk_nope_head_dim)),
        dr_(int(c.mla.qk_rope_head_dim)), dv_(int(c.mla.v_head_dim)),
        kvl_(int(c.mla.kv_lora_rank)), ql_(int(c.mla.q_lora_rank)), rotate_(c.mla.rope),
        head_gate_(c.mla.head_gate),
        scale_(1.0f / std::sqrt(float(dn_ + dr_))),
        rope_(dr_, float(c.rope_theta), /*interleaved=*/true) {}

  const TokenMixerType& type() const override { return mla_type(); }
  int64_t history_tokens() const override { return 0; }

  // rows: ckv [capacity, kv_lora + dr]: the normed latent and k_rope (rotated at its position).
  LayerState new_state(int64_t capacity) const override {
    LayerState s;
    s.rows = {{"ckv", Tensor::zeros_f32({capacity, ld()})}};
    return s;
  }

  double flops(int64_t L, int64_t past) const override {
    const int64_t qk = dn_ + dr_;
    double f = 2.0 * L * double(w_.in_proj.numel() + w_.o_proj.numel());
    if (ql_ > 0) f += 2.0 * L * double(w_.q_b.numel());
    f += 2.0 * L * double(w_.kv_b.numel());  // expanding the new tokens' keys and values
    const double keys = double(L) * double(past) + double(L) * double(L + 1) / 2;
    return f + 2.0 * keys * nh_ * double(qk + dv_);
  }

  // Entry layer: the body's ckv [Lb, kv_lora + dr] (k_rope not rotated); no transition.
  Status check_entry(const SegmentEntry& e, const SegmentEntry::Layer& l) const override {
    HYPIC_RETURN_IF_ERROR(check_entry_tensors(l, type(), {{"ckv", {e.body_tokens(), ld()}}}));
    if (l.T) return invalid_argument("an attention layer has no transition");
    return Status::ok();
  }

  Status forward(const float* x, int64_t R, float* h, Model::Pass& pass) const override;

 private:
  int64_t ld() const { return int64_t(kvl_) + dr_; }
  int64_t qk() const { return int64_t(dn_) + dr_; }
  // Absorbed attention of m query rows q [m, nh, qk] at positions pos0… over the cache rows
  // [0, pos0 + m); out [m, nh, dv]. (batch: one query per sequence, see forward.)
  void absorb_queries(const float* q, int64_t m, float* qa) const;
  void unabsorb(const float* out_lat, int64_t m, float* out) const;
  // Expands cache rows [from, to) into K [·, nh, qk] and V [·, nh, dv] (rows at their index).
  void expand(const float* cache, int64_t from, int64_t to, float* K, float* V) const;

  MlaWeights w_;
  int nh_, dn_, dr_, dv_, kvl_, ql_;
  bool rotate_, head_gate_;
  // The latent norms are DeepseekV3RMSNorm at its default eps (not the config's rms_norm_eps).
  static constexpr float eps_ = 1e-6f;
  float scale_;
  kernels::Rope rope_;
};

void Mla::absorb_queries(const float* q, int64_t m, float* qa) const {
  // qa [m, nh, ld]: per head [q_nope·W_UK_h (kv_lora) | q_rope (dr)].
  const int64_t qs = int64_t(nh_) * qk(), as = int64_t(nh_) * ld();
  parallel_for(nh_, [&](int64_t hh) {
    kernels::small_gemm(int(m), kvl_, dn_, 1.0f, q + hh * qk(), qs, false,
                        w_.w_uk.f32() + hh * dn_ * kvl_, kvl_, 0.0f, qa + hh * ld(), as);
    for (int64_t t = 0; t < m; ++t)
      std::memcpy(qa + t * as + hh * ld() + kvl_, q + t * qs + hh * qk() + dn_,
                  size_t(dr_) * sizeof(float));
  });
}

void Mla::unabsorb(const float* out_lat, int64_t m, float* out) const {
  parallel_for(nh_, [&](int64_t hh) {
    kernels::small_gemm(int(m), dv_, kvl_, 1.0f, out_lat + hh * kvl_, int64_t(nh_) * kvl_, false,
                        w_.w_uv_t.f32() + hh * kvl_ * dv_, dv_, 0.0f, out + hh * dv_,
                        int64_t(nh_) * dv_);
  });
}

void Mla::expand(const float* cache, int64_t from, int64_t to, float* K, float* V) const {
  if (to <= from) return;
  HYPIC_PROFILE_SCOPE("mla_expand");
  const int64_t n = to - from, kvw = int64_t(nh_) * (dn_ + dv_);
  Workspace& ws = Workspace::local();
  Tensor lat = ws.f32(slot::kMlaLatent, {n, kvl_}), kv = ws.f32(slot::kMlaKv, {n, kvw});
  copy_cols(cache + from * ld(), n, ld(), 0, kvl_, lat.f32());
  kernels::linear(lat.f32(), n, w_.kv_b, kv.f32());
  parallel_for(n, [&](int64_t i) {
    const int64_t t = from + i;
    for (int hh = 0; hh < nh_; ++hh) {
      const float* src = kv.f32() + i * kvw + int64_t(hh) * (dn_ + dv_);
      float* k = K + (t * nh_ + hh) * qk();
      std::memcpy(k, src, size_t(dn_) * sizeof(float));
      std::memcpy(k + dn_, cache + t * ld() + kvl_, size_t(dr_) * sizeof(float));
      std::memcpy(V + (t * nh_ + hh) * dv_, src + dn_, size_t(dv_) * sizeof(float));
    }
  });
}

Status Mla::forward(const float* x, int64_t R, float* h, Model::Pass& pass) const {
  HYPIC_PROFILE_SCOPE("mla_layer");
  const size_t li = size_t(pass.layer);
  const int64_t qkw = int64_t(nh_) * qk(), Qw = ql_ > 0 ? ql_ : qkw, W = w_.in_proj.dim(0);
  Workspace& ws = Workspace::local();
  Tensor proj = ws.f32(slot::kMlaProj, {R, W});
  kernels::linear(x, R, w_.in_proj, proj.f32());
  // q [R, nh, qk]; ckv [R, ld]: the normed latent and k_rope, as in the cache.
  Tensor q = ws.f32(slot::kMlaQ, {R, nh_, qk()});
  if (ql_ > 0) {
    Tensor qa = ws.f32(slot::kMlaLatent, {R, ql_});
    copy_cols(proj.f32(), R, W, 0, ql_, qa.f32());
    kernels::rmsnorm(qa.f32(), w_.q_a_norm.f32(), qa.f32(), R, ql_, eps_, false);
    kernels::linear(qa.f32(), R, w_.q_b, q.f32());
  } else {
    copy_cols(proj.f32(), R, W, 0, qkw, q.f32());
  }
  Tensor ckv = ws.f32(slot::kMlaCkv, {R, ld()});
  {
    Tensor lat = ws.f32(slot::kMlaLatent, {R, kvl_});
    copy_cols(proj.f32(), R, W, Qw, kvl_, lat.f32());
    kernels::rmsnorm(lat.f32(), w_.kv_a_norm.f32(), lat.f32(), R, kvl_, eps_, false);
    parallel_for(R, [&](int64_t t) {
      std::memcpy(ckv.f32() + t * ld(), lat.f32() + t * kvl_, size_t(kvl_) * sizeof(float));
      std::memcpy(ckv.f32() + t * ld() + kvl_, proj.f32() + t * W + Qw + kvl_,
                  size_t(dr_) * sizeof(float));
    });
  }
  if (pass.capture) {  // the body's latent rows, k_rope not rotated
    const int64_t b0 = pass.seam, n = R - b0;
    Tensor e = Tensor::zeros_f32({n, ld()});
    std::memcpy(e.raw(), ckv.f32() + b0 * ld(), e.nbytes());
    pass.capture->layers[li].put("ckv", std::move(e));
  }
  Tensor out = ws.f32(slot::kMlaOut, {R, nh_, dv_});
  const MlaPath path = mla_path();
  if (pass.batch) {
    // One query per sequence: place its row at its position, then absorbed attention over
    // each sequence's latent cache in one parallel region.
    HYPIC_PROFILE_SCOPE("mla_decode");
    const size_t B = pass.pieces.size();
    std::vector<int64_t> pos(B);
    std::vector<const float*> kb(B);
    for (size_t b = 0; b < B; ++b) pos[b] = pass.pieces[b].pos0;
    if (rotate_) {
      rope_.apply_at(q.f32() + dn_, R, nh_, int(qk()), pos.data());
      rope_.apply_at(ckv.f32() + kvl_, R, 1, int(ld()), pos.data());
    }
    for (size_t b = 0; b < B; ++b) {
      float* cache = pass.pieces[b].seq->layers[li].rows[kCkv].t.f32();
      std::memcpy(cache + pos[b] * ld(), ckv.f32() + int64_t(b) * ld(), size_t(ld()) * sizeof(float));
      kb[b] = cache;
    }
    Tensor qa = ws.f32(slot::kMlaQa, {R, nh_, ld()}), ol = ws.f32(slot::kMlaOutLat, {R, nh_, kvl_});
    absorb_queries(q.f32(), R, qa.f32());
    kernels::AttnDims d{nh_, 1, int(ld()), kvl_, ld(), ld()};
    kernels::attention_decode(d, int64_t(B), qa.f32(), pos.data(), kb.data(), kb.data(), scale_,
                              ol.f32());
    unabsorb(ol.f32(), R, out.f32());
  } else {
    Tensor K, V;  // expanded keys / values of the sequence, rows [0, expanded)
    int64_t expanded = 0;
    for (const Model::Pass::Piece& p : pass.pieces) {
      if (p.gate) HYPIC_RETURN_IF_ERROR(p.gate->wait(pass.layer));
      float* cache = p.seq->layers[li].rows[kCkv].t.f32();
      const int64_t n = p.tokens();
      // An entry's ckv shape was checked when it met this model (check_entry).
      const float* src = p.entry ? p.entry->layers[li].find("ckv")->f32() : ckv.f32() + p.row0 * ld();
      std::memcpy(cache + p.pos0 * ld(), src, size_t(n * ld()) * sizeof(float));
      if (rotate_) {  // a cached body's k_rope at its true positions (see gated_attention.cpp)
        const int64_t at = p.entry && !pass.rerotate ? p.entry->seam : p.pos0;
        rope_.apply(cache + p.pos0 * ld() + kvl_, n, 1, int(ld()), at);
      }
      if (p.entry) continue;
      float* qp = q.f32() + p.row0 * nh_ * qk();
      if (rotate_) rope_.apply(qp + dn_, p.rows, nh_, int(qk()), p.pos0);
      const int64_t end = p.pos0 + p.rows;
      float* op = out.f32() + p.row0 * nh_ * dv_;
      const bool absorb =
          path == MlaPath::kAbsorbed || (path == MlaPath::kAuto && p.rows == 1);
      HYPIC_PROFILE_SCOPE("mla_core");
      if (absorb) {
        Tensor qa = ws.f32(slot::kMlaQa, {p.rows, nh_, ld()});
        Tensor ol = ws.f32(slot::kMlaOutLat, {p.rows, nh_, kvl_});
        absorb_queries(qp, p.rows, qa.f32());
        kernels::AttnDims d{nh_, 1, int(ld()), kvl_, ld(), ld()};
        kernels::attention_causal(d, qa.f32(), p.rows, p.pos0, cache, cache, end, scale_,
                                  ol.f32());
        unabsorb(ol.f32(), p.rows, op);
      } else {
        if (K.empty()) {  // sized for the whole pass: every piece ends by the last one's end
          const int64_t last = pass.pieces.back().pos0 + pass.pieces.back().tokens();
          K = ws.f32(slot::kMlaK, {last, nh_, qk()});
          V = ws.f32(slot::kMlaV, {last, nh_, dv_});
        }
        expand(cache, expanded, end, K.f32(), V.f32());
        expanded = end;
        kernels::AttnDims d{nh_, nh_, int(qk()), dv_};
        kernels::attention_causal(d, qp, p.rows, p.pos0, K.f32(), V.f32(), end, scale_, op);
      }
    }
  }
  if (head_gate_) {
    const float* gp = proj.f32();
    float* op = out.f32();
    parallel_for(R, [&](int64_t t) {
      for (int hh = 0; hh < nh_; ++hh) {
        const float gate = kernels::sigmoid(gp[t * W + Qw + ld() + hh]);
        for (int e = 0; e < dv_; ++e) op[(t * nh_ + hh) * dv_ + e] *= gate;
      }
    });
  }
  kernels::linear(out.f32(), R, w_.o_proj, h, /*accumulate=*/true);
  return Status::ok();
}

class MlaType final : public TokenMixerType {
 public:
  const char* name() const override { return "MLA"; }
  const char* id() const override { return "mla"; }
  LayerKind state() const override { return LayerKind::kFull; }

  Status validate(const ModelConfig& c) const override {
    const ModelConfig::Mla& m = c.mla;
    for (auto [field, v] : {std::pair{"num_attention_heads", c.num_attention_heads},
                            {"kv_lora_rank", m.kv_lora_rank},
                            {"qk_nope_head_dim", m.qk_nope_head_dim},
                            {"v_head_dim", m.v_head_dim}})
      if (v <= 0)
        return invalid_argument("field '" + c.text_prefix + field + "' must be positive, got " +
                                std::to_string(v));
    if (m.qk_rope_head_dim < 0 || m.qk_rope_head_dim % 2 != 0)
      return invalid_argument("field 'qk_rope_head_dim' must be even and >= 0, got " +
                              std::to_string(m.qk_rope_head_dim));
    if (m.q_lora_rank < 0) return invalid_argument("field 'q_lora_rank' must not be negative");
    if (m.rope && !(c.rope_theta > 0)) return invalid_argument("rope_theta must be positive");
    return Status::ok();
  }

  int64_t params(const ModelConfig& c) const override {
    const ModelConfig::Mla& m = c.mla;
    const int64_t H = c.hidden_size, nh = c.num_attention_heads;
    const int64_t qkw = nh * (m.qk_nope_head_dim + m.qk_rope_head_dim);
    const int64_t q = m.q_lora_rank > 0 ? H * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * qkw
                                        : H * qkw;
    return q + H * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank +
           m.kv_lora_rank * nh * (m.qk_nope_head_dim + m.v_head_dim) + nh * m.v_head_dim * H +
           (m.head_gate ? nh * H : 0);
  }

  std::string describe(const ModelConfig& c) const override {
    const ModelConfig::Mla& m = c.mla;
    char buf[320];
    std::snprintf(buf, sizeof buf, "mla: %lld heads, q %s, latent %lld + rope part %lld (%s), "
                  "qk %lld + %lld, v %lld%s; cache %lld floats per token",
                  (long long)c.num_attention_heads,
                  m.q_lora_rank > 0 ? ("rank " + std::to_string(m.q_lora_rank)).c_str() : "full",
                  (long long)m.kv_lora_rank, (long long)m.qk_rope_head_dim,
                  m.rope ? "interleaved RoPE" : "no RoPE", (long long)m.qk_nope_head_dim,
                  (long long)m.qk_rope_head_dim, (long long)m.v_head_dim,
                  m.head_gate ? ", head gate" : "",
                  (long long)(m.kv_lora_rank + m.qk_rope_head_dim));
    return buf;
  }
};

}  // namespace

void mla_absorb_weights(const ModelConfig& c, MlaWeights* w) {
  const int64_t nh = c.num_attention_heads, dn = c.mla.qk_nope_head_dim, dv = c.mla.v_head_dim;
  const int64_t kvl = c.mla.kv_lora_rank;
  const Tensor kv = w->kv_b.dtype() == DType::kF32 ? w->kv_b : w->kv_b.to(DType::kF32);
  w->w_uk = Tensor::zeros_f32({nh, dn, kvl});
  w->w_uv_t = Tensor::zeros_f32({nh, kvl, dv});
  for (int64_t h = 0; h < nh; ++h) {
    const float* rows = kv.f32() + h * (dn + dv) * kvl;
    std::memcpy(w->w_uk.f32() + h * dn * kvl, rows, size_t(dn * kvl) * sizeof(float));
    for (int64_t j = 0; j < dv; ++j)
      for (int64_t i = 0; i < kvl; ++i)
        w->w_uv_t.f32()[(h * kvl + i) * dv + j] = rows[(dn + j) * kvl + i];
  }
}

std::unique_ptr<TokenMixer> make_mla(const ModelConfig& c, MlaWeights w) {
  return std::make_unique<Mla>(c, std::move(w));
}

const TokenMixerType& mla_type() {
  static const MlaType t;
  return t;
}

void set_mla_path(MlaPath p) { g_path.store(int(p)); }

MlaPath mla_path() {
  int v = g_path.load();
  if (v < 0) {
    v = int(path_from_env());
    g_path.store(v);
  }
  return MlaPath(v);
}

}  // namespace hypic
