// Gated DeltaNet mixer over the pieces of a pass: h += out_proj(gated_norm(rule(conv(qkv)), z)).
// Projections, norms and out_proj run once over all computed rows; the conv and the delta
// rule walk the pieces in prompt order, composing cached bodies into the running state
// (conv_delta.h, shared with KDA).
#include "model/mixers/gated_deltanet.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

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

class GatedDeltaNet final : public TokenMixer {
 public:
  GatedDeltaNet(const ModelConfig& c, GdnWeights w)
      : w_(std::move(w)),
        s_{int(c.linear.key_heads), int(c.linear.value_heads), int(c.linear.key_head_dim),
           int(c.linear.value_head_dim), int(c.linear.conv_kernel), c.linear.value_heads},
        eps_(c.rms_norm_eps),
        la_(kernels::make_linear_attention(kernels::Family::kGatedDeltaNet,
                                           {s_.nk, s_.nv, s_.dk, s_.dv})) {}

  const TokenMixerType& type() const override { return gated_deltanet_type(); }
  int64_t history_tokens() const override { return s_.K - 1; }

  // fixed: conv [K−1, conv_dim] (the last K−1 pre-conv inputs), ssm [nv, dk, dv].
  LayerState new_state(int64_t) const override { return conv_delta_state(s_); }

  double flops(int64_t L, int64_t) const override {
    const double H = double(w_.in_qkv.dim(1));
    double f = 2.0 * L * H * double(w_.in_qkv.dim(0) + w_.in_z.dim(0) + w_.in_ba.dim(0));
    f += 2.0 * L * double(w_.out_proj.dim(0)) * double(w_.out_proj.dim(1));
    return f + la_->prefill_flops(int(L));
  }

  // Entry layer: conv_delta.h's (dense T, s0, conv_tail, warm-up when seam < K−1).
  Status check_entry(const SegmentEntry& e, const SegmentEntry::Layer& l) const override {
    return conv_delta_check_entry(s_, *la_, type(), e, l);
  }

  Status forward(const float* x, int64_t R, float* h, Model::Pass& pass) const override;

 private:
  // One row's n heads of d floats between the tiled order (head t = j·nk + g) and the grouped
  // one (h = g·r + j), in place: to grouped, or back to tiled when `tile`.
  void reorder_heads(float* row, int64_t n, int64_t d, bool tile) const {
    thread_local std::vector<float> tmp;
    tmp.assign(row, row + n * d);
    const int64_t nk = w_.tiled_key_heads, r = n / nk;
    for (int64_t h = 0; h < n; ++h) {
      const int64_t t = (h % r) * nk + h / r;
      if (tile) std::copy_n(tmp.data() + h * d, d, row + t * d);
      else std::copy_n(tmp.data() + t * d, d, row + h * d);
    }
  }

  GdnWeights w_;
  ConvDeltaShape s_;  // g per value head
  double eps_;
  std::unique_ptr<kernels::LinearAttention> la_;  // the delta rule, scale 1 (q pre-scaled)
};

Status GatedDeltaNet::forward(const float* x, int64_t R, float* h, Model::Pass& pass) const {
  HYPIC_PROFILE_SCOPE("gdn_layer");
  const GdnWeights& w = w_;
  const int nk = s_.nk, nv = s_.nv, dk = s_.dk, dv = s_.dv;
  const int64_t kd = int64_t(nk) * dk, vd = int64_t(nv) * dv, conv_dim = s_.conv_dim();
  Workspace& ws = Workspace::local();
  Tensor mixed = ws.f32(slot::kGdnMixed, {R, conv_dim});  // pre-conv q|k|v
  Tensor conv = ws.f32(slot::kGdnConv, {R, conv_dim});    // post-conv, SiLU
  Tensor z = ws.f32(slot::kGdnZ, {R, vd});
  Tensor ba = ws.f32(slot::kGdnBa, {R, 2 * nv});
  {
    HYPIC_PROFILE_SCOPE("gdn_in_proj");
    kernels::linear(x, R, w.in_qkv, mixed.f32());
    kernels::linear(x, R, w.in_z, z.f32());
    kernels::linear(x, R, w.in_ba, ba.f32());
  }
  if (w.tiled_key_heads > 0) {  // the file's tiled value heads to the grouped order
    parallel_for(R, [&](int64_t t) {
      reorder_heads(mixed.f32() + t * conv_dim + 2 * kd, nv, dv, false);
      reorder_heads(z.f32() + t * vd, nv, dv, false);
      reorder_heads(ba.f32() + t * 2 * nv, nv, 1, false);
      reorder_heads(ba.f32() + t * 2 * nv + nv, nv, 1, false);
    });
  }
  // q, k: [R, nk, dk] L2-normalised, q scaled by dk^-1/2; v: [R, nv, dv]; g, beta: [R, nv].
  Tensor q = ws.f32(slot::kGdnQ, {R, nk, dk}), k = ws.f32(slot::kGdnK, {R, nk, dk});
  Tensor v = ws.f32(slot::kGdnV, {R, nv, dv});
  Tensor g = ws.f32(slot::kGdnG, {R, nv}), beta = ws.f32(slot::kGdnBeta, {R, nv});
  Tensor o = ws.f32(slot::kGdnOut, {R, nv, dv});
  const float qscale = 1.0f / std::sqrt(float(dk));
  // Splits post-conv rows [r0, r0 + n) into q, k, v and computes the gates of those rows.
  auto prep = [&](int64_t r0, int64_t n) {
    HYPIC_PROFILE_SCOPE("gdn_prep");
    parallel_for(n, [&](int64_t i) {
      const int64_t t = r0 + i;
      const float* row = conv.f32() + t * conv_dim;
      float* qt = q.f32() + t * kd;
      float* kt = k.f32() + t * kd;
      std::memcpy(qt, row, size_t(kd) * 4);
      std::memcpy(kt, row + kd, size_t(kd) * 4);
      std::memcpy(v.f32() + t * vd, row + 2 * kd, size_t(vd) * 4);
      kernels::l2norm(qt, nk, dk, 1e-6f);
      kernels::l2norm(kt, nk, dk, 1e-6f);
      for (int64_t j = 0; j < kd; ++j) qt[j] *= qscale;
      const float* bt = ba.f32() + t * 2 * nv;
      for (int hh = 0; hh < nv; ++hh) {
        beta.f32()[t * nv + hh] = kernels::sigmoid(bt[hh]);
        g.f32()[t * nv + hh] =
            w.neg_A.f32()[hh] * kernels::softplus(bt[nv + hh] + w.dt_bias.f32()[hh]);
      }
    });
  };
  const ConvDeltaRows rows{mixed.f32(), conv.f32(), q.f32(), k.f32(), v.f32(),
                           g.f32(),     beta.f32(), o.f32()};
  HYPIC_RETURN_IF_ERROR(conv_delta_forward(s_, w.conv_w.f32(), *la_, rows, R, prep, pass));
  HYPIC_PROFILE_SCOPE("gdn_norm_out");
  kernels::rmsnorm_gated(o.f32(), z.f32(), w.norm_w.f32(), o.f32(), R * nv, dv, eps_);
  if (w.tiled_key_heads > 0)  // out_proj's columns are in the tiled order
    parallel_for(R, [&](int64_t t) { reorder_heads(o.f32() + t * vd, nv, dv, true); });
  kernels::linear(o.f32(), R, w.out_proj, h, /*accumulate=*/true);
  return Status::ok();
}

}  // namespace

std::unique_ptr<TokenMixer> make_gated_deltanet(const ModelConfig& c, GdnWeights w) {
  return std::make_unique<GatedDeltaNet>(c, std::move(w));
}

namespace {

class GatedDeltaNetType final : public TokenMixerType {
 public:
  const char* name() const override { return "Gated DeltaNet"; }
  const char* id() const override { return "gated_deltanet"; }
  LayerKind state() const override { return LayerKind::kLinear; }

  Status validate(const ModelConfig& c) const override {
    const std::string& p = c.text_prefix;
    for (auto [field, v] : {std::pair{"linear_num_key_heads", c.linear.key_heads},
                            {"linear_num_value_heads", c.linear.value_heads},
                            {"linear_key_head_dim", c.linear.key_head_dim},
                            {"linear_value_head_dim", c.linear.value_head_dim},
                            {"linear_conv_kernel_dim", c.linear.conv_kernel}})
      if (v <= 0)
        return invalid_argument("field '" + p + field + "' must be positive, got " +
                                std::to_string(v));
    if (c.linear.value_heads % c.linear.key_heads != 0)
      return invalid_argument("field '" + p + "linear_num_value_heads' (" +
                              std::to_string(c.linear.value_heads) + ") must be a multiple of '" +
                              p + "linear_num_key_heads' (" +
                              std::to_string(c.linear.key_heads) +
                              "): each key head serves a whole group of value heads");
    return Status::ok();
  }

  int64_t params(const ModelConfig& c) const override {
    const int64_t H = c.hidden_size, nv = c.linear.value_heads;
    const int64_t kd = c.linear.key_heads * c.linear.key_head_dim;
    const int64_t vd = nv * c.linear.value_head_dim;
    return H * (2 * kd + 2 * vd) + H * 2 * nv            // qkv, z, b, a projections
           + (2 * kd + vd) * c.linear.conv_kernel    // depthwise conv
           + 2 * nv + c.linear.value_head_dim + vd * H;  // A_log, dt_bias, norm, out_proj
  }

  std::string describe(const ModelConfig& c) const override {
    char buf[256];
    std::snprintf(buf, sizeof buf, "gated deltanet: %lld key heads x %lld, %lld value heads x "
                  "%lld, conv %lld",
                  (long long)c.linear.key_heads, (long long)c.linear.key_head_dim,
                  (long long)c.linear.value_heads, (long long)c.linear.value_head_dim,
                  (long long)c.linear.conv_kernel);
    return buf;
  }
};

}  // namespace

const TokenMixerType& gated_deltanet_type() {
  static const GatedDeltaNetType t;
  return t;
}

}  // namespace hypic
