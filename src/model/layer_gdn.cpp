// Gated DeltaNet mixer over the pieces of a pass: h += out_proj(gated_norm(rule(conv(qkv)), z)).
// Projections, norms and out_proj run once over all computed rows; the conv and the delta
// rule walk the pieces in prompt order, composing cached bodies into the running state.
#include <cmath>
#include <cstring>

#include "core/parallel.h"
#include "core/profile.h"
#include "core/workspace.h"
#include "kernels/conv1d.h"
#include "kernels/elementwise.h"
#include "kernels/gated_delta.h"
#include "kernels/gemm.h"
#include "kernels/linear_attn.h"
#include "model/pass.h"
#include "model/slots.h"

namespace hypic {

Status Model::gdn_layer(const LayerWeights& lw, const float* x, int64_t R, float* h, Pass& pass,
                      size_t li) const {
  HYPIC_PROFILE_SCOPE("gdn_layer");
  const auto& c = cfg_;
  const GdnWeights& w = lw.gdn;
  const int nk = int(c.linear_num_key_heads), nv = int(c.linear_num_value_heads);
  const int dk = int(c.linear_key_head_dim), dv = int(c.linear_value_head_dim);
  const int K = int(c.linear_conv_kernel_dim);
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
  const kernels::GdnDims dims{nk, nv, dk, dv};
  if (pass.batch) {
    // Row b is the next token of sequence b: its conv, then one batched delta-rule step.
    HYPIC_PROFILE_SCOPE("gdn_batch_step");
    std::vector<float*> states(pass.pieces.size());
    for (size_t b = 0; b < pass.pieces.size(); ++b) {
      LinearState& st = pass.pieces[b].seq->linear[li];
      kernels::causal_conv1d_silu(mixed.f32() + int64_t(b) * conv_dim, 1, conv_dim,
                                  w.conv_w.f32(), K, st.conv.f32(),
                                  conv.f32() + int64_t(b) * conv_dim);
      states[b] = st.ssm.f32();
    }
    prep(0, R);
    kernels::gdn_step(dims, int(R), q.f32(), k.f32(), v.f32(), g.f32(), beta.f32(),
                      states.data(), o.f32());
  } else {
    for (const Pass::Piece& p : pass.pieces) {
      LinearState& st = p.seq->linear[li];
      if (p.entry) {
        // An arriving entry: wait for this layer (the pieces before it are composed already).
        if (p.gate) HYPIC_RETURN_IF_ERROR(p.gate->wait(pass.layer));
        HYPIC_PROFILE_SCOPE("gdn_compose");
        const SegmentEntry::Linear& e = p.entry->linear[li];
        if (!e.warm_mixed.empty()) {
          // Conv warm-up: the first body tokens see the true preceding conv history.
          const int64_t P = e.warm_mixed.dim(0);
          std::vector<float> wc(size_t(P * conv_dim)), wq(size_t(P * kd)), wk(size_t(P * kd)),
              wv(size_t(P * vd)), wo(size_t(P * vd));
          kernels::causal_conv1d_silu(e.warm_mixed.f32(), P, conv_dim, w.conv_w.f32(), K,
                                      st.conv.f32(), wc.data());
          for (int64_t t = 0; t < P; ++t) {
            std::memcpy(&wk[size_t(t * kd)], &wc[size_t(t * conv_dim + kd)], size_t(kd) * 4);
            std::memcpy(&wv[size_t(t * vd)], &wc[size_t(t * conv_dim + 2 * kd)], size_t(vd) * 4);
          }
          kernels::l2norm(wk.data(), P * nk, dk, 1e-6f);
          kernels::gdn_prefill(dims, int(P), wk.data(), wk.data(), wv.data(), e.warm_g.f32(),
                               e.warm_beta.f32(), st.ssm.f32(), wo.data());
        }
        switch (pass.rule) {
          case ComposeRule::kTransition:
            kernels::transition_compose(e.T, dv, e.s0.f32(), st.ssm.f32());
            break;
          case ComposeRule::kNaive: {
            float* s = st.ssm.f32();
            const float* s0 = e.s0.f32();
            for (int64_t i = 0; i < st.ssm.numel(); ++i) s[i] += s0[i];
            break;
          }
        }
        std::memcpy(st.conv.raw(), e.conv_tail.raw(), st.conv.nbytes());
        continue;
      }
      {
        HYPIC_PROFILE_SCOPE("gdn_conv");
        kernels::causal_conv1d_silu(mixed.f32() + p.row0 * conv_dim, p.rows, conv_dim,
                                    w.conv_w.f32(), K, st.conv.f32(),
                                    conv.f32() + p.row0 * conv_dim);
      }
      prep(p.row0, p.rows);
      HYPIC_PROFILE_SCOPE("gdn_rule");
      const int64_t r = p.row0;
      if (p.rows == 1) {
        float* s = st.ssm.f32();
        kernels::gdn_step(dims, 1, q.f32() + r * kd, k.f32() + r * kd, v.f32() + r * vd,
                          g.f32() + r * nv, beta.f32() + r * nv, &s, o.f32() + r * vd);
      } else {
        kernels::gdn_prefill(dims, int(p.rows), q.f32() + r * kd, k.f32() + r * kd,
                             v.f32() + r * vd, g.f32() + r * nv, beta.f32() + r * nv,
                             st.ssm.f32(), o.f32() + r * vd);
      }
    }
  }
  if (pass.capture) {
    // Entry of the body [seam, R): with seam < K−1 the first K−1−seam body tokens are kept
    // for conv warm-up and the transition covers [K−1, R).
    HYPIC_PROFILE_SCOPE("gdn_capture");
    const LinearState& st = pass.pieces.back().seq->linear[li];
    SegmentEntry::Linear& e = pass.capture->linear[li];
    const int64_t b0 = std::max<int64_t>(pass.seam, K - 1), n = R - b0;
    if (pass.seam < K - 1) {
      const int64_t P = K - 1 - pass.seam;
      e.warm_mixed = Tensor::zeros_f32({P, conv_dim});
      e.warm_g = Tensor::zeros_f32({P, nv});
      e.warm_beta = Tensor::zeros_f32({P, nv});
      std::memcpy(e.warm_mixed.raw(), mixed.f32() + pass.seam * conv_dim, e.warm_mixed.nbytes());
      std::memcpy(e.warm_g.raw(), g.f32() + pass.seam * nv, e.warm_g.nbytes());
      std::memcpy(e.warm_beta.raw(), beta.f32() + pass.seam * nv, e.warm_beta.nbytes());
    }
    e.s0 = Tensor::zeros_f32({nv, dk, dv});
    kernels::LaInputs in;
    in.L = int(n);
    in.k = k.f32() + b0 * kd;
    in.v = v.f32() + b0 * vd;
    in.g = g.f32() + b0 * nv;
    in.beta = beta.f32() + b0 * nv;
    kernels::make_linear_attention(kernels::Family::kGatedDeltaNet, {nk, nv, dk, dv})
        ->build_transition(in, &e.T, e.s0.f32());
    e.conv_tail = Tensor::zeros_f32({K - 1, conv_dim});
    std::memcpy(e.conv_tail.raw(), st.conv.raw(), e.conv_tail.nbytes());
  }
  HYPIC_PROFILE_SCOPE("gdn_norm_out");
  kernels::rmsnorm_gated(o.f32(), z.f32(), w.norm_w.f32(), o.f32(), R * nv, dv, c.rms_norm_eps);
  kernels::linear(o.f32(), R, w.out_proj, h, /*accumulate=*/true);
  return Status::ok();
}

}  // namespace hypic
