#include "kernels/conv_warmup.h"

#include <algorithm>
#include <cstring>

#include "core/status.h"
#include "kernels/conv1d.h"

namespace hypic::kernels {
namespace {

// Floats of one token's gate row g (when given), per family (linear_attn.h).
int64_t gate_width(Family f, const LaDims& d) {
  switch (f) {
    case Family::kGla:
    case Family::kKda: return int64_t(d.nv) * d.dk;
    case Family::kLinear:
    case Family::kRetNet:
    case Family::kLightning:
    case Family::kMamba2:
    case Family::kDeltaNet:
    case Family::kGatedDeltaNet: return d.nv;
  }
  return d.nv;
}

void check_layer(const ConvLaLayer& l) {
  HYPIC_CHECK(l.la != nullptr && l.K >= 1 && l.C > 0 && l.conv_wt != nullptr && l.to_qkv,
              "incomplete ConvLaLayer");
}

// Runs n tokens' conv outputs y through to_qkv and the layer's prefill from state.
void run_tokens(const ConvLaLayer& l, int n, const float* y, const float* g, const float* beta,
                float* state, float* out) {
  const LaDims& d = l.la->dims();
  std::vector<float> q(size_t(n) * d.nk * d.dk), k(q.size()), v(size_t(n) * d.nv * d.dv);
  std::vector<float> o;
  if (!out) {
    o.resize(v.size());
    out = o.data();
  }
  l.to_qkv(y, n, g, q.data(), k.data(), v.data());
  LaInputs in;
  in.L = n;
  in.q = q.data();
  in.k = k.data();
  in.v = v.data();
  in.g = g;
  in.beta = beta;
  in.lightning_log_decay = l.lightning_log_decay;
  in.scale = l.scale;
  l.la->prefill(in, state, out);
}

}  // namespace

size_t ConvSegmentEntry::bytes() const {
  return (x_head.size() + g_head.size() + beta_head.size() + tail.size() + s_rest.size()) *
             sizeof(float) +
         T_rest.bytes();
}

ConvSegmentEntry conv_segment_build(const ConvLaLayer& l, int L, const float* x,
                                    const float* g, const float* beta) {
  check_layer(l);
  HYPIC_CHECK(L >= 1, "a segment has at least one token");
  const LaDims& d = l.la->dims();
  const int64_t C = l.C, gw = gate_width(l.la->family(), d);
  ConvSegmentEntry e;
  e.L = L;
  e.P = std::min(l.K - 1, L);
  const int P = e.P, R = L - P;
  e.x_head.assign(x, x + int64_t(P) * C);
  if (g) e.g_head.assign(g, g + P * gw);
  if (beta) e.beta_head.assign(beta, beta + int64_t(P) * d.nv);
  const int nt = std::min(l.K - 1, L);
  e.tail.assign(x + int64_t(L - nt) * C, x + int64_t(L) * C);
  e.s_rest.assign(size_t(d.nv) * d.dk * d.dv, 0.0f);
  if (R == 0) {
    e.T_rest = Transition::identity(l.la->transition_form(), d.nv, d.dk);
    return e;
  }
  // R's conv outputs read only the segment's own inputs: run the convolution over the whole
  // segment from a zero conv state and keep rows P … L−1.
  std::vector<float> cs(size_t(std::max(l.K - 1, 0)) * C, 0.0f), y(size_t(L) * C);
  causal_conv1d_silu(x, L, C, l.conv_wt, l.K, cs.data(), y.data());
  std::vector<float> q(size_t(R) * d.nk * d.dk), k(q.size()), v(size_t(R) * d.nv * d.dv);
  const float* gR = g ? g + P * gw : nullptr;
  l.to_qkv(y.data() + int64_t(P) * C, R, gR, q.data(), k.data(), v.data());
  LaInputs in;
  in.L = R;
  in.q = q.data();
  in.k = k.data();
  in.v = v.data();
  in.g = gR;
  in.beta = beta ? beta + int64_t(P) * d.nv : nullptr;
  in.lightning_log_decay = l.lightning_log_decay;
  in.scale = l.scale;
  l.la->build_transition(in, &e.T_rest, e.s_rest.data());
  return e;
}

void conv_segment_compose(const ConvLaLayer& l, const ConvSegmentEntry& e, float* state,
                          float* conv_state, float* head_out) {
  check_layer(l);
  const LaDims& d = l.la->dims();
  const int64_t C = l.C, W = l.K - 1;
  // P's conv outputs under the true preceding conv tail (on a copy: the final conv state is
  // the segment's own tail, set below).
  std::vector<float> cs(conv_state, conv_state + W * C), y(size_t(e.P) * C);
  if (e.P > 0) {
    causal_conv1d_silu(e.x_head.data(), e.P, C, l.conv_wt, l.K, cs.data(), y.data());
    run_tokens(l, e.P, y.data(), e.g_head.empty() ? nullptr : e.g_head.data(),
               e.beta_head.empty() ? nullptr : e.beta_head.data(), state, head_out);
  }
  if (e.L > e.P) transition_compose(e.T_rest, d.dv, e.s_rest.data(), state);
  // New conv state: the last K−1 rows of (conv_state ++ tail).
  const int64_t nt = int64_t(e.tail.size()) / C;
  if (nt < W)
    std::memmove(conv_state, conv_state + nt * C, size_t((W - nt) * C) * sizeof(float));
  std::memcpy(conv_state + (W - nt) * C, e.tail.data(), size_t(nt * C) * sizeof(float));
}

void conv_la_prefill(const ConvLaLayer& l, int L, const float* x, const float* g,
                     const float* beta, float* state, float* conv_state, float* out) {
  check_layer(l);
  if (L == 0) return;
  std::vector<float> y(size_t(L) * l.C);
  causal_conv1d_silu(x, L, l.C, l.conv_wt, l.K, conv_state, y.data());
  run_tokens(l, L, y.data(), g, beta, state, out);
}

}  // namespace hypic::kernels
