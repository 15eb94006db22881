// KDA mixer over the pieces of a pass (kda.h): one GEMM for every input projection, the
// gates' up-projections, then the conv + delta-rule walk shared with Gated DeltaNet
// (conv_delta.h), then the gated per-head norm and the output projection.
#include "model/mixers/kda.h"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/parallel.h"
#include "core/profile.h"
#include "core/workspace.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/linear_attn.h"
#include "model/mixers/conv_delta.h"
#include "model/pass.h"
#include "model/slots.h"

namespace hypic {
namespace {

// Columns [c0, c0 + n) of the rows of src [R, ld] into dst [R, n].
void copy_cols(const float* src, int64_t R, int64_t ld, int64_t c0, int64_t n, float* dst) {
  parallel_for(R, [&](int64_t t) {
    std::memcpy(dst + t * n, src + t * ld + c0, size_t(n) * sizeof(float));
  });
}

class Kda final : public TokenMixer {
 public:
  Kda(const ModelConfig& c, KdaWeights w)
      : w_(std::move(w)),
        s_{int(c.linear.key_heads), int(c.linear.key_heads), int(c.linear.key_head_dim),
           int(c.linear.key_head_dim), int(c.linear.conv_kernel),
           c.linear.key_heads * c.linear.key_head_dim},
        safe_(c.kda.safe_gate), lower_(float(c.kda.lower_bound)), eps_(float(c.rms_norm_eps)),
        la_(kernels::make_linear_attention(kernels::Family::kKda, {s_.nk, s_.nv, s_.dk, s_.dv})) {}

  const TokenMixerType& type() const override { return kda_type(); }
  int64_t history_tokens() const override { return s_.K - 1; }
  LayerState new_state(int64_t) const override { return conv_delta_state(s_); }

  double flops(int64_t L, int64_t) const override {
    const int64_t D = s_.g_width;
    double f = 2.0 * L * double(w_.in_proj.numel());
    if (!w_.f_up.empty()) f += 2.0 * L * double(D * w_.f_rows);
    if (!w_.g_up.empty()) f += 2.0 * L * double(D * w_.g_rows);
    return f + 2.0 * L * double(w_.o_proj.numel()) + la_->prefill_flops(int(L));
  }

  // Entry layer: conv_delta.h's (dense T, s0, conv_tail, warm-up with per-channel warm_g).
  Status check_entry(const SegmentEntry& e, const SegmentEntry::Layer& l) const override {
    return conv_delta_check_entry(s_, *la_, type(), e, l);
  }

  Status forward(const float* x, int64_t R, float* h, Model::Pass& pass) const override;

 private:
  // The full-rank input of a gate ([R, D]): its columns of proj, up-projected if low rank.
  void gate_input(const Tensor& proj, int64_t R, int64_t c0, int64_t rows, const Tensor& up,
                  int slot_low, float* out) const {
    const int64_t W = proj.dim(1), D = s_.g_width;
    if (up.empty()) return copy_cols(proj.f32(), R, W, c0, D, out);
    Tensor low = Workspace::local().f32(slot_low, {R, rows});
    copy_cols(proj.f32(), R, W, c0, rows, low.f32());
    kernels::linear(low.f32(), R, up, out);
  }

  KdaWeights w_;
  ConvDeltaShape s_;  // g per channel: g_width = heads·head_dim
  bool safe_;
  float lower_, eps_;
  std::unique_ptr<kernels::LinearAttention> la_;  // scale 1 (q pre-scaled)
};

Status Kda::forward(const float* x, int64_t R, float* h, Model::Pass& pass) const {
  HYPIC_PROFILE_SCOPE("kda_layer");
  const int nh = s_.nv, hd = s_.dk;
  const int64_t D = s_.g_width, conv_dim = s_.conv_dim(), W = w_.in_proj.dim(0);
  Workspace& ws = Workspace::local();
  Tensor proj = ws.f32(slot::kKdaProj, {R, W});
  Tensor mixed = ws.f32(slot::kKdaMixed, {R, conv_dim}), conv = ws.f32(slot::kKdaConv, {R, conv_dim});
  Tensor f = ws.f32(slot::kKdaF, {R, D}), gate = ws.f32(slot::kKdaGate, {R, D});
  {
    HYPIC_PROFILE_SCOPE("kda_in_proj");
    kernels::linear(x, R, w_.in_proj, proj.f32());
    copy_cols(proj.f32(), R, W, 0, conv_dim, mixed.f32());
    gate_input(proj, R, conv_dim, w_.f_rows, w_.f_up, slot::kKdaLowRank, f.f32());
    gate_input(proj, R, conv_dim + w_.f_rows, w_.g_rows, w_.g_up, slot::kKdaLowRank, gate.f32());
  }
  const int64_t b0 = conv_dim + w_.f_rows + w_.g_rows;  // β logits' first column
  // q, k: [R, nh, hd] L2-normalised, q scaled by hd^−½; v: [R, nh, hd]; g: [R, nh, hd]; β: [R, nh].
  Tensor q = ws.f32(slot::kKdaQ, {R, nh, hd}), k = ws.f32(slot::kKdaK, {R, nh, hd});
  Tensor v = ws.f32(slot::kKdaV, {R, nh, hd}), g = ws.f32(slot::kKdaG, {R, nh, hd});
  Tensor beta = ws.f32(slot::kKdaBeta, {R, nh}), o = ws.f32(slot::kKdaOut, {R, nh, hd});
  const float qscale = 1.0f / std::sqrt(float(hd));
  auto prep = [&](int64_t r0, int64_t n) {
    HYPIC_PROFILE_SCOPE("kda_prep");
    parallel_for(n, [&](int64_t i) {
      const int64_t t = r0 + i;
      const float* row = conv.f32() + t * conv_dim;
      float* qt = q.f32() + t * D;
      float* kt = k.f32() + t * D;
      std::memcpy(qt, row, size_t(D) * 4);
      std::memcpy(kt, row + D, size_t(D) * 4);
      std::memcpy(v.f32() + t * D, row + 2 * D, size_t(D) * 4);
      kernels::l2norm(qt, nh, hd, 1e-6f);
      kernels::l2norm(kt, nh, hd, 1e-6f);
      for (int64_t j = 0; j < D; ++j) qt[j] *= qscale;
      const float* ft = f.f32() + t * D;
      float* gt = g.f32() + t * D;
      for (int hh = 0; hh < nh; ++hh) {
        const float a = w_.decay.f32()[hh];
        for (int j = hh * hd; j < (hh + 1) * hd; ++j) {
          const float u = ft[j] + w_.dt_bias.f32()[j];
          gt[j] = safe_ ? lower_ * kernels::sigmoid(a * u) : -a * kernels::softplus(u);
        }
        beta.f32()[t * nh + hh] = kernels::sigmoid(proj.f32()[t * W + b0 + hh]);
      }
    });
  };
  const ConvDeltaRows rows{mixed.f32(), conv.f32(), q.f32(), k.f32(), v.f32(),
                           g.f32(),     beta.f32(), o.f32()};
  HYPIC_RETURN_IF_ERROR(conv_delta_forward(s_, w_.conv_w.f32(), *la_, rows, R, prep, pass));
  HYPIC_PROFILE_SCOPE("kda_norm_out");
  kernels::group_rmsnorm_sigmoid(o.f32(), gate.f32(), w_.norm_w.f32(), o.f32(), R * nh, hd, 1,
                                 eps_);
  kernels::linear(o.f32(), R, w_.o_proj, h, /*accumulate=*/true);
  return Status::ok();
}

class KdaType final : public TokenMixerType {
 public:
  const char* name() const override { return "KDA"; }
  const char* id() const override { return "kda"; }
  LayerKind state() const override { return LayerKind::kLinear; }

  Status validate(const ModelConfig& c) const override {
    const std::string& p = c.text_prefix;
    for (auto [field, v] : {std::pair{"linear heads", c.linear.key_heads},
                            {"linear head_dim", c.linear.key_head_dim},
                            {"short conv kernel", c.linear.conv_kernel}})
      if (v <= 0)
        return invalid_argument(p + std::string("KDA ") + field + " must be positive, got " +
                                std::to_string(v));
    if (c.linear.value_heads != c.linear.key_heads ||
        c.linear.value_head_dim != c.linear.key_head_dim)
      return invalid_argument("KDA layers have as many value heads as key heads, of one size");
    if (c.kda.safe_gate && !(c.kda.lower_bound < 0))
      return invalid_argument("kda_lower_bound must be negative (a log decay), got " +
                              std::to_string(c.kda.lower_bound));
    return Status::ok();
  }

  int64_t params(const ModelConfig& c) const override {
    const int64_t H = c.hidden_size, hd = c.linear.key_head_dim, D = c.linear.key_heads * hd;
    const int64_t gate = c.kda.low_rank_gates ? hd * H + D * hd : D * H;
    // q, k, v, the forget and output gates, β, conv, A_log, dt_bias, norm, o_proj.
    return 3 * D * H + 2 * gate + c.linear.key_heads * H + 3 * D * c.linear.conv_kernel +
           c.linear.key_heads + D + hd + D * H;
  }

  std::string describe(const ModelConfig& c) const override {
    char buf[256];
    std::snprintf(buf, sizeof buf, "kda: %lld heads x %lld, conv %lld, forget gate %s",
                  (long long)c.linear.key_heads, (long long)c.linear.key_head_dim,
                  (long long)c.linear.conv_kernel,
                  c.kda.safe_gate ? "safe (bounded)" : "softplus");
    return buf;
  }
};

}  // namespace

std::unique_ptr<TokenMixer> make_kda(const ModelConfig& c, KdaWeights w) {
  return std::make_unique<Kda>(c, std::move(w));
}

const TokenMixerType& kda_type() {
  static const KdaType t;
  return t;
}

}  // namespace hypic
