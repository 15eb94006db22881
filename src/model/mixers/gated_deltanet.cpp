// Gated DeltaNet mixer over the pieces of a pass: h += out_proj(gated_norm(rule(conv(qkv)), z)).
// Projections, norms and out_proj run once over all computed rows; the conv and the delta
// rule walk the pieces in prompt order, composing cached bodies into the running state.
#include "model/mixers/gated_deltanet.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/parallel.h"
#include "core/profile.h"
#include "core/workspace.h"
#include "kernels/conv1d.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/linear_attn.h"
#include "model/pass.h"
#include "model/slots.h"

namespace hypic {
namespace {

enum : size_t { kConv, kSsm };  // LayerState::fixed

class GatedDeltaNet final : public TokenMixer {
 public:
  GatedDeltaNet(const ModelConfig& c, GdnWeights w)
      : w_(std::move(w)), nk_(int(c.linear_num_key_heads)),
        nv_(int(c.linear_num_value_heads)), dk_(int(c.linear_key_head_dim)),
        dv_(int(c.linear_value_head_dim)), K_(int(c.linear_conv_kernel_dim)),
        eps_(c.rms_norm_eps),
        la_(kernels::make_linear_attention(kernels::Family::kGatedDeltaNet, {nk_, nv_, dk_, dv_})) {}

  const TokenMixerType& type() const override { return gated_deltanet_type(); }
  int64_t history_tokens() const override { return K_ - 1; }

  // fixed: conv [K−1, conv_dim] (the last K−1 pre-conv inputs), ssm [nv, dk, dv].
  LayerState new_state(int64_t) const override {
    LayerState s;
    s.fixed = {{"conv", Tensor::zeros_f32({K_ - 1, conv_dim()})},
               {"ssm", Tensor::zeros_f32({nv_, dk_, dv_})}};
    return s;
  }

  double flops(int64_t L, int64_t) const override {
    const double H = double(w_.in_qkv.dim(1));
    double f = 2.0 * L * H * double(w_.in_qkv.dim(0) + w_.in_z.dim(0) + w_.in_ba.dim(0));
    f += 2.0 * L * double(w_.out_proj.dim(0)) * double(w_.out_proj.dim(1));
    return f + la_->prefill_flops(int(L));
  }

  Status check_entry(const SegmentEntry& e, const SegmentEntry::Layer& l) const override;

  Status forward(const float* x, int64_t R, float* h, Model::Pass& pass) const override;

 private:
  int64_t conv_dim() const { return 2 * int64_t(nk_) * dk_ + int64_t(nv_) * dv_; }

  GdnWeights w_;
  int nk_, nv_, dk_, dv_, K_;
  double eps_;
  std::unique_ptr<kernels::LinearAttention> la_;  // the delta rule, scale 1 (q pre-scaled)
};

// Entry layer: T (dense, over the body after the warm-up tokens), s0 [nv, dk, dv],
// conv_tail [K−1, conv_dim], and when seam < K−1 the warm-up of P = K−1−seam tokens:
// warm_mixed [P, conv_dim], warm_g [P, nv], warm_beta [P, nv].
Status GatedDeltaNet::check_entry(const SegmentEntry& e, const SegmentEntry::Layer& l) const {
  const int64_t P = std::max<int64_t>(0, K_ - 1 - e.seam);
  std::vector<EntryTensor> want = {{"s0", {nv_, dk_, dv_}}, {"conv_tail", {K_ - 1, conv_dim()}}};
  if (P > 0)
    want.insert(want.end(), {{"warm_mixed", {P, conv_dim()}}, {"warm_g", {P, nv_}},
                             {"warm_beta", {P, nv_}}});
  HYPIC_RETURN_IF_ERROR(check_entry_tensors(l, type(), want));
  if (!l.T || l.T->form != la_->transition_form() || l.T->nv != nv_ || l.T->dk != dk_)
    return invalid_argument("its transition is not the " +
                            std::string(kernels::transition_form_name(la_->transition_form())) +
                            " form of nv=" + std::to_string(nv_) + ", dk=" + std::to_string(dk_));
  return Status::ok();
}

Status GatedDeltaNet::forward(const float* x, int64_t R, float* h, Model::Pass& pass) const {
  HYPIC_PROFILE_SCOPE("gdn_layer");
  const GdnWeights& w = w_;
  const int nk = nk_, nv = nv_, dk = dk_, dv = dv_, K = K_;
  const int64_t kd = int64_t(nk) * dk, vd = int64_t(nv) * dv, conv_dim = 2 * kd + vd;
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
  // The family's kernel face (kernels/linear_attn.h): q, k, v, g, beta of n rows.
  auto rows = [](int64_t n, const float* qq, const float* kk, const float* vv, const float* gg,
                 const float* bb) {
    kernels::LaInputs in;
    in.L = int(n);
    in.q = qq;
    in.k = kk;
    in.v = vv;
    in.g = gg;
    in.beta = bb;
    return in;
  };
  if (pass.batch) {
    // Row b is the next token of sequence b: its conv, then one batched delta-rule step.
    HYPIC_PROFILE_SCOPE("gdn_batch_step");
    std::vector<float*> states(pass.pieces.size());
    for (size_t b = 0; b < pass.pieces.size(); ++b) {
      LayerState& st = pass.pieces[b].seq->layers[size_t(pass.layer)];
      kernels::causal_conv1d_silu(mixed.f32() + int64_t(b) * conv_dim, 1, conv_dim,
                                  w.conv_w.f32(), K, st.fixed[kConv].t.f32(),
                                  conv.f32() + int64_t(b) * conv_dim);
      states[b] = st.fixed[kSsm].t.f32();
    }
    prep(0, R);
    la_->step(rows(R, q.f32(), k.f32(), v.f32(), g.f32(), beta.f32()), states.data(), o.f32());
  } else {
    for (const Model::Pass::Piece& p : pass.pieces) {
      LayerState& ls = p.seq->layers[size_t(pass.layer)];
      Tensor &conv_st = ls.fixed[kConv].t, &ssm = ls.fixed[kSsm].t;
      if (p.entry) {
        // An arriving entry: wait for this layer (the pieces before it are composed already).
        if (p.gate) HYPIC_RETURN_IF_ERROR(p.gate->wait(pass.layer));
        HYPIC_PROFILE_SCOPE("gdn_compose");
        // The shapes were checked when the entry met this model (check_entry).
        const SegmentEntry::Layer& e = p.entry->layers[size_t(pass.layer)];
        if (const Tensor* warm_mixed = e.find("warm_mixed")) {
          // Conv warm-up: the first body tokens see the true preceding conv history.
          const int64_t P = warm_mixed->dim(0);
          std::vector<float> wc(size_t(P * conv_dim)), wq(size_t(P * kd)), wk(size_t(P * kd)),
              wv(size_t(P * vd)), wo(size_t(P * vd));
          kernels::causal_conv1d_silu(warm_mixed->f32(), P, conv_dim, w.conv_w.f32(), K,
                                      conv_st.f32(), wc.data());
          for (int64_t t = 0; t < P; ++t) {
            std::memcpy(&wk[size_t(t * kd)], &wc[size_t(t * conv_dim + kd)], size_t(kd) * 4);
            std::memcpy(&wv[size_t(t * vd)], &wc[size_t(t * conv_dim + 2 * kd)], size_t(vd) * 4);
          }
          kernels::l2norm(wk.data(), P * nk, dk, 1e-6f);
          la_->prefill(rows(P, wk.data(), wk.data(), wv.data(), e.find("warm_g")->f32(),
                            e.find("warm_beta")->f32()),
                       ssm.f32(), wo.data());
        }
        const float* s0 = e.find("s0")->f32();
        switch (pass.rule) {
          case ComposeRule::kTransition:
            kernels::transition_compose(*e.T, dv, s0, ssm.f32());
            break;
          case ComposeRule::kNaive: {
            float* s = ssm.f32();
            for (int64_t i = 0; i < ssm.numel(); ++i) s[i] += s0[i];
            break;
          }
        }
        std::memcpy(conv_st.raw(), e.find("conv_tail")->raw(), conv_st.nbytes());
        continue;
      }
      {
        HYPIC_PROFILE_SCOPE("gdn_conv");
        kernels::causal_conv1d_silu(mixed.f32() + p.row0 * conv_dim, p.rows, conv_dim,
                                    w.conv_w.f32(), K, conv_st.f32(),
                                    conv.f32() + p.row0 * conv_dim);
      }
      prep(p.row0, p.rows);
      HYPIC_PROFILE_SCOPE("gdn_rule");
      const int64_t r = p.row0;
      if (p.rows == 1) {
        float* s = ssm.f32();
        la_->step(rows(1, q.f32() + r * kd, k.f32() + r * kd, v.f32() + r * vd, g.f32() + r * nv,
                       beta.f32() + r * nv),
                  &s, o.f32() + r * vd);
      } else {
        la_->prefill(rows(p.rows, q.f32() + r * kd, k.f32() + r * kd, v.f32() + r * vd,
                          g.f32() + r * nv, beta.f32() + r * nv),
                     ssm.f32(), o.f32() + r * vd);
      }
    }
  }
  if (pass.capture) {
    // Entry of the body [seam, R): with seam < K−1 the first K−1−seam body tokens are kept
    // for conv warm-up and the transition covers [K−1, R).
    HYPIC_PROFILE_SCOPE("gdn_capture");
    const LayerState& st = pass.pieces.back().seq->layers[size_t(pass.layer)];
    SegmentEntry::Layer& e = pass.capture->layers[size_t(pass.layer)];
    const int64_t b0 = std::max<int64_t>(pass.seam, K - 1), n = R - b0;
    Tensor s0 = Tensor::zeros_f32({nv, dk, dv});
    e.T.emplace();
    la_->build_transition(rows(n, nullptr, k.f32() + b0 * kd, v.f32() + b0 * vd, g.f32() + b0 * nv,
                               beta.f32() + b0 * nv),
                          &*e.T, s0.f32());
    e.put("s0", std::move(s0));
    e.put("conv_tail", st.fixed[kConv].t.clone());
    if (pass.seam < K - 1) {
      const int64_t P = K - 1 - pass.seam;
      auto rows_of = [P, s = pass.seam](const float* src, int64_t width) {
        Tensor t = Tensor::zeros_f32({P, width});
        std::memcpy(t.raw(), src + s * width, t.nbytes());
        return t;
      };
      e.put("warm_mixed", rows_of(mixed.f32(), conv_dim));
      e.put("warm_g", rows_of(g.f32(), nv));
      e.put("warm_beta", rows_of(beta.f32(), nv));
    }
  }
  HYPIC_PROFILE_SCOPE("gdn_norm_out");
  kernels::rmsnorm_gated(o.f32(), z.f32(), w.norm_w.f32(), o.f32(), R * nv, dv, eps_);
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
    for (auto [field, v] : {std::pair{"linear_num_key_heads", c.linear_num_key_heads},
                            {"linear_num_value_heads", c.linear_num_value_heads},
                            {"linear_key_head_dim", c.linear_key_head_dim},
                            {"linear_value_head_dim", c.linear_value_head_dim},
                            {"linear_conv_kernel_dim", c.linear_conv_kernel_dim}})
      if (v <= 0)
        return invalid_argument("field '" + p + field + "' must be positive, got " +
                                std::to_string(v));
    if (c.linear_num_value_heads % c.linear_num_key_heads != 0)
      return invalid_argument("field '" + p + "linear_num_value_heads' (" +
                              std::to_string(c.linear_num_value_heads) + ") must be a multiple of '" +
                              p + "linear_num_key_heads' (" +
                              std::to_string(c.linear_num_key_heads) +
                              "): each key head serves a whole group of value heads");
    return Status::ok();
  }

  int64_t params(const ModelConfig& c) const override {
    const int64_t H = c.hidden_size, nv = c.linear_num_value_heads;
    const int64_t kd = c.linear_num_key_heads * c.linear_key_head_dim;
    const int64_t vd = nv * c.linear_value_head_dim;
    return H * (2 * kd + 2 * vd) + H * 2 * nv            // qkv, z, b, a projections
           + (2 * kd + vd) * c.linear_conv_kernel_dim    // depthwise conv
           + 2 * nv + c.linear_value_head_dim + vd * H;  // A_log, dt_bias, norm, out_proj
  }

  std::string describe(const ModelConfig& c) const override {
    char buf[256];
    std::snprintf(buf, sizeof buf, "gated deltanet: %lld key heads x %lld, %lld value heads x "
                  "%lld, conv %lld",
                  (long long)c.linear_num_key_heads, (long long)c.linear_key_head_dim,
                  (long long)c.linear_num_value_heads, (long long)c.linear_value_head_dim,
                  (long long)c.linear_conv_kernel_dim);
    return buf;
  }
};

}  // namespace

const TokenMixerType& gated_deltanet_type() {
  static const GatedDeltaNetType t;
  return t;
}

}  // namespace hypic
