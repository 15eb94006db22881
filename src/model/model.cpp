#include "model/model.h"

#include <cmath>
#include <cstring>

#include "core/parallel.h"
#include "core/profile.h"
#include "core/workspace.h"
#include "kernels/attention.h"
#include "kernels/conv1d.h"
#include "kernels/elementwise.h"
#include "kernels/gated_delta.h"
#include "kernels/gemm.h"
#include "kernels/rope.h"
#include "model/slots.h"

namespace hypic {

using kernels::linear;

namespace {
const kernels::Rope& rope_of(const std::shared_ptr<void>& p) {
  return *static_cast<const kernels::Rope*>(p.get());
}
}  // namespace

SeqState Model::new_state(int64_t capacity) const {
  SeqState s;
  const auto& c = cfg_;
  const int64_t conv_dim = 2 * int64_t(c.linear_num_key_heads) * c.linear_key_head_dim +
                           int64_t(c.linear_num_value_heads) * c.linear_value_head_dim;
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    if (c.layer_kinds[size_t(i)] == LayerKind::kLinear) {
      s.linear.push_back({Tensor::zeros_f32({c.linear_conv_kernel_dim - 1, conv_dim}),
                          Tensor::zeros_f32({c.linear_num_value_heads, c.linear_key_head_dim,
                                             c.linear_value_head_dim})});
    } else {
      s.kv.push_back({Tensor::zeros_f32({capacity, c.num_key_value_heads, c.head_dim}),
                      Tensor::zeros_f32({capacity, c.num_key_value_heads, c.head_dim})});
    }
  }
  return s;
}

void Model::grow_kv(SeqState& s, int64_t need) const {
  if (s.kv.empty() || need <= s.kv_capacity()) return;
  int64_t cap = std::max<int64_t>(s.kv_capacity(), 64);
  while (cap < need) cap *= 2;
  for (auto& c : s.kv) {
    Tensor k = Tensor::zeros_f32({cap, c.k.dim(1), c.k.dim(2)});
    Tensor v = Tensor::zeros_f32({cap, c.v.dim(1), c.v.dim(2)});
    std::memcpy(k.raw(), c.k.raw(), c.k.nbytes());
    std::memcpy(v.raw(), c.v.raw(), c.v.nbytes());
    c.k = k;
    c.v = v;
  }
}

// Gated DeltaNet mixer: h += out_proj(gated_norm(delta_rule(conv(qkv)), z)).
void Model::gdn_layer(const LayerWeights& lw, LinearState& st, const float* x, int64_t L,
                      float* h) const {
  const auto& c = cfg_;
  HYPIC_PROFILE_SCOPE("gdn_layer");
  const GdnWeights& w = lw.gdn;
  const int nk = c.linear_num_key_heads, nv = c.linear_num_value_heads;
  const int dk = c.linear_key_head_dim, dv = c.linear_value_head_dim;
  const int64_t kd = int64_t(nk) * dk, vd = int64_t(nv) * dv, conv_dim = 2 * kd + vd;
  Workspace& ws = Workspace::local();
  Tensor mixed = ws.f32(slot::kGdnMixed, {L, conv_dim});  // pre-conv q|k|v
  Tensor conv = ws.f32(slot::kGdnConv, {L, conv_dim});   // post-conv, SiLU
  Tensor z = ws.f32(slot::kGdnZ, {L, vd});
  Tensor ba = ws.f32(slot::kGdnBa, {L, 2 * nv});
  {
    HYPIC_PROFILE_SCOPE("gdn_in_proj");
    linear(x, L, w.in_qkv, mixed.f32());
    linear(x, L, w.in_z, z.f32());
    linear(x, L, w.in_ba, ba.f32());
  }
  {
    HYPIC_PROFILE_SCOPE("gdn_conv");
    kernels::causal_conv1d_silu(mixed.f32(), L, conv_dim, w.conv_w.f32(),
                                c.linear_conv_kernel_dim, st.conv.f32(), conv.f32());
  }
  HYPIC_PROFILE_SCOPE("gdn_prep");
  // q, k: [L, nk, dk] L2-normalised, q scaled by dk^-1/2; v: [L, nv, dv]; g, beta: [L, nv].
  Tensor q = ws.f32(slot::kGdnQ, {L, nk, dk}), k = ws.f32(slot::kGdnK, {L, nk, dk});
  Tensor v = ws.f32(slot::kGdnV, {L, nv, dv});
  Tensor g = ws.f32(slot::kGdnG, {L, nv}), beta = ws.f32(slot::kGdnBeta, {L, nv});
  const float qscale = 1.0f / std::sqrt(float(dk));
  parallel_for(L, [&](int64_t t) {
    const float* row = conv.f32() + t * conv_dim;
    float* qt = q.f32() + t * kd;
    float* kt = k.f32() + t * kd;
    std::memcpy(qt, row, size_t(kd) * 4);
    std::memcpy(kt, row + kd, size_t(kd) * 4);
    std::memcpy(v.f32() + t * vd, row + 2 * kd, size_t(vd) * 4);
    kernels::l2norm(qt, nk, dk, 1e-6f);
    kernels::l2norm(kt, nk, dk, 1e-6f);
    for (int64_t i = 0; i < kd; ++i) qt[i] *= qscale;
    const float* bt = ba.f32() + t * 2 * nv;
    for (int hh = 0; hh < nv; ++hh) {
      beta.f32()[t * nv + hh] = kernels::sigmoid(bt[hh]);
      g.f32()[t * nv + hh] =
          w.neg_A.f32()[hh] * kernels::softplus(bt[nv + hh] + w.dt_bias.f32()[hh]);
    }
  });
  Tensor o = ws.f32(slot::kGdnOut, {L, nv, dv});
  const kernels::GdnDims dims{nk, nv, dk, dv};
  {
    HYPIC_PROFILE_SCOPE("gdn_rule");
    if (L == 1) {
      float* s = st.ssm.f32();
      kernels::gdn_step(dims, 1, q.f32(), k.f32(), v.f32(), g.f32(), beta.f32(), &s, o.f32());
    } else {
      kernels::gdn_prefill(dims, int(L), q.f32(), k.f32(), v.f32(), g.f32(), beta.f32(),
                           st.ssm.f32(), o.f32());
    }
  }
  HYPIC_PROFILE_SCOPE("gdn_norm_out");
  kernels::rmsnorm_gated(o.f32(), z.f32(), w.norm_w.f32(), o.f32(), L * nv, dv, c.rms_norm_eps);
  linear(o.f32(), L, w.out_proj, h, /*accumulate=*/true);
}

// Gated full attention: h += o_proj(attn(rope(qnorm(q)), rope(knorm(k)), v) ⊙ σ(gate)).
void Model::attn_layer(const LayerWeights& lw, KvCache& kv, int64_t pos, const float* x,
                       int64_t L, float* h) const {
  const auto& c = cfg_;
  HYPIC_PROFILE_SCOPE("attn_layer");
  const AttnWeights& w = lw.attn;
  const int nh = c.num_attention_heads, nkv = c.num_key_value_heads, hd = c.head_dim;
  const int64_t qw = int64_t(nh) * 2 * hd, kw = int64_t(nkv) * hd, width = qw + 2 * kw;
  Workspace& ws = Workspace::local();
  Tensor proj = ws.f32(slot::kAttnProj, {L, width});
  linear(x, L, w.qkv, proj.f32());
  Tensor q = ws.f32(slot::kAttnQ, {L, nh, hd}), gate = ws.f32(slot::kAttnGate, {L, nh, hd});
  float* kc = kv.k.f32() + pos * kw;  // new keys/values go straight into the cache
  float* vc = kv.v.f32() + pos * kw;
  parallel_for(L, [&](int64_t t) {
    const float* row = proj.f32() + t * width;
    for (int hh = 0; hh < nh; ++hh) {
      std::memcpy(q.f32() + (t * nh + hh) * hd, row + int64_t(hh) * 2 * hd, size_t(hd) * 4);
      std::memcpy(gate.f32() + (t * nh + hh) * hd, row + int64_t(hh) * 2 * hd + hd,
                  size_t(hd) * 4);
    }
    std::memcpy(kc + t * kw, row + qw, size_t(kw) * 4);
    std::memcpy(vc + t * kw, row + qw + kw, size_t(kw) * 4);
  });
  kernels::rmsnorm(q.f32(), w.q_norm.f32(), q.f32(), L * nh, hd, c.rms_norm_eps, true);
  kernels::rmsnorm(kc, w.k_norm.f32(), kc, L * nkv, hd, c.rms_norm_eps, true);
  const auto& rope = rope_of(rope_);
  rope.apply(q.f32(), L, nh, hd, pos);
  rope.apply(kc, L, nkv, hd, pos);
  Tensor o = ws.f32(slot::kAttnOut, {L, nh, hd});
  HYPIC_PROFILE_SCOPE("attn_core");
  kernels::attention_causal({nh, nkv, hd}, q.f32(), L, pos, kv.k.f32(), kv.v.f32(), pos + L,
                            1.0f / std::sqrt(float(hd)), o.f32());
  float* op = o.f32();
  const float* gp = gate.f32();
  for (int64_t i = 0; i < L * nh * hd; ++i) op[i] *= kernels::sigmoid(gp[i]);
  linear(o.f32(), L, w.o_proj, h, /*accumulate=*/true);
}

void Model::mlp_layer(const MlpWeights& w, const float* x, int64_t L, float* h) const {
  HYPIC_PROFILE_SCOPE("mlp");
  const int64_t I = w.down.dim(1);
  Workspace& ws = Workspace::local();
  Tensor gu = ws.f32(slot::kMlpGateUp, {L, 2 * I});
  linear(x, L, w.gate_up, gu.f32());
  Tensor act = ws.f32(slot::kMlpAct, {L, I});
  parallel_for(L, [&](int64_t t) {
    kernels::swiglu(gu.f32() + t * 2 * I, gu.f32() + t * 2 * I + I, act.f32() + t * I, I);
  });
  linear(act.f32(), L, w.down, h, /*accumulate=*/true);
}

Status Model::forward(SeqState& st, const std::vector<int32_t>& tokens, LogitsFor which,
                      std::vector<float>* logits) const {
  const auto& c = cfg_;
  const int64_t L = int64_t(tokens.size()), H = c.hidden_size;
  if (L == 0) return invalid_argument("forward: no tokens");
  for (int32_t t : tokens)
    if (t < 0 || t >= c.vocab_size)
      return out_of_range("token id " + std::to_string(t) + " outside the vocabulary [0, " +
                          std::to_string(c.vocab_size) + ")");
  if (st.pos + L > c.max_position_embeddings)
    return out_of_range("sequence of " + std::to_string(st.pos + L) +
                        " tokens exceeds the model's context of " +
                        std::to_string(c.max_position_embeddings) + " tokens; shorten the prompt");
  grow_kv(st, st.pos + L);

  Workspace& ws = Workspace::local();
  Tensor h = ws.f32(slot::kHidden, {L, H});
  const size_t esz = dtype_size(w_.embed.dtype());
  for (int64_t t = 0; t < L; ++t)
    to_f32(w_.embed.dtype(), static_cast<const char*>(w_.embed.raw()) + size_t(tokens[size_t(t)]) * H * esz,
           h.f32() + t * H, size_t(H));
  Tensor x = ws.f32(slot::kNormed, {L, H});
  size_t li = 0, ai = 0;
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const LayerWeights& lw = w_.layers[size_t(i)];
    kernels::rmsnorm(h.f32(), lw.input_norm.f32(), x.f32(), L, H, c.rms_norm_eps, true);
    switch (lw.kind) {
      case LayerKind::kLinear: gdn_layer(lw, st.linear[li++], x.f32(), L, h.f32()); break;
      case LayerKind::kFull: attn_layer(lw, st.kv[ai++], st.pos, x.f32(), L, h.f32()); break;
    }
    kernels::rmsnorm(h.f32(), lw.post_norm.f32(), x.f32(), L, H, c.rms_norm_eps, true);
    if (lw.is_moe) {
      moe_layer(lw.moe, x.f32(), L, h.f32());
    } else {
      mlp_layer(lw.mlp, x.f32(), L, h.f32());
    }
  }
  st.pos += L;
  if (which == LogitsFor::kNone) return Status::ok();
  const int64_t r0 = which == LogitsFor::kLast ? L - 1 : 0, n = L - r0;
  kernels::rmsnorm(h.f32() + r0 * H, w_.final_norm.f32(), x.f32(), n, H, c.rms_norm_eps, true);
  logits->assign(size_t(n * c.vocab_size), 0.0f);
  linear(x.f32(), n, w_.lm_head, logits->data());
  return Status::ok();
}

double Model::forward_flops(int64_t L, int64_t past, bool logits_last_only) const {
  const auto& c = cfg_;
  const double H = c.hidden_size;
  double f = 0;
  for (const auto& lw : w_.layers) {
    switch (lw.kind) {
      case LayerKind::kLinear: {
        const auto& g = lw.gdn;
        f += 2.0 * L * H * double(g.in_qkv.dim(0) + g.in_z.dim(0) + g.in_ba.dim(0));
        f += 2.0 * L * double(g.out_proj.dim(0)) * double(g.out_proj.dim(1));
        f += kernels::gdn_prefill_flops({c.linear_num_key_heads, c.linear_num_value_heads,
                                         c.linear_key_head_dim, c.linear_value_head_dim},
                                        int(L));
        break;
      }
      case LayerKind::kFull: {
        f += 2.0 * L * H * double(lw.attn.qkv.dim(0));
        f += 2.0 * L * double(lw.attn.o_proj.dim(0)) * double(lw.attn.o_proj.dim(1));
        // scores and weighted values: each query sees past + its causal prefix.
        const double keys = double(L) * double(past) + double(L) * double(L + 1) / 2;
        f += 2.0 * 2.0 * keys * c.num_attention_heads * c.head_dim;
        break;
      }
    }
    auto mlp = [&](const MlpWeights& m) {
      return 2.0 * L * H * double(m.gate_up.dim(0)) + 2.0 * L * H * double(m.down.dim(1));
    };
    if (lw.is_moe) {
      f += 2.0 * L * H * double(lw.moe.router.dim(0));
      f += c.num_experts_per_tok * mlp(lw.moe.experts[0]);
      if (lw.moe.has_shared) f += mlp(lw.moe.shared);
    } else {
      f += mlp(lw.mlp);
    }
  }
  f += 2.0 * (logits_last_only ? 1 : L) * H * double(c.vocab_size);
  return f;
}

}  // namespace hypic
