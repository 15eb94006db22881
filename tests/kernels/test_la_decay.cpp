// The decay families (vanilla linear attention, RetNet / simple GLA, Lightning, Mamba2 SSD,
// GLA) against the plain token-by-token recurrence (reference_la.h), and the transition
// algebra of SPEC §2 on them.
//
// Error measure: normalised error ‖a − b‖ / ‖b‖ over the whole state, and over all outputs
// ‖a − b‖ / ‖b⁺‖ with b⁺ the same recurrence run on |q|, |k|, |v|, |S₀| (same decays): the
// sum of the magnitudes of the terms each output adds up. Rounding scales with those
// terms, not with the result, and an output is a dot product q·(…) that may cancel: at
// L = 1 every output of a head is the one number q·k times v, and a q·k near 0 leaves
// nothing for ‖b‖ to average over. (States have no such product inside.)
//
// Tolerance (fp32, ε = 2^−24). An output entry is scale·(the read of the incoming chunk
// state: a dk-term dot product) + (the intra-chunk mixing: ≤ 64 terms); a state entry is a
// sum over all L tokens, formed as ≤ 64-term GEMM sums per chunk plus one fp32 addition per
// chunk to the decayed running state. Each term carries a few roundings of its own (the
// products, one exp of a double-exact exponent difference ≈ 1 ulp; GLA's diagonal blocks a
// running product of ≤ 15 factors). With random-signed data the rounding errors of a
// recursive n-term sum add in quadrature to ≈ √n·ε relative to the sum, so with
// n ≤ dk + 64 + L (all accumulations one output or state entry goes through, taken together)
//     tol = c · √(dk + 64 + L) · ε,   c = 8 (the few roundings per term above)
// = test::fp32_tol(dk + 64 + L). The decays add no |G|·ε term: G = cumsum(g) is accumulated
// in double, so every exponent G_i − G_j is exact to fp32 before its exp. The composition
// checks add one more product and sum per entry (T·S₀ + S(C|0)), inside the same c.
// Measured (the printed worst ratio, HYPIC_LA_VERBOSE=1 for every case): outputs 3e−9 …
// 6e−8, states 2e−8 … 1.6e−7, against bounds of 4.5e−6 … 1e−5 (worst ratio ≈ 0.03). Mutations of the kernel (inter-chunk decay one token
// off, a diagonal-block gate one token off, one column of GLA's K-side decay unscaled)
// fail 24 … 146 of these checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/testutil.h"
#include "core/parallel.h"
#include "core/timer.h"
#include "kernels/decay_chunk.h"
#include "kernels/la_lightning.h"
#include "kernels/la_mamba2.h"
#include "kernels/linear_attn.h"
#include "kernels/reference_la.h"
#include "kernels/small_gemm.h"
#include "kernels/transition.h"

namespace hypic::kernels {
namespace {
using test::rel_err_d;

const Family kFamilies[] = {Family::kLinear, Family::kRetNet, Family::kLightning,
                            Family::kMamba2, Family::kGla};
// Ungrouped and grouped heads; the last with sizes that leave vector tails everywhere.
const LaDims kDims[] = {{2, 2, 32, 24}, {1, 3, 48, 40}, {2, 4, 64, 64}, {1, 2, 22, 13}};


double tolerance(const LaDims& d, int L) { return test::fp32_tol(d.dk + 64 + L); }

float logsigmoid(float x) { return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x)); }

// b⁺ of the outputs (see the top): the recurrence on |q|, |k|, |v| from |S₀|.
std::vector<double> out_magnitude(int nk, int nv, int dk, int dv, int L, const float* q,
                                  const float* k, const float* v, test::RefGate rg,
                                  const float* g, int64_t g_ld, float scale,
                                  const std::vector<float>& S0) {
  auto absv = [](const float* x, size_t n) {
    std::vector<float> r(x, x + n);
    for (auto& e : r) e = std::fabs(e);
    return r;
  };
  const auto qa = absv(q, size_t(L) * nk * dk), ka = absv(k, size_t(L) * nk * dk);
  const auto va = absv(v, size_t(L) * nv * dv);
  std::vector<double> st(S0.size()), out;
  for (size_t i = 0; i < S0.size(); ++i) st[i] = std::fabs(S0[i]);
  test::decay_reference(nk, nv, dk, dv, L, qa.data(), ka.data(), va.data(), rg, g, g_ld,
                        std::fabs(scale), st, out);
  return out;
}

// ‖a − b‖ / ‖mag‖
double err_vs_magnitude(const std::vector<float>& a, const std::vector<double>& b,
                        const std::vector<double>& mag) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += mag[i] * mag[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// One sequence's inputs for a family, in realistic ranges:
//   q, k ~ N(0, 1) (scale dk^−½), v ~ N(0, 1);
//   RetNet: even seeds the fixed RetNet decays log(1 − 2^{−5−h}), odd seeds simple GLA's
//           per-token logsigmoid(N(0, 2²))/16;
//   Lightning: lightning_log_decay(nv, layer 1 of 4), no per-token g;
//   Mamba2: raw x, B, C, dt ~ N(0, 1), dt_bias ∈ [−4, 0], A_log = log U(1, 16) through
//           mamba2_kernel_inputs (Δ up to ~2, g down to ~−30 per token), scale 1;
//   GLA: logsigmoid(N(0, 2²))/16 per channel, and in every head ~1/8 of the channels strongly
//        negative (−2 … −40 per token: e^{G} underflows within a chunk).
struct Seq {
  Family f;
  LaDims d;
  int L = 0;
  float scale = 1.0f;
  std::vector<float> q, k, v, g, lld;
  int64_t g_row = 0;  // floats of g per token
  test::RefGate rg = test::RefGate::kNone;

  LaInputs inputs(int t0, int n, bool with_q = true) const {
    LaInputs in;
    in.L = n;
    in.q = with_q ? q.data() + size_t(t0) * d.nk * d.dk : nullptr;
    in.k = k.data() + size_t(t0) * d.nk * d.dk;
    in.v = v.data() + size_t(t0) * d.nv * d.dv;
    in.g = g.empty() ? nullptr : g.data() + t0 * g_row;
    in.lightning_log_decay = lld.empty() ? nullptr : lld.data();
    in.scale = scale;
    return in;
  }
  LaInputs all() const { return inputs(0, L); }
  // Plain recurrence over rows [t0, t0 + n) from `state` (double, in/out).
  void reference(int t0, int n, std::vector<double>& state, std::vector<double>& out,
                 bool with_q = true) const {
    const LaInputs in = inputs(t0, n, with_q);
    const float* gr = in.g ? in.g : in.lightning_log_decay;
    test::decay_reference(d.nk, d.nv, d.dk, d.dv, n, in.q, in.k, in.v, rg, gr,
                          in.g ? g_row : 0, scale, state, out);
  }
  // b⁺ of the outputs over rows [t0, t0 + n) from S0.
  std::vector<double> magnitude(int t0, int n, const std::vector<float>& S0) const {
    const LaInputs in = inputs(t0, n);
    return out_magnitude(d.nk, d.nv, d.dk, d.dv, n, in.q, in.k, in.v, rg,
                         in.g ? in.g : in.lightning_log_decay, in.g ? g_row : 0, scale, S0);
  }
  size_t state_size() const { return size_t(d.nv) * d.dk * d.dv; }
  size_t out_size(int n) const { return size_t(n) * d.nv * d.dv; }
};

Seq make_seq(Family f, const LaDims& d, int L, uint32_t seed) {
  Seq s;
  s.f = f;
  s.d = d;
  s.L = L;
  std::mt19937 rng(seed);
  std::normal_distribution<float> nrm(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(0.0f, 1.0f);
  auto fill = [&](std::vector<float>& x, size_t n) {
    x.resize(n);
    for (auto& e : x) e = nrm(rng);
  };
  fill(s.q, size_t(L) * d.nk * d.dk);
  fill(s.k, size_t(L) * d.nk * d.dk);
  fill(s.v, size_t(L) * d.nv * d.dv);
  s.scale = 1.0f / std::sqrt(float(d.dk));
  switch (f) {
    case Family::kLinear: break;
    case Family::kRetNet:
      s.rg = test::RefGate::kScalar;
      s.g_row = d.nv;
      s.g.resize(size_t(L) * d.nv);
      if (seed % 2 == 0) {
        const auto gh = test::retnet_log_decay_reference(d.nv);
        for (size_t i = 0; i < s.g.size(); ++i) s.g[i] = gh[i % size_t(d.nv)];
      } else {
        for (auto& e : s.g) e = logsigmoid(2.0f * nrm(rng)) / 16.0f;
      }
      break;
    case Family::kLightning:
      s.rg = test::RefGate::kScalar;
      s.lld = lightning_log_decay(d.nv, 1, 4, 0);
      break;
    case Family::kMamba2: {
      s.rg = test::RefGate::kScalar;
      s.g_row = d.nv;
      s.scale = 1.0f;
      std::vector<float> x, dt, dt_bias(size_t(d.nv)), A_log(size_t(d.nv));
      fill(x, size_t(L) * d.nv * d.dv);
      fill(dt, size_t(L) * d.nv);
      for (int h = 0; h < d.nv; ++h) {
        dt_bias[size_t(h)] = -4.0f * uni(rng);
        A_log[size_t(h)] = std::log(1.0f + 15.0f * uni(rng));
      }
      s.g.resize(size_t(L) * d.nv);
      mamba2_kernel_inputs(L, d.nv, d.dv, x.data(), dt.data(), dt_bias.data(), A_log.data(),
                           s.v.data(), s.g.data());
      break;
    }
    case Family::kGla: {
      s.rg = test::RefGate::kVector;
      s.g_row = int64_t(d.nv) * d.dk;
      s.g.resize(size_t(L) * d.nv * d.dk);
      std::vector<char> strong(size_t(d.nv) * d.dk);
      for (auto& c : strong) c = uni(rng) < 0.125f;
      for (size_t i = 0; i < s.g.size(); ++i)
        s.g[i] = strong[i % strong.size()] ? -2.0f - 38.0f * uni(rng)
                                           : logsigmoid(2.0f * nrm(rng)) / 16.0f;
      break;
    }
    default: ADD_FAILURE() << "not a decay family";
  }
  return s;
}

std::vector<float> random_state(const Seq& s, uint32_t seed) {
  return test::randn(s.state_size(), seed, 3.0f);
}

std::string label(const Seq& s) {
  return std::string(family_name(s.f)) + " nk=" + std::to_string(s.d.nk) +
         " nv=" + std::to_string(s.d.nv) + " dk=" + std::to_string(s.d.dk) +
         " dv=" + std::to_string(s.d.dv) + " L=" + std::to_string(s.L);
}

TEST(DecayFamilies, FormsAndFactory) {
  for (Family f : kFamilies) {
    const auto la = make_linear_attention(f, LaDims{1, 2, 16, 8});
    ASSERT_TRUE(la);
    EXPECT_EQ(la->family(), f);
    const TransitionForm want = f == Family::kLinear ? TransitionForm::kIdentity
                                : f == Family::kGla  ? TransitionForm::kLogVector
                                                     : TransitionForm::kLogScalar;
    EXPECT_EQ(la->transition_form(), want) << family_name(f);
  }
}

// Restores the process-wide small_gemm ISA choice.
struct IsaGuard {
  ~IsaGuard() { set_isa(Isa::kAuto); }
};

TEST(DecayFamilies, PrefillMatchesRecurrence) {
  IsaGuard guard;
  double worst = 0;
  for (Isa isa : {Isa::kAuto, Isa::kGeneric}) {
  set_isa(isa);
  uint32_t seed = 1000;
  for (Family f : kFamilies)
    for (const LaDims& d : kDims)
      for (int L : {1, 63, 64, 65, 300})
        for (bool warm : {false, true}) {
          const Seq s = make_seq(f, d, L, ++seed);
          const auto la = make_linear_attention(f, d);
          std::vector<float> state = warm ? random_state(s, seed + 7) : std::vector<float>(s.state_size(), 0.0f);
          std::vector<double> ref_state(state.begin(), state.end()), ref_out;
          s.reference(0, L, ref_state, ref_out);
          const auto mag = s.magnitude(0, L, state);
          std::vector<float> out(s.out_size(L), std::nanf(""));
          la->prefill(s.all(), state.data(), out.data());
          const double eo = err_vs_magnitude(out, ref_out, mag), es = rel_err_d(state, ref_state);
          const double tol = tolerance(d, L);
          worst = std::max({worst, eo / tol, es / tol});
          if (std::getenv("HYPIC_LA_VERBOSE"))
            std::printf("%s %s%s: out %.2e state %.2e tol %.2e\n", label(s).c_str(),
                        warm ? "warm" : "zero", isa == Isa::kGeneric ? " generic" : "", eo, es, tol);
          EXPECT_LT(eo, tol) << label(s) << (warm ? " warm" : " zero") << " out"
                             << (isa == Isa::kGeneric ? " generic" : "");
          EXPECT_LT(es, tol) << label(s) << (warm ? " warm" : " zero") << " state"
                             << (isa == Isa::kGeneric ? " generic" : "");
        }
  }
  std::printf("[la-decay] prefill vs recurrence: worst error / tolerance = %.3g\n", worst);
}

// However the heads are split into tasks (one task for all heads with 1 thread; with 2, a
// key head's value heads split between tasks) the arithmetic per head is the same:
// identical bits.
TEST(DecayFamilies, TaskLayoutsAgree) {
  const int threads = num_threads();
  for (Family f : kFamilies) {
    const LaDims d{1, 3, 48, 40};
    const Seq s = make_seq(f, d, 150, 77);
    const auto la = make_linear_attention(f, d);
    const auto s0 = random_state(s, 78);
    std::vector<float> st1 = s0, st2 = s0, o1(s.out_size(s.L)), o2(o1.size());
    set_num_threads(1);  // one task: heads 0..2
    la->prefill(s.all(), st1.data(), o1.data());
    set_num_threads(std::max(2, threads));  // tasks [0, 2) and [2, 3)
    la->prefill(s.all(), st2.data(), o2.data());
    set_num_threads(threads);
    EXPECT_EQ(0, std::memcmp(o1.data(), o2.data(), o1.size() * sizeof(float))) << family_name(f);
    EXPECT_EQ(0, std::memcmp(st1.data(), st2.data(), st1.size() * sizeof(float))) << family_name(f);
  }
}

TEST(DecayFamilies, SplitPrefillEqualsWhole) {
  for (Family f : kFamilies)
    for (const LaDims& d : {kDims[0], kDims[1]})
      for (auto [L1, L2] : {std::pair{64, 64}, {37, 100}, {1, 256}, {130, 3}}) {
        const int L = L1 + L2;
        const Seq s = make_seq(f, d, L, uint32_t(7 * L1 + L2));
        const auto la = make_linear_attention(f, d);
        const auto s0 = random_state(s, 5);
        std::vector<float> sw = s0, ow(s.out_size(L)), ss = s0, os(ow.size());
        la->prefill(s.all(), sw.data(), ow.data());
        la->prefill(s.inputs(0, L1), ss.data(), os.data());
        la->prefill(s.inputs(L1, L2), ss.data(), os.data() + s.out_size(L1));
        const double tol = tolerance(d, L);
        EXPECT_LT(test::rel_err(os, ow), tol) << label(s) << " split " << L1 << "+" << L2;
        EXPECT_LT(test::rel_err(ss, sw), tol) << label(s) << " split " << L1 << "+" << L2;
      }
}

// build_transition_with_outputs, for families without a fused pass, is exactly a zero-state
// prefill plus build_transition.
TEST(DecayFamilies, BuildWithOutputsIsPrefillPlusBuild) {
  for (Family f : kFamilies) {
    const Seq s = make_seq(f, kDims[0], 100, 31);
    const auto la = make_linear_attention(f, kDims[0]);
    EXPECT_FALSE(la->fused_build()) << label(s);
    Transition Ta, Tb;
    std::vector<float> sa(s.state_size()), sb(sa.size()), oa(s.out_size(s.L)), ob(oa.size());
    std::vector<float> st(s.state_size(), 0.0f);
    la->prefill(s.all(), st.data(), oa.data());
    la->build_transition(s.all(), &Ta, sa.data());
    la->build_transition_with_outputs(s.all(), &Tb, sb.data(), ob.data());
    EXPECT_EQ(oa, ob) << label(s);
    EXPECT_EQ(sa, sb) << label(s);
    EXPECT_EQ(Ta.data, Tb.data) << label(s);
  }
}

TEST(DecayFamilies, StepMatchesPrefillAndRecurrence) {
  for (Family f : kFamilies)
    for (const LaDims& d : {kDims[1], kDims[2]}) {
      const int L = 70;
      const Seq s = make_seq(f, d, L, 4242);
      const auto la = make_linear_attention(f, d);
      const auto s0 = random_state(s, 4243);
      std::vector<float> s_step = s0, s_whole = s0;
      std::vector<float> o_step(s.out_size(L)), o_whole(o_step.size());
      for (int t = 0; t < L; ++t) {
        float* sp = s_step.data();
        la->step(s.inputs(t, 1), &sp, o_step.data() + s.out_size(t));
      }
      la->prefill(s.all(), s_whole.data(), o_whole.data());
      std::vector<double> ref_state(s0.begin(), s0.end()), ref_out;
      s.reference(0, L, ref_state, ref_out);
      const double tol = tolerance(d, L);
      EXPECT_LT(test::rel_err(o_step, o_whole), tol) << label(s);
      EXPECT_LT(test::rel_err(s_step, s_whole), tol) << label(s);
      EXPECT_LT(err_vs_magnitude(o_step, ref_out, s.magnitude(0, L, s0)), tol) << label(s);
      EXPECT_LT(rel_err_d(s_step, ref_state), tol) << label(s);
    }
}

// B sequences in one step call: row b of every input is sequence b's token. Same
// per-(sequence, head) arithmetic as separate calls: identical bits.
TEST(DecayFamilies, StepBatchEqualsSeparateCalls) {
  for (Family f : kFamilies) {
    const LaDims d = kDims[2];
    const int B = 3;
    const Seq s = make_seq(f, d, B, 91);
    const auto la = make_linear_attention(f, d);
    std::vector<std::vector<float>> st, st_sep;
    for (int b = 0; b < B; ++b) st.push_back(random_state(s, uint32_t(200 + b)));
    st_sep = st;
    std::vector<float*> ptrs;
    for (auto& x : st) ptrs.push_back(x.data());
    std::vector<float> out(s.out_size(B)), out_sep(out.size());
    la->step(s.all(), ptrs.data(), out.data());
    for (int b = 0; b < B; ++b) {
      float* sp = st_sep[size_t(b)].data();
      la->step(s.inputs(b, 1), &sp, out_sep.data() + s.out_size(b));
    }
    EXPECT_EQ(0, std::memcmp(out.data(), out_sep.data(), out.size() * sizeof(float))) << family_name(f);
    for (int b = 0; b < B; ++b)
      EXPECT_EQ(0, std::memcmp(st[size_t(b)].data(), st_sep[size_t(b)].data(),
                               st[size_t(b)].size() * sizeof(float)))
          << family_name(f);
  }
}

// Σ of the log gates per head (per channel for GLA) in double: the exact log of T_C.
std::vector<double> log_t_reference(const Seq& s, int t0, int n) {
  const LaDims& d = s.d;
  const int w = s.f == Family::kGla ? d.dk : 1;
  std::vector<double> t(size_t(d.nv) * w, 0.0);
  if (s.f == Family::kLinear) return {};
  for (int i = t0; i < t0 + n; ++i)
    for (size_t j = 0; j < t.size(); ++j)
      t[j] += s.g.empty() ? double(s.lld[j]) : double(s.g[size_t(i) * s.g_row + j]);
  return t;
}

// build_transition (q unused: passed null) gives T in its form with log T = Σg, and
// S(C | S₀) = T_C·S₀ + S(C|0) (transition_compose) equals the recurrence from S₀.
TEST(DecayFamilies, TransitionComposes) {
  double worst = 0;
  for (Family f : kFamilies)
    for (const LaDims& d : kDims)
      for (int L : {1, 65, 300}) {
        const Seq s = make_seq(f, d, L, uint32_t(31 * L + d.dk));
        const auto la = make_linear_attention(f, d);
        Transition T;
        std::vector<float> s0(s.state_size(), std::nanf(""));
        la->build_transition(s.inputs(0, L, /*with_q=*/false), &T, s0.data());
        ASSERT_EQ(T.form, la->transition_form());
        ASSERT_EQ(T.nv, d.nv);
        ASSERT_EQ(T.dk, d.dk);
        const auto tlog = log_t_reference(s, 0, L);
        ASSERT_EQ(T.data.size(), tlog.size()) << label(s);
        if (!tlog.empty()) {
          EXPECT_LT(rel_err_d(T.data, tlog), 4 * 5.96e-8) << label(s);
        }

        std::vector<double> ref0(s.state_size(), 0.0), unused;
        s.reference(0, L, ref0, unused, false);
        const double tol = tolerance(d, L);
        EXPECT_LT(rel_err_d(s0, ref0), tol) << label(s) << " S(C|0)";

        const auto S0 = random_state(s, 99);
        std::vector<float> composed = S0;
        transition_compose(T, d.dv, s0.data(), composed.data());
        std::vector<double> ref(S0.begin(), S0.end());
        s.reference(0, L, ref, unused, false);
        const double e = rel_err_d(composed, ref);
        worst = std::max(worst, e / tol);
        EXPECT_LT(e, tol) << label(s) << " T·S0 + S(C|0)";
      }
  std::printf("[la-decay] T·S0 + S(C|0) vs recurrence from S0: worst error / tolerance = %.3g\n", worst);
}

// Four segments composed one by one equal one pass over their concatenation, and
// transition_chain of their T equals T of the concatenation.
TEST(DecayFamilies, SegmentsComposeLikeConcatenation) {
  const int lens[4] = {37, 64, 100, 29};
  const int L = 37 + 64 + 100 + 29;
  for (Family f : kFamilies)
    for (const LaDims& d : kDims) {
      const Seq s = make_seq(f, d, L, uint32_t(500 + d.nv));
      const auto la = make_linear_attention(f, d);
      const auto S_init = random_state(s, 501);
      std::vector<float> composed = S_init, s0(s.state_size());
      Transition chain = Transition::identity(la->transition_form(), d.nv, d.dk);
      for (int i = 0, t0 = 0; i < 4; t0 += lens[i], ++i) {
        Transition T;
        la->build_transition(s.inputs(t0, lens[i], false), &T, s0.data());
        transition_compose(T, d.dv, s0.data(), composed.data());
        chain = transition_chain(chain, T);
      }
      std::vector<float> whole = S_init, out(s.out_size(L));
      la->prefill(s.all(), whole.data(), out.data());
      std::vector<double> ref(S_init.begin(), S_init.end()), unused;
      s.reference(0, L, ref, unused, false);
      const double tol = tolerance(d, L);
      EXPECT_LT(test::rel_err(composed, whole), tol) << label(s);
      EXPECT_LT(rel_err_d(composed, ref), tol) << label(s);

      Transition Tw;
      la->build_transition(s.inputs(0, L, false), &Tw, s0.data());
      ASSERT_EQ(chain.form, Tw.form);
      ASSERT_EQ(chain.data.size(), Tw.data.size());
      // Four fp32 partial sums added against one: a few roundings of the total.
      EXPECT_LT(test::rel_err(chain.data, Tw.data), 8 * 5.96e-8) << label(s);
    }
}

// Vanilla linear attention with the normaliser: v gets a column of ones, the state's last
// column is z = z₀ + Σk, the output's last column scale·qᵀz; z composes additively (T = I).
TEST(DecayFamilies, LinearNormaliserComposesAdditively) {
  const LaDims d0{1, 2, 32, 16};
  const LaDims d{d0.nk, d0.nv, d0.dk, d0.dv + 1};
  const int L1 = 90, L2 = 45, L = L1 + L2;
  Seq s = make_seq(Family::kLinear, d, L, 8080);
  for (int t = 0; t < L; ++t)
    for (int h = 0; h < d.nv; ++h) s.v[(size_t(t) * d.nv + h) * d.dv + d0.dv] = 1.0f;
  const auto la = make_linear_attention(Family::kLinear, d);
  auto S_init = random_state(s, 8081);
  for (int h = 0; h < d.nv; ++h)  // a positive z₀ (k here has random sign, so z does too)
    for (int i = 0; i < d.dk; ++i) S_init[(size_t(h) * d.dk + i) * d.dv + d0.dv] = 1.0f + i;
  std::vector<float> state = S_init, out(s.out_size(L));
  la->prefill(s.all(), state.data(), out.data());
  // z and the denominators, in double
  std::vector<double> z(size_t(d.nv) * d.dk), zref_state(s.state_size()), den(size_t(L) * d.nv);
  for (int h = 0; h < d.nv; ++h)
    for (int i = 0; i < d.dk; ++i) z[size_t(h) * d.dk + i] = S_init[(size_t(h) * d.dk + i) * d.dv + d0.dv];
  for (int t = 0; t < L; ++t)
    for (int h = 0; h < d.nv; ++h) {
      const float* kt = s.k.data() + (size_t(t) * d.nk + h / (d.nv / d.nk)) * d.dk;
      const float* qt = s.q.data() + (size_t(t) * d.nk + h / (d.nv / d.nk)) * d.dk;
      double acc = 0;
      for (int i = 0; i < d.dk; ++i) {
        z[size_t(h) * d.dk + i] += kt[i];
        acc += z[size_t(h) * d.dk + i] * qt[i];
      }
      den[size_t(t) * d.nv + h] = s.scale * acc;
    }
  std::vector<float> got_z, got_den;
  for (int h = 0; h < d.nv; ++h)
    for (int i = 0; i < d.dk; ++i) got_z.push_back(state[(size_t(h) * d.dk + i) * d.dv + d0.dv]);
  for (size_t r = 0; r < size_t(L) * d.nv; ++r) got_den.push_back(out[r * d.dv + d0.dv]);
  const double tol = tolerance(d, L);
  EXPECT_LT(rel_err_d(got_z, z), tol);
  EXPECT_LT(rel_err_d(got_den, den), tol);
  // Two segments: T = I for the whole state, the normaliser column included.
  std::vector<float> composed = S_init, s0(s.state_size());
  for (auto [t0, n] : {std::pair{0, L1}, {L1, L2}}) {
    Transition T;
    la->build_transition(s.inputs(t0, n, false), &T, s0.data());
    EXPECT_EQ(T.form, TransitionForm::kIdentity);
    transition_compose(T, d.dv, s0.data(), composed.data());
  }
  EXPECT_LT(test::rel_err(composed, state), tol);
}

// Lightning (and RetNet) with partial NeoX RoPE on q and k (first half of dk rotated, token t
// at position p + t): the segment built at p₀ and re-rotated by Δ (rerotate_state;
// rerotate_transition is a no-op for the scalar form) equals the segment built at p₁ = p₀ + Δ.
TEST(DecayFamilies, RerotationOfScalarDecayEqualsBuildingAtNewPosition) {
  const LaDims d{2, 4, 64, 32};
  const int L = 150, rot = d.dk / 2;
  const float theta = 10000.0f;
  const int64_t p0 = 1000, delta = 12345, p1 = p0 + delta;
  for (Family f : {Family::kLightning, Family::kRetNet}) {
    const Seq raw = make_seq(f, d, L, 606);
    Seq a = raw, b = raw;
    test::rope_neox_reference(a.k.data(), L, d.nk, d.dk, rot, theta, p0);
    test::rope_neox_reference(b.k.data(), L, d.nk, d.dk, rot, theta, p1);
    const auto la = make_linear_attention(f, d);
    Transition Ta, Tb;
    std::vector<float> sa(a.state_size()), sb(b.state_size());
    la->build_transition(a.inputs(0, L, false), &Ta, sa.data());
    la->build_transition(b.inputs(0, L, false), &Tb, sb.data());
    const std::vector<float> Ta_before = Ta.data;
    rerotate_state(d.nv, d.dk, d.dv, rot, theta, delta, sa.data());
    EXPECT_TRUE(rerotate_transition(rot, theta, delta, &Ta));
    EXPECT_EQ(Ta.data, Ta_before);
    EXPECT_EQ(Ta.data, Tb.data);
    const double tol = tolerance(d, L);
    const double e = test::rel_err(sa, sb);
    EXPECT_LT(e, tol) << family_name(f);
    // Without the re-rotation the state is plainly wrong.
    std::vector<float> sa_plain(a.state_size());
    la->build_transition(a.inputs(0, L, false), &Ta, sa_plain.data());
    const double e_plain = test::rel_err(sa_plain, sb);
    EXPECT_GT(e_plain, 0.1) << family_name(f);
    std::printf("[la-decay] %s re-rotation p0=%lld -> p1=%lld: error %.2e (unpatched %.2f)\n",
                family_name(f), (long long)p0, (long long)p1, e, e_plain);
    // And the composed state then serves queries rotated at p1: outputs of a continuation
    // from the patched state equal those from the state built at p1.
    Seq next = make_seq(f, d, 40, 607);
    test::rope_neox_reference(next.q.data(), 40, d.nk, d.dk, rot, theta, p1 + L);
    test::rope_neox_reference(next.k.data(), 40, d.nk, d.dk, rot, theta, p1 + L);
    std::vector<float> oa(next.out_size(40)), ob(oa.size());
    la->prefill(next.all(), sa.data(), oa.data());
    la->prefill(next.all(), sb.data(), ob.data());
    EXPECT_LT(test::rel_err(oa, ob), tol) << family_name(f);
  }
}

TEST(DecayFamilies, RerotateTransitionRefusesLogVector) {
  const LaDims d{1, 2, 32, 16};
  const Seq s = make_seq(Family::kGla, d, 20, 3);
  const auto la = make_linear_attention(Family::kGla, d);
  Transition T;
  std::vector<float> s0(s.state_size());
  la->build_transition(s.inputs(0, 20, false), &T, s0.data());
  ASSERT_EQ(T.form, TransitionForm::kLogVector);
  EXPECT_FALSE(rerotate_transition(16, 10000.0f, 7, &T));
}

// The paper's naive-addition check: RetNet, a 256-token segment reused after a long prefix
// (S_p ≈ stationary), heads h = 0..5 with γ_h = 1 − 2^{−5−h}. Naive addition S_p + S(C|0)
// drops (1 − γ^256)·S_p: for the slowest head (γ = 1 − 2^{−10}) 1 − γ^256 ≈ 0.22 (the paper
// reports 22 %). The composed T·S_p + S(C|0) is exact to fp32.
TEST(DecayFamilies, RetNetNaiveAdditionIsWrongComposedIsExact) {
  const LaDims d{6, 6, 64, 64};
  const int P = 4096, L = 256;
  Seq s = make_seq(Family::kRetNet, d, P + L, 2024);  // even seed: the fixed RetNet decays
  const auto la = make_linear_attention(Family::kRetNet, d);
  std::vector<float> Sp(s.state_size(), 0.0f), out(s.out_size(P));
  la->prefill(s.inputs(0, P), Sp.data(), out.data());
  Transition T;
  std::vector<float> s0(s.state_size());
  la->build_transition(s.inputs(P, L, false), &T, s0.data());
  std::vector<float> composed = Sp;
  transition_compose(T, d.dv, s0.data(), composed.data());
  std::vector<double> ref(Sp.begin(), Sp.end()), unused;
  s.reference(P, L, ref, unused, false);
  const size_t hs = size_t(d.dk) * d.dv;
  double naive_slowest = 0, composed_worst = 0;
  for (int h = 0; h < d.nv; ++h) {
    std::vector<float> naive(hs);
    for (size_t i = 0; i < hs; ++i) naive[i] = Sp[h * hs + i] + s0[h * hs + i];
    const double en = rel_err_d(naive.data(), ref.data() + h * hs, hs);
    const double ec = rel_err_d(composed.data() + h * hs, ref.data() + h * hs, hs);
    std::printf("[la-decay] RetNet head %d (gamma = 1 - 2^-%d), %d tokens after %d: naive "
                "%.1f %%, composed %.2e\n",
                h, 5 + h, L, P, 100 * en, ec);
    if (h == d.nv - 1) naive_slowest = en;
    composed_worst = std::max(composed_worst, ec);
  }
  EXPECT_GT(naive_slowest, 0.05);
  EXPECT_LE(composed_worst, 1e-5);
}

TEST(DecayFamilies, LightningDecaySchedule) {
  // H = 64: slope_h = 2^{−(h+1)/8}.
  const auto a = alibi_slopes(64);
  for (int h = 0; h < 64; ++h) EXPECT_DOUBLE_EQ(a[size_t(h)], std::exp2(-(h + 1) / 8.0));
  // H = 6 (not a power of two): ALiBi's interpolation [2^-2, 2^-4, 2^-6, 2^-8, 2^-1, 2^-3].
  const auto b = alibi_slopes(6);
  const double want[6] = {0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125};
  for (int h = 0; h < 6; ++h) EXPECT_DOUBLE_EQ(b[size_t(h)], want[h]);
  // s_{l,h} = slope_h·(1 − l/(N − 1) + 1e−5), l = layer − offset.
  const auto g = lightning_log_decay(8, 3, 9, 0);
  for (int h = 0; h < 8; ++h)
    EXPECT_FLOAT_EQ(g[size_t(h)], float(-std::exp2(-(h + 1.0)) * (1 - 3.0 / 8 + 1e-5)));
  EXPECT_EQ(lightning_log_decay(8, 4, 9, 1), lightning_log_decay(8, 3, 9, 0));
  // The last layer decays least (s ≈ 1e−5·slope), the first most.
  EXPECT_GT(lightning_log_decay(8, 8, 9, 0)[0], -1e-5);
}

TEST(DecayFamilies, MiniMaxDecaySchedule) {
  // transformers' get_slope_rate: (1/2^(8/H))^(h+1) · (1 − l/(N − 1 + 1e−5) + 1e−5).
  for (int H : {3, 6, 64})
    for (auto [l, N] : {std::pair{0, 1}, {0, 6}, {4, 6}, {5, 6}}) {
      const auto g = minimax_log_decay(H, l, N);
      ASSERT_EQ(g.size(), size_t(H));
      for (int h = 0; h < H; ++h) {
        const double rate = std::pow(1.0 / std::pow(2.0, 8.0 / H), h + 1) *
                            (1.0 - l / (N - 1 + 1e-5) + 1e-5);
        EXPECT_FLOAT_EQ(g[size_t(h)], float(-rate)) << H << " " << l << " " << N << " " << h;
      }
    }
  // H a power of two: the same slopes as ALiBi's (for the layer factor of l = 0).
  const auto a = alibi_slopes(64);
  const auto g = minimax_log_decay(64, 0, 2);
  for (int h = 0; h < 64; ++h) EXPECT_NEAR(g[size_t(h)], -a[size_t(h)] * (1 + 1e-5), 1e-7);
  // Not a power of two: no interleaving (ALiBi's 6-head slopes differ).
  EXPECT_NE(minimax_log_decay(6, 0, 2)[4], float(-alibi_slopes(6)[4] * (1 + 1e-5)));
}

// mamba2_kernel_inputs + the kernel equal the Mamba2 SSD recurrence written from the raw
// quantities: h ← e^{Δ A}·h + B (Δ x)ᵀ, y = hᵀ C (heads grouped over B and C).
TEST(DecayFamilies, Mamba2InputsMatchSsdRecurrence) {
  const int L = 130, nh = 4, ng = 2, hd = 16, ds = 32;
  std::mt19937 rng(11);
  std::normal_distribution<float> nrm(0.0f, 1.0f);
  auto rnd = [&](size_t n, float sc = 1.0f) {
    std::vector<float> x(n);
    for (auto& e : x) e = sc * nrm(rng);
    return x;
  };
  const auto x = rnd(size_t(L) * nh * hd), B = rnd(size_t(L) * ng * ds), Cm = rnd(size_t(L) * ng * ds);
  const auto dt = rnd(size_t(L) * nh), dt_bias = rnd(nh), A_log = rnd(nh, 0.5f);
  std::vector<float> v(x.size()), g(dt.size()), delta(dt.size());
  mamba2_kernel_inputs(L, nh, hd, x.data(), dt.data(), dt_bias.data(), A_log.data(), v.data(),
                       g.data(), delta.data());
  const LaDims d{ng, nh, ds, hd};
  const auto la = make_linear_attention(Family::kMamba2, d);
  LaInputs in;
  in.L = L;
  in.q = Cm.data();
  in.k = B.data();
  in.v = v.data();
  in.g = g.data();
  in.scale = 1.0f;
  std::vector<float> state(size_t(nh) * ds * hd, 0.0f), y(size_t(L) * nh * hd);
  la->prefill(in, state.data(), y.data());
  std::vector<double> hst(state.size(), 0.0), yref(y.size());
  for (int t = 0; t < L; ++t)
    for (int h = 0; h < nh; ++h) {
      const int grp = h / (nh / ng);
      const double dl = std::log1p(std::exp(double(dt[size_t(t) * nh + h]) + dt_bias[size_t(h)]));
      const double A = -std::exp(double(A_log[size_t(h)]));
      const double dA = std::exp(dl * A);
      double* S = hst.data() + size_t(h) * ds * hd;
      for (int n = 0; n < ds; ++n)
        for (int p = 0; p < hd; ++p)
          S[size_t(n) * hd + p] = dA * S[size_t(n) * hd + p] +
                                  double(B[(size_t(t) * ng + grp) * ds + n]) * dl * x[(size_t(t) * nh + h) * hd + p];
      for (int p = 0; p < hd; ++p) {
        double acc = 0;
        for (int n = 0; n < ds; ++n) acc += S[size_t(n) * hd + p] * Cm[(size_t(t) * ng + grp) * ds + n];
        yref[(size_t(t) * nh + h) * hd + p] = acc;
      }
    }
  EXPECT_LT(rel_err_d(y, yref), tolerance(d, L));
  EXPECT_LT(rel_err_d(state, hst), tolerance(d, L));
}

// Prefill, build and step throughput per family at nk = nv = 16, dk = dv = 128, L = 4096,
// all threads. FLOPs as decay_chunk::prefill_flops counts them (≈ 5.4 GFLOP for a prefill,
// 2.1 for a build). Prints, does not assert.
TEST(DecayFamilies, PrintThroughput) {
  const LaDims d{16, 16, 128, 128};
  const int L = 4096;
  for (Family f : kFamilies) {
    const Seq s = make_seq(f, d, L, 31337);
    const auto la = make_linear_attention(f, d);
    std::vector<float> state(s.state_size()), out(s.out_size(L));
    double best = 1e30, best_build = 1e30;
    for (int rep = 0; rep < 6; ++rep) {
      std::fill(state.begin(), state.end(), 0.0f);
      Timer t;
      la->prefill(s.all(), state.data(), out.data());
      if (rep > 0) best = std::min(best, t.seconds());  // rep 0 warms up
    }
    Transition T;
    for (int rep = 0; rep < 6; ++rep) {
      Timer t;
      la->build_transition(s.inputs(0, L, false), &T, state.data());
      if (rep > 0) best_build = std::min(best_build, t.seconds());
    }
    const int B = 8;
    std::vector<std::vector<float>> st(B, std::vector<float>(s.state_size(), 0.01f));
    std::vector<float*> ptrs;
    for (auto& x : st) ptrs.push_back(x.data());
    std::vector<float> o(s.out_size(B));
    double best_step = 1e30;
    for (int rep = 0; rep < 20; ++rep) {
      Timer t;
      la->step(s.inputs(0, B), ptrs.data(), o.data());
      if (rep > 0) best_step = std::min(best_step, t.seconds());
    }
    const double fl = decay_chunk::prefill_flops(d, L, true), fb = decay_chunk::prefill_flops(d, L, false);
    const double bytes = double(B) * s.state_size() * sizeof(float) * 2;
    std::printf("[la-decay] %-9s nv=16 dk=dv=128 L=%d threads=%d: prefill %.1f ms %.0f tok/s "
                "%.1f GFLOP/s | build %.1f ms %.0f tok/s %.1f GFLOP/s | step B=%d %.3f ms %.1f GB/s\n",
                family_name(f), L, num_threads(), best * 1e3, L / best, fl / best * 1e-9,
                best_build * 1e3, L / best_build, fb / best_build * 1e-9, B, best_step * 1e3,
                bytes / best_step * 1e-9);
  }
}

}  // namespace
}  // namespace hypic::kernels
