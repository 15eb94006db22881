#include "model/mixers/conv_delta.h"

#include <algorithm>
#include <cstring>

#include "core/profile.h"
#include "kernels/conv1d.h"
#include "kernels/elementwise.h"
#include "model/pass.h"

namespace hypic {
namespace {

enum : size_t { kConv, kSsm };  // LayerState::fixed

kernels::LaInputs la_rows(int64_t n, const float* q, const float* k, const float* v,
                          const float* g, const float* beta) {
  kernels::LaInputs in;
  in.L = int(n);
  in.q = q;
  in.k = k;
  in.v = v;
  in.g = g;
  in.beta = beta;
  return in;
}

// A cached body: the conv warm-up of its first tokens (their conv sees the true preceding
// history), then S ← T·S + S_body (or S + S_body), conv state ← the body's tail.
void compose_body(const ConvDeltaShape& s, const float* conv_w, const kernels::LinearAttention& la,
                  const SegmentEntry::Layer& e, ComposeRule rule, LayerState& ls) {
  HYPIC_PROFILE_SCOPE("delta_compose");
  const int64_t kd = int64_t(s.nk) * s.dk, vd = int64_t(s.nv) * s.dv, conv_dim = s.conv_dim();
  Tensor &conv_st = ls.fixed[kConv].t, &ssm = ls.fixed[kSsm].t;
  // The shapes were checked when the entry met this model (check_entry).
  if (const Tensor* warm_mixed = e.find("warm_mixed")) {
    const int64_t P = warm_mixed->dim(0);
    std::vector<float> wc(size_t(P * conv_dim)), wk(size_t(P * kd)), wv(size_t(P * vd)),
        wo(size_t(P * vd));
    kernels::causal_conv1d_silu(warm_mixed->f32(), P, conv_dim, conv_w, s.K, conv_st.f32(),
                                wc.data());
    for (int64_t t = 0; t < P; ++t) {
      std::memcpy(&wk[size_t(t * kd)], &wc[size_t(t * conv_dim + kd)], size_t(kd) * 4);
      std::memcpy(&wv[size_t(t * vd)], &wc[size_t(t * conv_dim + 2 * kd)], size_t(vd) * 4);
    }
    kernels::l2norm(wk.data(), P * s.nk, s.dk, 1e-6f);
    la.prefill(la_rows(P, wk.data(), wk.data(), wv.data(), e.find("warm_g")->f32(),
                       e.find("warm_beta")->f32()),
               ssm.f32(), wo.data());
  }
  const float* s0 = e.find("s0")->f32();
  switch (rule) {
    case ComposeRule::kTransition:
      kernels::transition_compose(*e.T, s.dv, s0, ssm.f32());
      break;
    case ComposeRule::kNaive: {
      float* st = ssm.f32();
      for (int64_t i = 0; i < ssm.numel(); ++i) st[i] += s0[i];
      break;
    }
  }
  std::memcpy(conv_st.raw(), e.find("conv_tail")->raw(), conv_st.nbytes());
}

}  // namespace

Status conv_delta_forward(const ConvDeltaShape& s, const float* conv_w,
                          const kernels::LinearAttention& la, const ConvDeltaRows& r,
                          int64_t R, const ConvDeltaPrep& prep, Model::Pass& pass) {
  const int64_t kd = int64_t(s.nk) * s.dk, vd = int64_t(s.nv) * s.dv, conv_dim = s.conv_dim();
  const int64_t gw = s.g_width, nv = s.nv;
  const size_t li = size_t(pass.layer);
  if (pass.batch) {
    // Row b is the next token of sequence b: its conv, then one batched delta-rule step.
    HYPIC_PROFILE_SCOPE("delta_batch_step");
    std::vector<float*> states(pass.pieces.size());
    for (size_t b = 0; b < pass.pieces.size(); ++b) {
      LayerState& st = pass.pieces[b].seq->layers[li];
      kernels::causal_conv1d_silu(r.mixed + int64_t(b) * conv_dim, 1, conv_dim, conv_w, s.K,
                                  st.fixed[kConv].t.f32(), r.conv + int64_t(b) * conv_dim);
      states[b] = st.fixed[kSsm].t.f32();
    }
    prep(0, R);
    la.step(la_rows(R, r.q, r.k, r.v, r.g, r.beta), states.data(), r.out);
  } else {
    for (const Model::Pass::Piece& p : pass.pieces) {
      LayerState& ls = p.seq->layers[li];
      if (p.entry) {
        // An arriving entry: wait for this layer (the pieces before it are composed already).
        if (p.gate) HYPIC_RETURN_IF_ERROR(p.gate->wait(pass.layer));
        compose_body(s, conv_w, la, p.entry->layers[li], pass.rule, ls);
        continue;
      }
      {
        HYPIC_PROFILE_SCOPE("delta_conv");
        kernels::causal_conv1d_silu(r.mixed + p.row0 * conv_dim, p.rows, conv_dim, conv_w, s.K,
                                    ls.fixed[kConv].t.f32(), r.conv + p.row0 * conv_dim);
      }
      prep(p.row0, p.rows);
      HYPIC_PROFILE_SCOPE("delta_rule");
      const int64_t t = p.row0;
      const kernels::LaInputs in = la_rows(p.rows, r.q + t * kd, r.k + t * kd, r.v + t * vd,
                                           r.g + t * gw, r.beta + t * nv);
      float* ssm = ls.fixed[kSsm].t.f32();
      if (p.rows == 1) {
        la.step(in, &ssm, r.out + t * vd);
      } else {
        la.prefill(in, ssm, r.out + t * vd);
      }
    }
  }
  if (pass.capture) {
    // Entry of the body [seam, R): with seam < K−1 the first K−1−seam body tokens are kept
    // for conv warm-up and the transition covers [K−1, R).
    HYPIC_PROFILE_SCOPE("delta_capture");
    const LayerState& st = pass.pieces.back().seq->layers[li];
    SegmentEntry::Layer& e = pass.capture->layers[li];
    const int64_t b0 = std::max<int64_t>(pass.seam, s.K - 1), n = R - b0;
    Tensor s0 = Tensor::zeros_f32({s.nv, s.dk, s.dv});
    e.T.emplace();
    la.build_transition(la_rows(n, nullptr, r.k + b0 * kd, r.v + b0 * vd, r.g + b0 * gw,
                                r.beta + b0 * nv),
                        &*e.T, s0.f32());
    e.put("s0", std::move(s0));
    e.put("conv_tail", st.fixed[kConv].t.clone());
    if (pass.seam < s.K - 1) {
      const int64_t P = s.K - 1 - pass.seam;
      auto rows_of = [P, seam = pass.seam](const float* src, int64_t width) {
        Tensor t = Tensor::zeros_f32({P, width});
        std::memcpy(t.raw(), src + seam * width, t.nbytes());
        return t;
      };
      e.put("warm_mixed", rows_of(r.mixed, conv_dim));
      e.put("warm_g", rows_of(r.g, gw));
      e.put("warm_beta", rows_of(r.beta, nv));
    }
  }
  return Status::ok();
}

LayerState conv_delta_state(const ConvDeltaShape& s) {
  LayerState st;
  st.fixed = {{"conv", Tensor::zeros_f32({s.K - 1, s.conv_dim()})},
              {"ssm", Tensor::zeros_f32({s.nv, s.dk, s.dv})}};
  return st;
}

std::vector<EntryTensor> conv_delta_entry_tensors(const ConvDeltaShape& s, int seam) {
  const int64_t P = std::max<int64_t>(0, s.K - 1 - seam);
  std::vector<EntryTensor> want = {{"s0", {s.nv, s.dk, s.dv}}, {"conv_tail", {s.K - 1, s.conv_dim()}}};
  if (P > 0)
    want.insert(want.end(), {{"warm_mixed", {P, s.conv_dim()}}, {"warm_g", {P, s.g_width}},
                             {"warm_beta", {P, s.nv}}});
  return want;
}

Status conv_delta_check_entry(const ConvDeltaShape& s, const kernels::LinearAttention& la,
                              const TokenMixerType& type, const SegmentEntry& e,
                              const SegmentEntry::Layer& l) {
  HYPIC_RETURN_IF_ERROR(check_entry_tensors(l, type, conv_delta_entry_tensors(s, e.seam)));
  if (!l.T || l.T->form != la.transition_form() || l.T->nv != s.nv || l.T->dk != s.dk)
    return invalid_argument("its transition is not the " +
                            std::string(kernels::transition_form_name(la.transition_form())) +
                            " form of nv=" + std::to_string(s.nv) + ", dk=" + std::to_string(s.dk));
  return Status::ok();
}

}  // namespace hypic
