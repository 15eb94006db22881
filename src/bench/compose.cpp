#include "bench/compose.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/forward.h"
#include "core/parallel.h"
#include "core/timer.h"
#include "kernels/elementwise.h"
#include "kernels/la_lightning.h"
#include "kernels/la_mamba2.h"
#include "kernels/transition.h"
#include "model/mixers/gated_deltanet.h"
#include "model/mixers/lightning.h"
#include "model/model.h"

namespace hypic::bench {
namespace {

using kernels::Family;
using kernels::LaDims;
using kernels::LaInputs;

// One sequence's kernel inputs for a family (shapes as kernels/linear_attn.h).
struct FamilyInputs {
  int L = 0;
  float scale = 1.0f;
  std::vector<float> q, k, v, g, beta, lld;
  LaInputs at(int t0, int n, const LaDims& d) const {
    LaInputs in;
    in.L = n;
    in.q = q.data() + int64_t(t0) * d.nk * d.dk;
    in.k = k.data() + int64_t(t0) * d.nk * d.dk;
    in.v = v.data() + int64_t(t0) * d.nv * d.dv;
    const int64_t gr = g.empty() ? 0 : int64_t(g.size()) / L;
    in.g = g.empty() ? nullptr : g.data() + t0 * gr;
    in.beta = beta.empty() ? nullptr : beta.data() + int64_t(t0) * d.nv;
    in.lightning_log_decay = lld.empty() ? nullptr : lld.data();
    in.scale = scale;
    return in;
  }
};

float logsigmoid(float x) { return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x)); }

void l2norm_rows(std::vector<float>& x, int dh, float scale) {
  for (size_t r = 0; r < x.size() / size_t(dh); ++r) {
    float* p = x.data() + r * size_t(dh);
    double ss = 0;
    for (int i = 0; i < dh; ++i) ss += double(p[i]) * p[i];
    const float inv = float(1.0 / std::sqrt(ss + 1e-6)) * scale;
    for (int i = 0; i < dh; ++i) p[i] *= inv;
  }
}

// Realistic ranges per family (the initialisations of the reference implementations):
//   linear     q, k L2-normalised (q × dk^−½), no gate
//   retnet     q, k ~ N(0, 1), scale dk^−½, g_h = log(1 − 2^{−5−h}) (torchscale)
//   lightning  q, k ~ N(0, 1), scale dk^−½, λ from the ALiBi slopes, layer 1 of 20
//   mamba2     x, B, C, dt ~ N(0, 1), dt_bias = softplus⁻¹(log-U[0.001, 0.1]),
//              A_log = log U[1, 16], through mamba2_kernel_inputs (k = B, q = C, scale 1)
//   gla        q, k ~ N(0, 1), scale dk^−½, g = logsigmoid(N(0, 2²))/16 per channel
//   deltanet   q, k L2-normalised (q × dk^−½), β = sigmoid(N(0, 1))
//   gdn        as deltanet, g = −exp(A_log)·softplus(a + dt_bias), A_log = log U[1, 16],
//              dt_bias as Mamba2, a ~ N(0, 1)   (transformers' Qwen3-Next initialisation)
//   kda        as gdn with the gate per channel (dt_bias per channel)
FamilyInputs make_inputs(Family f, const LaDims& d, int L, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nrm(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(0.0f, 1.0f);
  FamilyInputs in;
  in.L = L;
  auto fill = [&](std::vector<float>& x, size_t n) {
    x.resize(n);
    for (auto& e : x) e = nrm(rng);
  };
  fill(in.q, size_t(L) * d.nk * d.dk);
  fill(in.k, in.q.size());
  fill(in.v, size_t(L) * d.nv * d.dv);
  const float rs = float(1.0 / std::sqrt(double(d.dk)));
  auto dt_bias = [&]() {  // softplus⁻¹ of dt log-uniform in [0.001, 0.1]
    const double dt = std::exp(std::log(0.001) + uni(rng) * (std::log(0.1) - std::log(0.001)));
    return float(dt + std::log(-std::expm1(-dt)));
  };
  auto sigmoid_fill = [&]() {
    in.beta.resize(size_t(L) * d.nv);
    for (auto& b : in.beta) b = kernels::sigmoid(nrm(rng));
  };
  switch (f) {
    case Family::kLinear:
      l2norm_rows(in.q, d.dk, rs);
      l2norm_rows(in.k, d.dk, 1.0f);
      break;
    case Family::kRetNet:
      in.scale = rs;
      in.g.resize(size_t(L) * d.nv);
      for (int t = 0; t < L; ++t)
        for (int h = 0; h < d.nv; ++h)
          in.g[size_t(t) * d.nv + h] = float(std::log1p(-std::exp2(-5.0 - h)));
      break;
    case Family::kLightning:
      in.scale = rs;
      in.lld = kernels::lightning_log_decay(d.nv, 1, 20, 0);
      break;
    case Family::kMamba2: {
      std::vector<float> x = in.v, dt(size_t(L) * d.nv), bias(size_t(d.nv)), alog(size_t(d.nv));
      for (auto& e : dt) e = nrm(rng);
      for (auto& e : bias) e = dt_bias();
      for (auto& e : alog) e = std::log(1.0f + 15.0f * uni(rng));
      in.g.resize(size_t(L) * d.nv);
      kernels::mamba2_kernel_inputs(L, d.nv, d.dv, x.data(), dt.data(), bias.data(), alog.data(),
                                    in.v.data(), in.g.data());
      break;
    }
    case Family::kGla:
      in.scale = rs;
      in.g.resize(size_t(L) * d.nv * d.dk);
      for (auto& e : in.g) e = logsigmoid(2.0f * nrm(rng)) / 16.0f;
      break;
    case Family::kDeltaNet:
      l2norm_rows(in.q, d.dk, rs);
      l2norm_rows(in.k, d.dk, 1.0f);
      sigmoid_fill();
      break;
    case Family::kGatedDeltaNet:
    case Family::kKda: {
      l2norm_rows(in.q, d.dk, rs);
      l2norm_rows(in.k, d.dk, 1.0f);
      sigmoid_fill();
      const bool chan = f == Family::kKda;
      const int64_t row = chan ? int64_t(d.nv) * d.dk : d.nv;
      std::vector<float> alog(size_t(d.nv)), bias(static_cast<size_t>(row));
      for (auto& e : alog) e = std::log(1.0f + 15.0f * uni(rng));
      for (auto& e : bias) e = dt_bias();
      in.g.resize(size_t(L) * row);
      for (int t = 0; t < L; ++t)
        for (int64_t j = 0; j < row; ++j) {
          const int h = int(chan ? j / d.dk : j);
          in.g[size_t(t * row + j)] =
              -std::exp(alog[size_t(h)]) * kernels::softplus(nrm(rng) + bias[size_t(j)]);
        }
      break;
    }
  }
  return in;
}

// Default shape: 16 heads of 128 × 128; Gated DeltaNet as Qwen3.5 (16 key / 32 value heads);
// Mamba2 with one B/C group (ngroups = 1).
LaDims dims_for(Family f, int heads, int dk, int dv, bool heads_given) {
  LaDims d{heads, heads, dk, dv};
  if (f == Family::kGatedDeltaNet && !heads_given) d = {16, 32, dk, dv};
  if (f == Family::kMamba2) d.nk = 1;
  return d;
}

double norm2(const float* a, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += double(a[i]) * a[i];
  return s;
}
double diff2(const float* a, const float* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return s;
}

struct Timings {
  double prefill = 1e30, build = 1e30, fused = 1e30, compose = 1e30;
};

struct Result1 {
  nlohmann::json j;
  Timings t;
};

// The model's Lightning layer instead of the default inputs: its decay; with RoPE, keys and
// queries rotated at their absolute positions 0…P+L−1 (`in`) and the segment's keys again at
// canonical positions 0…L−1 (`canon`, what its cached entry is built from).
struct LayerShape {
  std::vector<float> decay;
  int rot = 0;
  float theta = 0;
};

// NeoX RoPE on the first `rot` dims of x [L, nh, hd] at positions pos0…, with angles in double
// (pos·θ^(−2j/rot)): the exact rotation, so that the composition's error is measured rather
// than fp32 RoPE's (an fp32 angle at position 4000 is off by up to ~2e−4 rad, and the
// forward pass and transformers both carry that).
void rope_exact(float* x, int64_t L, int nh, int hd, int rot, double theta, int64_t pos0) {
  const int half = rot / 2;
  for (int64_t t = 0; t < L; ++t)
    for (int j = 0; j < half; ++j) {
      const double f = double(pos0 + t) * std::pow(theta, -2.0 * j / rot);
      const double c = std::cos(f), sn = std::sin(f);
      for (int h = 0; h < nh; ++h) {
        float* v = x + (t * nh + h) * hd;
        const double a = v[j], b = v[j + half];
        v[j] = float(a * c - b * sn);
        v[j + half] = float(b * c + a * sn);
      }
    }
}

Result1 run_family(Family f, const LaDims& d, int L, int P, int reps, uint32_t seed,
                   const LayerShape* layer = nullptr) {
  auto la = kernels::make_linear_attention(f, d);
  FamilyInputs in = make_inputs(f, d, P + L, seed);
  FamilyInputs canon;
  const int rot = layer ? layer->rot : 0;
  if (layer && !layer->decay.empty()) in.lld = layer->decay;
  if (rot > 0) {
    canon = in;
    const int64_t kw = int64_t(d.nk) * d.dk;
    rope_exact(canon.k.data() + P * kw, L, d.nk, d.dk, rot, layer->theta, 0);
    rope_exact(in.k.data(), P + L, d.nk, d.dk, rot, layer->theta, 0);
    rope_exact(in.q.data(), P + L, d.nk, d.dk, rot, layer->theta, 0);
  }
  const size_t hs = size_t(d.dk) * d.dv, ns = size_t(d.nv) * hs;
  std::vector<float> Sp(ns, 0.0f), out(size_t(P + L) * d.nv * d.dv);
  if (P > 0) la->prefill(in.at(0, P, d), Sp.data(), out.data());
  const LaInputs seg = rot > 0 ? canon.at(P, L, d) : in.at(P, L, d);  // what the entry sees
  std::vector<float> direct = Sp;
  la->prefill(in.at(P, L, d), direct.data(), out.data());
  kernels::Transition T;
  std::vector<float> s0(ns);
  la->build_transition(seg, &T, s0.data());
  std::vector<float> composed = Sp, unrotated = Sp, s0r = s0;
  kernels::transition_compose(T, d.dv, s0.data(), unrotated.data());
  if (rot > 0) kernels::rerotate_state(d.nv, d.dk, d.dv, rot, layer->theta, P, s0r.data());
  kernels::transition_compose(T, d.dv, s0r.data(), composed.data());

  double cmax = 0, naive_num = 0, den_all = 0;
  std::vector<double> naive_head(size_t(d.nv)), naive_vs_prefix(size_t(d.nv)), comp_head(size_t(d.nv));
  std::vector<float> naive(ns);
  for (size_t i = 0; i < ns; ++i) naive[i] = Sp[i] + s0r[i];
  const double unrotated_err = std::sqrt(diff2(unrotated.data(), direct.data(), ns) /
                                         norm2(direct.data(), ns));
  for (int h = 0; h < d.nv; ++h) {
    const size_t o = size_t(h) * hs;
    const double den = norm2(direct.data() + o, hs);
    const double e = std::sqrt(diff2(composed.data() + o, direct.data() + o, hs) / den);
    const double nn = diff2(naive.data() + o, direct.data() + o, hs);
    comp_head[size_t(h)] = e;
    cmax = std::max(cmax, e);
    naive_head[size_t(h)] = std::sqrt(nn / den);
    naive_vs_prefix[size_t(h)] = std::sqrt(nn / std::max(norm2(Sp.data() + o, hs), 1e-300));
    naive_num += nn;
    den_all += den;
  }

  // Timings: plain prefill from zero (with outputs), build_transition, and for the delta
  // rule the fused build (outputs + T + S in one pass); interleaved, best of reps.
  Result1 r;
  std::vector<float> st(ns), st2 = Sp, ob(size_t(L) * d.nv * d.dv);
  for (int rep = 0; rep <= reps; ++rep) {  // rep 0 warms up
    std::fill(st.begin(), st.end(), 0.0f);
    Timer t;
    la->prefill(seg, st.data(), ob.data());
    const double tp = t.seconds();
    t.reset();
    la->build_transition(seg, &T, s0.data());
    const double tb = t.seconds();
    double tf = 1e30;
    if (la->fused_build()) {
      t.reset();
      la->build_transition_with_outputs(seg, &T, s0.data(), ob.data());
      tf = t.seconds();
    }
    if (rep == 0) continue;
    r.t.prefill = std::min(r.t.prefill, tp);
    r.t.build = std::min(r.t.build, tb);
    r.t.fused = std::min(r.t.fused, tf);
  }
  for (int rep = 0; rep < std::max(20, reps); ++rep) {
    st2 = Sp;
    Timer t;
    kernels::transition_compose(T, d.dv, s0.data(), st2.data());
    r.t.compose = std::min(r.t.compose, t.seconds());
  }

  auto& j = r.j;
  j["family"] = kernels::family_name(f);
  j["tokens"] = L;
  j["compose_max_rel_err"] = cmax;
  if (rot > 0) {
    j["rotary_dim"] = rot;
    j["compose_no_rerotate_rel_err"] = unrotated_err;
  }
  j["naive_add_rel_err"] = std::sqrt(naive_num / den_all);
  j["build_overhead_ratio"] = (r.t.build - r.t.prefill) / r.t.prefill;
  j["compose_us"] = r.t.compose * 1e6;
  j["prefix_tokens"] = P;
  j["dims"] = {{"nk", d.nk}, {"nv", d.nv}, {"dk", d.dk}, {"dv", d.dv}};
  j["transition_form"] = kernels::transition_form_name(la->transition_form());
  j["transition_bytes"] = T.bytes();
  j["threads"] = num_threads();
  j["prefill_ms"] = r.t.prefill * 1e3;
  j["build_ms"] = r.t.build * 1e3;
  // The cold path needs the prefill's outputs and (T, S): with separate calls it pays the
  // whole build on top; the delta rule's fused pass pays only its extra columns.
  j["separate_build_ratio"] = r.t.build / r.t.prefill;
  if (la->fused_build()) {
    j["fused_build_ms"] = r.t.fused * 1e3;
    j["fused_overhead_ratio"] = (r.t.fused - r.t.prefill) / r.t.prefill;
  }
  j["compose_rel_err_per_head"] = comp_head;
  j["naive_add_rel_err_per_head"] = naive_head;
  if (f == Family::kRetNet) {
    // The paper's check: the slowest-decaying head (largest h: γ = 1 − 2^{−5−h}).
    const int h = d.nv - 1;
    j["slowest_head"] = h;
    j["slowest_head_gamma"] = 1.0 - std::exp2(-5.0 - h);
    j["naive_add_rel_err_slowest_head"] = naive_head[size_t(h)];
    j["naive_add_err_vs_prefix_state_slowest_head"] = naive_vs_prefix[size_t(h)];
    j["naive_add_err_vs_prefix_state_per_head"] = naive_vs_prefix;
  }
  return r;
}

// Forward time of a model over L random tokens (best of reps) and its linear-layer count.
}  // namespace

Result<ModelForward> measure_forward(const std::string& dir, int tokens, int reps) {
  LoadOptions lo;
  lo.progress = false;
  auto model = Model::load(dir, lo);
  if (!model) return model.status();
  const Model& m = **model;
  const auto& c = m.config();
  ModelForward r;
  r.dir = dir;
  for (int l = 0; l < int(c.layers.size()); ++l) r.linear_layers += !c.is_full(l);
  r.dims = {int(c.linear.key_heads), int(c.linear.value_heads), int(c.linear.key_head_dim),
            int(c.linear.value_head_dim)};
  if (c.uses(lightning_type())) {
    const ModelConfig::Lightning& l = c.lightning;
    r.family = Family::kLightning;
    r.dims = {int(l.heads), int(l.heads), int(l.head_dim), int(l.head_dim)};
    int first = 0;
    while (c.layer(first).token != &lightning_type()) ++first;
    r.lightning_decay = lightning_layer_decay(c, first);
    r.rotary_dim = int(l.rotary_dim);
    r.rope_theta = float(c.rope_theta);
  } else if (!c.uses(gated_deltanet_type())) {
    return unsupported(dir + ": bench compose --model measures Gated DeltaNet or Lightning "
                       "layers; this model has neither");
  }
  std::mt19937 rng(1);
  auto best = best_forward_seconds(m, random_tokens(rng, tokens, c.vocab_size), reps);
  if (!best) return best.status();
  r.seconds = *best;
  return r;
}

nlohmann::json bench_compose_family(Family f, const ComposeBenchOptions& o, const ModelForward* model) {
  int P = 0;
  if (o.prefix) {
    P = *o.prefix;
  } else {
    std::mt19937 rng(o.seed * 7919u);
    P = int(o.tokens + int64_t(rng() % uint32_t(3 * int64_t(o.tokens) + 1)));
  }
  LaDims d = dims_for(f, o.heads, o.dk, o.dv, o.heads_given);
  const bool with_model = model && f == model->family;
  LayerShape layer;
  if (with_model) {
    d = model->dims;  // the model's own linear layer
    layer = {model->lightning_decay, model->rotary_dim, model->rope_theta};
  }
  Result1 r = run_family(f, d, o.tokens, P, o.reps, o.seed, with_model ? &layer : nullptr);
  if (with_model) {
    // Per layer extra × linear layers / whole forward, for each way of getting (T, S).
    const double fwd = model->seconds;
    const int n_linear = model->linear_layers;
    r.j["model"] = model->dir;
    r.j["forward_ms"] = fwd * 1e3;
    r.j["linear_layers"] = n_linear;
    r.j["build_overhead_vs_forward"] = n_linear * (r.t.build - r.t.prefill) / fwd;
    r.j["separate_build_vs_forward"] = n_linear * r.t.build / fwd;
    if (r.t.fused < 1e30)  // families with a fused build (the delta rule)
      r.j["fused_overhead_vs_forward"] = n_linear * (r.t.fused - r.t.prefill) / fwd;
    r.j["prefill_vs_forward"] = n_linear * r.t.prefill / fwd;
  }
  return r.j;
}

}  // namespace hypic::bench
