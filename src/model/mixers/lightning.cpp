// Lightning attention over the pieces of a pass (lightning.h). Projections, norms, RoPE and
// out_proj run once over all computed rows; the recurrence walks the pieces in prompt order,
// composing cached bodies into the running state (re-rotated where the keys carry RoPE).
#include "model/mixers/lightning.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/parallel.h"
#include "core/profile.h"
#include "core/workspace.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/la_lightning.h"
#include "kernels/linear_attn.h"
#include "kernels/rope.h"
#include "model/pass.h"
#include "model/slots.h"

namespace hypic {

std::vector<float> lightning_layer_decay(const ModelConfig& c, int layer) {
  const ModelConfig::Lightning& l = c.lightning;
  switch (l.slopes) {
    case ModelConfig::Lightning::Slopes::kAlibi:
      return kernels::lightning_log_decay(int(l.heads), layer, int(c.num_hidden_layers),
                                          l.layer_offset);
    case ModelConfig::Lightning::Slopes::kMiniMax:
      return kernels::minimax_log_decay(int(l.heads), layer, int(c.num_hidden_layers));
  }
  return {};
}

namespace {

enum : size_t { kState };  // LayerState::fixed

class Lightning final : public TokenMixer {
 public:
  Lightning(const ModelConfig& c, int layer, LightningWeights w)
      : w_(std::move(w)), nh_(int(c.lightning.heads)), hd_(int(c.lightning.head_dim)),
        rot_(int(c.lightning.rotary_dim)), groups_(c.lightning.norm_groups),
        silu_(c.lightning.silu_qkv), theta_(float(c.rope_theta)),
        scale_(c.lightning.scale_q ? 1.0f / std::sqrt(float(hd_)) : 1.0f),
        eps_(float(c.rms_norm_eps)), norm_eps_(float(c.lightning.norm_eps)),
        zero_centred_(c.zero_centred_norms), rope_(rot_, theta_),
        decay_(lightning_layer_decay(c, layer)),
        la_(kernels::make_linear_attention(kernels::Family::kLightning,
                                           {nh_, nh_, hd_, hd_})) {}

  const TokenMixerType& type() const override { return lightning_type(); }
  int64_t history_tokens() const override { return 0; }  // no conv

  // fixed: state [nh, hd, hd].
  LayerState new_state(int64_t) const override {
    LayerState s;
    s.fixed = {{"state", Tensor::zeros_f32({nh_, hd_, hd_})}};
    return s;
  }

  double flops(int64_t L, int64_t) const override {
    const double proj = double(w_.qkv.numel() + w_.gate.numel() + w_.out.numel());
    return 2.0 * L * proj + la_->prefill_flops(int(L));
  }

  // Entry layer: T (log-scalar over the body), s0 [nh, hd, hd] (keys at canonical positions).
  Status check_entry(const SegmentEntry&, const SegmentEntry::Layer& l) const override {
    HYPIC_RETURN_IF_ERROR(check_entry_tensors(l, type(), {{"s0", {nh_, hd_, hd_}}}));
    if (!l.T || l.T->form != la_->transition_form() || l.T->nv != nh_ || l.T->dk != hd_)
      return invalid_argument("its transition is not the " +
                              std::string(kernels::transition_form_name(la_->transition_form())) +
                              " form of nv=" + std::to_string(nh_) + ", dk=" + std::to_string(hd_));
    return Status::ok();
  }

  Status forward(const float* x, int64_t R, float* h, Model::Pass& pass) const override;

 private:
  kernels::LaInputs inputs(const float* q, const float* k, const float* v, int64_t r0,
                           int64_t n) const {
    const int64_t D = int64_t(nh_) * hd_;
    kernels::LaInputs in;
    in.L = int(n);
    in.q = q ? q + r0 * D : nullptr;
    in.k = k + r0 * D;
    in.v = v + r0 * D;
    in.lightning_log_decay = decay_.data();
    in.scale = scale_;
    return in;
  }
  // S ← T·S + R(Δ)·s0 (or S + R(Δ)·s0 for the naive rule) for a cached body at pos0.
  void compose(const SegmentEntry& entry, int layer, int64_t pos0, const Model::Pass& pass,
               float* S) const;

  LightningWeights w_;
  int nh_, hd_, rot_;
  int64_t groups_;
  bool silu_;
  float theta_, scale_, eps_, norm_eps_;
  bool zero_centred_;
  kernels::Rope rope_;
  std::vector<float> decay_;  // [nh] log decay per token, −s_{l,h}
  std::unique_ptr<kernels::LinearAttention> la_;
};

void Lightning::compose(const SegmentEntry& entry, int layer, int64_t pos0,
                        const Model::Pass& pass, float* S) const {
  HYPIC_PROFILE_SCOPE("lightning_compose");
  const SegmentEntry::Layer& e = entry.layers[size_t(layer)];
  const Tensor& s0 = *e.find("s0");  // shapes checked when the entry met this model
  const float* add = s0.f32();
  std::vector<float> rotated;
  const int64_t delta = pos0 - entry.seam;  // the body's first token sat at `seam`
  if (rot_ > 0 && pass.rerotate && delta != 0) {
    rotated.assign(s0.f32(), s0.f32() + s0.numel());
    kernels::rerotate_state(nh_, hd_, hd_, rot_, theta_, delta, rotated.data());
    add = rotated.data();
  }
  switch (pass.rule) {
    case ComposeRule::kTransition:
      kernels::transition_compose(*e.T, hd_, add, S);
      break;
    case ComposeRule::kNaive:
      for (int64_t i = 0; i < s0.numel(); ++i) S[i] += add[i];
      break;
  }
}

Status Lightning::forward(const float* x, int64_t R, float* h, Model::Pass& pass) const {
  HYPIC_PROFILE_SCOPE("lightning_layer");
  const int nh = nh_, hd = hd_;
  const int64_t D = int64_t(nh) * hd;
  const size_t li = size_t(pass.layer);
  Workspace& ws = Workspace::local();
  Tensor proj = ws.f32(slot::kLaProj, {R, 3 * D});
  Tensor gate = ws.f32(slot::kLaGate, {R, D});
  {
    HYPIC_PROFILE_SCOPE("lightning_in_proj");
    kernels::linear(x, R, w_.qkv, proj.f32());
    kernels::linear(x, R, w_.gate, gate.f32());
  }
  // q, k, v: [R, nh, hd].
  Tensor q = ws.f32(slot::kLaQ, {R, nh, hd}), k = ws.f32(slot::kLaK, {R, nh, hd});
  Tensor v = ws.f32(slot::kLaV, {R, nh, hd}), o = ws.f32(slot::kLaOut, {R, nh, hd});
  parallel_for(R, [&](int64_t t) {
    const float* row = proj.f32() + t * 3 * D;
    float* dst[3] = {q.f32() + t * D, k.f32() + t * D, v.f32() + t * D};
    for (int j = 0; j < 3; ++j) {
      std::memcpy(dst[j], row + j * D, size_t(D) * 4);
      if (silu_)
        for (int64_t i = 0; i < D; ++i) dst[j][i] = kernels::silu(dst[j][i]);
    }
  });
  if (!w_.q_norm.empty()) {
    kernels::rmsnorm(q.f32(), w_.q_norm.f32(), q.f32(), R * nh, hd, eps_, zero_centred_);
    kernels::rmsnorm(k.f32(), w_.k_norm.f32(), k.f32(), R * nh, hd, eps_, zero_centred_);
  }
  if (rot_ > 0) {  // q and k at their true positions
    if (pass.batch) {
      std::vector<int64_t> pos(pass.pieces.size());
      for (size_t b = 0; b < pos.size(); ++b) pos[b] = pass.pieces[b].pos0;
      rope_.apply_at(q.f32(), R, nh, hd, pos.data());
      rope_.apply_at(k.f32(), R, nh, hd, pos.data());
    } else {
      for (const Model::Pass::Piece& p : pass.pieces) {
        if (p.entry) continue;
        rope_.apply(q.f32() + p.row0 * D, p.rows, nh, hd, p.pos0);
        rope_.apply(k.f32() + p.row0 * D, p.rows, nh, hd, p.pos0);
      }
    }
  }
  if (pass.batch) {
    HYPIC_PROFILE_SCOPE("lightning_batch_step");
    std::vector<float*> states(pass.pieces.size());
    for (size_t b = 0; b < states.size(); ++b)
      states[b] = pass.pieces[b].seq->layers[li].fixed[kState].t.f32();
    la_->step(inputs(q.f32(), k.f32(), v.f32(), 0, R), states.data(), o.f32());
  } else {
    for (const Model::Pass::Piece& p : pass.pieces) {
      float* S = p.seq->layers[li].fixed[kState].t.f32();
      if (p.entry) {
        // An arriving entry: wait for this layer (the pieces before it are composed already).
        if (p.gate) HYPIC_RETURN_IF_ERROR(p.gate->wait(pass.layer));
        compose(*p.entry, pass.layer, p.pos0, pass, S);
        continue;
      }
      HYPIC_PROFILE_SCOPE("lightning_rule");
      const kernels::LaInputs in = inputs(q.f32(), k.f32(), v.f32(), p.row0, p.rows);
      if (p.rows == 1) {
        la_->step(in, &S, o.f32() + p.row0 * D);
      } else {
        la_->prefill(in, S, o.f32() + p.row0 * D);
      }
    }
  }
  if (pass.capture) {
    // The body [seam, R) from zero state: its keys were rotated at canonical positions.
    HYPIC_PROFILE_SCOPE("lightning_capture");
    SegmentEntry::Layer& e = pass.capture->layers[li];
    Tensor s0 = Tensor::zeros_f32({nh, hd, hd});
    e.T.emplace();
    la_->build_transition(inputs(nullptr, k.f32(), v.f32(), pass.seam, R - pass.seam), &*e.T,
                          s0.f32());
    e.put("s0", std::move(s0));
  }
  HYPIC_PROFILE_SCOPE("lightning_norm_out");
  kernels::group_rmsnorm_sigmoid(o.f32(), gate.f32(), w_.norm.f32(), o.f32(), R, D, groups_,
                                 norm_eps_);
  kernels::linear(o.f32(), R, w_.out, h, /*accumulate=*/true);
  return Status::ok();
}

class LightningType final : public TokenMixerType {
 public:
  const char* name() const override { return "Lightning"; }
  const char* id() const override { return "lightning"; }
  LayerKind state() const override { return LayerKind::kLinear; }

  Status validate(const ModelConfig& c) const override {
    const ModelConfig::Lightning& l = c.lightning;
    if (l.heads <= 0 || l.head_dim <= 0)
      return invalid_argument("Lightning layers need positive heads and head_dim, got " +
                              std::to_string(l.heads) + " x " + std::to_string(l.head_dim));
    if (l.rotary_dim < 0 || l.rotary_dim > l.head_dim || l.rotary_dim % 2 != 0)
      return invalid_argument("Lightning layers rotate " + std::to_string(l.rotary_dim) +
                              " dims of a head of " + std::to_string(l.head_dim) +
                              "; it must be an even number no larger than the head");
    if (l.rotary_dim > 0 && !(c.rope_theta > 0))
      return invalid_argument("rope_theta must be positive");
    const int64_t D = l.heads * l.head_dim;
    if (l.norm_groups <= 0 || D % l.norm_groups != 0)
      return invalid_argument("the Lightning output norm's " + std::to_string(l.norm_groups) +
                              " groups must divide heads x head_dim = " + std::to_string(D));
    if (!(l.norm_eps > 0)) return invalid_argument("the Lightning output norm's eps must be positive");
    return Status::ok();
  }

  int64_t params(const ModelConfig& c) const override {
    const int64_t H = c.hidden_size, D = c.lightning.heads * c.lightning.head_dim;
    const int64_t norms = D + (c.lightning.qk_norm ? 2 * c.lightning.head_dim : 0);
    return 3 * D * H + D * H + H * D + norms;  // qkv, gate, out, output norm (+ q/k norms)
  }

  std::string describe(const ModelConfig& c) const override {
    const ModelConfig::Lightning& l = c.lightning;
    char buf[320];
    const std::string rope =
        l.rotary_dim > 0 ? "RoPE on " + std::to_string(l.rotary_dim) + " dims" : "no RoPE";
    std::snprintf(buf, sizeof buf, "lightning: %lld heads x %lld%s%s, %s, output "
                  "norm in %lld group%s, decay slopes %s",
                  (long long)l.heads, (long long)l.head_dim, l.silu_qkv ? ", SiLU q/k/v" : "",
                  l.qk_norm ? ", q/k norm" : "", rope.c_str(),
                  (long long)l.norm_groups, l.norm_groups == 1 ? "" : "s",
                  l.slopes == ModelConfig::Lightning::Slopes::kAlibi ? "ALiBi" : "MiniMax");
    return buf;
  }
};

}  // namespace

std::unique_ptr<TokenMixer> make_lightning(const ModelConfig& c, int layer, LightningWeights w) {
  return std::make_unique<Lightning>(c, layer, std::move(w));
}

const TokenMixerType& lightning_type() {
  static const LightningType t;
  return t;
}

}  // namespace hypic
