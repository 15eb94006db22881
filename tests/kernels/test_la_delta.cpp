// The delta-rule families (DeltaNet, Gated DeltaNet, KDA) through the LinearAttention
// interface, against the plain token-by-token recurrence (reference_la.h), the transition
// algebra of SPEC §2 on them, RoPE re-rotation (GDN, DeltaNet) and the conv warm-up.
//
// Error measure: normalised error ‖a − b‖ / ‖b‖ over all outputs, resp. the whole state or T.
//
// Tolerance (fp32, ε = 2^−24), as in test_gated_delta.cpp: an output or state entry is a
// chain of dot products — the read of the incoming chunk state (dk terms) and the
// intra-chunk mixing (≤ 64 terms) — and the state carries every earlier chunk's error
// forward (the transitions are contractions: the errors add, they do not grow). Random-signed
// roundings add in quadrature, ≈ √n·ε with n = (dk + 64)·#chunks. The unit lower triangular
// solve (I + M)⁻¹ amplifies the rounding of its inputs by up to its condition number κ∞,
// computed per case from the data (delta_chunk_condition, per channel for KDA). So
//     tol = c · √n · ε · κ,   c = 2 (a couple of roundings per term: product + FMA).
// KDA's pairwise weights e^{G_i−G_j} off the diagonal sub-blocks are a product of two
// exps (each ≤ 1, ≈ 1 ulp): one rounding more per term, inside the same c.
// Outputs are measured against the magnitude of the terms of their final read,
// ‖out − ref‖ / ‖mag‖ with mag = Σ_i |S_ij q_i| (reference_la.h): o = Sᵀq may cancel, and
// with few tokens nothing averages that out (one token: o = β v (q·k), a single dot product).
// Kernel-vs-kernel identities (composition, chaining, splitting) compare two fp32 results
// that each carry that error: 2·tol.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/testutil.h"
#include "kernels/conv_warmup.h"
#include "kernels/delta_chunk.h"
#include "kernels/elementwise.h"
#include "kernels/linear_attn.h"
#include "kernels/reference_la.h"
#include "kernels/small_gemm.h"
#include "kernels/transition.h"

namespace hypic::kernels {
namespace {
using test::rel_err_d;

constexpr double kEps = 5.9604644775390625e-08;  // 2^-24
const Family kFamilies[] = {Family::kDeltaNet, Family::kGatedDeltaNet, Family::kKda};

test::RefGate ref_gate(Family f) {
  return f == Family::kDeltaNet ? test::RefGate::kNone
         : f == Family::kKda    ? test::RefGate::kVector
                                : test::RefGate::kScalar;
}

// One sequence's inputs, realistic ranges: q, k L2-normalised per head (x·rsqrt(Σx² + 1e−6)),
// q also × dk^−½; v ~ N(0, 1); β = sigmoid(1.5·N(0, 1)); log gates g = −rate·softplus(N(0, 1))
// with rates log-uniform in [rate_lo, rate_hi] per head (GDN) or per head and channel (KDA),
// and with `extreme`, ~2 % of the gates (per token and head; per channel for KDA) at
// −20 … −100, where e^g underflows.
struct Seq {
  Family f;
  LaDims d;
  int L = 0;
  std::vector<float> q, k, v, g, beta;
  int64_t g_row() const { return f == Family::kKda ? int64_t(d.nv) * d.dk : d.nv; }
  LaInputs inputs(int t0 = 0, int n = -1) const {
    LaInputs in;
    in.L = n < 0 ? L - t0 : n;
    in.q = q.data() + int64_t(t0) * d.nk * d.dk;
    in.k = k.data() + int64_t(t0) * d.nk * d.dk;
    in.v = v.data() + int64_t(t0) * d.nv * d.dv;
    in.g = g.empty() ? nullptr : g.data() + t0 * g_row();
    in.beta = beta.data() + int64_t(t0) * d.nv;
    return in;
  }
};

void l2norm_heads(std::vector<float>& x, int64_t rows, int dh, float scale) {
  for (int64_t r = 0; r < rows; ++r) {
    float* p = x.data() + r * dh;
    double ss = 0;
    for (int i = 0; i < dh; ++i) ss += double(p[i]) * p[i];
    const float inv = float(1.0 / std::sqrt(ss + 1e-6)) * scale;
    for (int i = 0; i < dh; ++i) p[i] *= inv;
  }
}

Seq make_seq(Family f, LaDims d, int L, uint32_t seed, bool extreme = true, float rate_lo = 0.02f,
             float rate_hi = 3.0f) {
  Seq s{f, d, L, {}, {}, {}, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> nrm(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(0.0f, 1.0f);
  s.q.resize(size_t(L) * d.nk * d.dk);
  s.k.resize(s.q.size());
  for (auto& e : s.q) e = nrm(rng);
  for (auto& e : s.k) e = nrm(rng);
  l2norm_heads(s.q, int64_t(L) * d.nk, d.dk, float(1.0 / std::sqrt(double(d.dk))));
  l2norm_heads(s.k, int64_t(L) * d.nk, d.dk, 1.0f);
  s.v.resize(size_t(L) * d.nv * d.dv);
  for (auto& e : s.v) e = nrm(rng);
  s.beta.resize(size_t(L) * d.nv);
  for (auto& e : s.beta) e = 1.0f / (1.0f + std::exp(-1.5f * nrm(rng)));
  if (f == Family::kDeltaNet) return s;
  const int64_t row = s.g_row();
  std::vector<float> rate(static_cast<size_t>(row));
  for (auto& r : rate) r = std::exp(std::log(rate_lo) + uni(rng) * (std::log(rate_hi) - std::log(rate_lo)));
  s.g.resize(size_t(L) * row);
  for (int t = 0; t < L; ++t)
    for (int64_t j = 0; j < row; ++j) {
      float gv = -rate[size_t(j)] * softplus(nrm(rng));
      if (extreme && uni(rng) < 0.02f) gv = -(20.0f + 80.0f * uni(rng));
      s.g[size_t(t * row + j)] = gv;
    }
  return s;
}

std::vector<float> random_state(const LaDims& d, uint32_t seed) {
  return test::randn(size_t(d.nv) * d.dk * d.dv, seed, 0.5f);
}


double tolerance(const Seq& s) {
  const int chunks = std::max(1, (s.L + 63) / 64);
  const double n = double(s.d.dk + 64) * chunks;
  const double kappa = test::delta_chunk_condition(s.d.nk, s.d.nv, s.d.dk, s.L, s.k.data(),
                                                   ref_gate(s.f), s.g.empty() ? nullptr : s.g.data(),
                                                   s.beta.data());
  return 2.0 * std::sqrt(n) * kEps * kappa;
}

// The double reference from `state` (updated), outputs with the given scale.
void reference(const Seq& s, int t0, int n, std::vector<double>& state, std::vector<double>& out,
               float scale = 1.0f, bool outputs = true, std::vector<double>* out_mag = nullptr) {
  const LaInputs in = s.inputs(t0, n);
  test::delta_rule_reference(s.d.nk, s.d.nv, s.d.dk, s.d.dv, in.L, outputs ? in.q : nullptr, in.k,
                             in.v, ref_gate(s.f), in.g, in.beta, scale, state, out, out_mag);
}

// ‖a − b‖ / ‖mag‖.
double out_err(const std::vector<float>& a, const std::vector<double>& b, const std::vector<double>& mag) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += mag[i] * mag[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

std::string name(Family f, const LaDims& d, int L) {
  return std::string(family_name(f)) + " nk=" + std::to_string(d.nk) + " nv=" + std::to_string(d.nv) +
         " dk=" + std::to_string(d.dk) + " dv=" + std::to_string(d.dv) + " L=" + std::to_string(L);
}

struct IsaGuard {
  ~IsaGuard() { set_isa(Isa::kAuto); }
};

std::vector<Isa> isas() {
  std::vector<Isa> r{Isa::kGeneric};
  set_isa(Isa::kAuto);
  if (active_isa() == Isa::kAvx512) r.push_back(Isa::kAvx512);
  return r;
}

}  // namespace

TEST(DeltaFamilies, FormsAndFactory) {
  for (Family f : kFamilies) {
    auto la = make_linear_attention(f, {2, 4, 32, 16});
    ASSERT_TRUE(la);
    EXPECT_EQ(la->family(), f);
    EXPECT_EQ(la->transition_form(), TransitionForm::kDense);
    EXPECT_EQ(la->dims().nv, 4);
  }
}

TEST(DeltaFamilies, PrefillMatchesRecurrence) {
  IsaGuard guard;
  const LaDims dims[] = {{1, 1, 16, 16}, {2, 4, 32, 48}, {1, 3, 20, 36}, {2, 2, 64, 32}, {1, 2, 128, 128}};
  double worst = 0, max_out = 0, max_state = 0;
  for (Isa isa : isas()) {
    set_isa(isa);
    uint32_t seed = 1000;
    for (Family f : kFamilies)
      for (const LaDims& d : dims)
        for (int L : {1, 5, 63, 64, 65, 200, 257}) {
          if (d.dk == 128 && L > 65) continue;  // the double reference is slow at this size
          for (bool warm : {false, true}) {
            const Seq s = make_seq(f, d, L, ++seed);
            auto la = make_linear_attention(f, d);
            std::vector<float> state = warm ? random_state(d, seed + 7)
                                            : std::vector<float>(size_t(d.nv) * d.dk * d.dv, 0.0f);
            std::vector<double> ref_state(state.begin(), state.end()), ref_out, mag;
            reference(s, 0, L, ref_state, ref_out, 1.0f, true, &mag);
            std::vector<float> out(size_t(L) * d.nv * d.dv, std::nanf(""));
            la->prefill(s.inputs(), state.data(), out.data());
            const double eo = out_err(out, ref_out, mag), es = rel_err_d(state, ref_state);
            const double tol = tolerance(s);
            worst = std::max({worst, eo / tol, es / tol});
            max_out = std::max(max_out, eo);
            max_state = std::max(max_state, es);
            const auto msg = ::testing::Message()
                             << (isa == Isa::kGeneric ? "generic " : "avx512 ") << name(f, d, L)
                             << (warm ? " warm" : " zero") << " err_out=" << eo << " err_state=" << es
                             << " tol=" << tol;
            EXPECT_LT(eo, tol) << msg;
            EXPECT_LT(es, tol) << msg;
          }
        }
  }
  std::printf("[la-delta] prefill vs recurrence: max error out %.3g, state %.3g; worst error / "
              "tolerance = %.3g\n", max_out, max_state, worst);
}

TEST(DeltaFamilies, OutputScale) {
  for (Family f : kFamilies) {
    const LaDims d{2, 2, 32, 24};
    const Seq s = make_seq(f, d, 90, 5);
    auto la = make_linear_attention(f, d);
    LaInputs in = s.inputs();
    in.scale = 0.3f;
    std::vector<float> state(size_t(d.nv) * d.dk * d.dv, 0.0f), out(size_t(s.L) * d.nv * d.dv);
    la->prefill(in, state.data(), out.data());
    std::vector<double> ref_state(state.size(), 0.0), ref_out, mag;
    reference(s, 0, s.L, ref_state, ref_out, 0.3f, true, &mag);
    EXPECT_LT(out_err(out, ref_out, mag), tolerance(s)) << family_name(f);
  }
}

// Very negative per-channel gates (e^g far below FLT_MIN) in every position of a chunk,
// including the first and the last token: nothing overflows, nothing becomes NaN.
TEST(DeltaFamilies, KdaExtremeChannelGatesStayFinite) {
  const LaDims d{1, 2, 32, 16};
  Seq s = make_seq(Family::kKda, d, 130, 77, false);
  for (int t : {0, 1, 17, 63, 64, 100, 129})
    for (int j = 0; j < d.nv * d.dk; j += 3) s.g[size_t(t) * d.nv * d.dk + j] = -150.0f - float(j);
  auto la = make_linear_attention(Family::kKda, d);
  std::vector<float> state = random_state(d, 3), out(size_t(s.L) * d.nv * d.dv);
  std::vector<double> ref_state(state.begin(), state.end()), ref_out, mag;
  reference(s, 0, s.L, ref_state, ref_out, 1.0f, true, &mag);
  la->prefill(s.inputs(), state.data(), out.data());
  for (float x : out) ASSERT_TRUE(std::isfinite(x));
  for (float x : state) ASSERT_TRUE(std::isfinite(x));
  EXPECT_LT(out_err(out, ref_out, mag), tolerance(s));
  EXPECT_LT(rel_err_d(state, ref_state), tolerance(s));
}

TEST(DeltaFamilies, SplitPrefillEqualsWhole) {
  const LaDims d{2, 4, 32, 48};
  for (Family f : kFamilies)
    for (auto [L1, L2] : {std::pair{64, 64}, {37, 100}, {1, 256}, {130, 3}}) {
      const Seq s = make_seq(f, d, L1 + L2, uint32_t(7 * L1 + L2));
      auto la = make_linear_attention(f, d);
      const auto s0 = random_state(d, 5);
      std::vector<float> s_whole = s0, out_whole(size_t(s.L) * d.nv * d.dv);
      la->prefill(s.inputs(), s_whole.data(), out_whole.data());
      std::vector<float> s_split = s0, out_split(out_whole.size());
      la->prefill(s.inputs(0, L1), s_split.data(), out_split.data());
      la->prefill(s.inputs(L1), s_split.data(), out_split.data() + size_t(L1) * d.nv * d.dv);
      const double tol = 2 * tolerance(s);
      EXPECT_LT(test::rel_err(out_split, out_whole), tol) << name(f, d, L1) << "+" << L2;
      EXPECT_LT(test::rel_err(s_split, s_whole), tol) << name(f, d, L1) << "+" << L2;
    }
}

TEST(DeltaFamilies, StepMatchesPrefillAndRecurrence) {
  for (Family f : kFamilies)
    for (const LaDims& d : {LaDims{2, 4, 32, 48}, LaDims{1, 2, 128, 128}}) {
      const int L = 70;
      const Seq s = make_seq(f, d, L, 78);
      auto la = make_linear_attention(f, d);
      const auto s0 = random_state(d, 79);
      std::vector<float> s_step = s0, s_whole = s0;
      std::vector<float> out_step(size_t(L) * d.nv * d.dv), out_whole(out_step.size());
      for (int t = 0; t < L; ++t) {
        float* sp = s_step.data();
        la->step(s.inputs(t, 1), &sp, out_step.data() + size_t(t) * d.nv * d.dv);
      }
      la->prefill(s.inputs(), s_whole.data(), out_whole.data());
      std::vector<double> ref_state(s0.begin(), s0.end()), ref_out, mag;
      reference(s, 0, L, ref_state, ref_out, 1.0f, true, &mag);
      const double tol = tolerance(s);
      EXPECT_LT(out_err(out_step, ref_out, mag), tol) << name(f, d, L);
      EXPECT_LT(rel_err_d(s_step, ref_state), tol) << name(f, d, L);
      EXPECT_LT(test::rel_err(out_step, out_whole), 2 * tol) << name(f, d, L);
      EXPECT_LT(test::rel_err(s_step, s_whole), 2 * tol) << name(f, d, L);
    }
}

TEST(DeltaFamilies, StepBatchEqualsSeparateCalls) {
  for (Family f : kFamilies) {
    const LaDims d{2, 4, 32, 48};
    const int B = 3;
    const Seq s = make_seq(f, d, B, 91);  // token b serves as sequence b's input
    auto la = make_linear_attention(f, d);
    std::vector<std::vector<float>> st, st_sep;
    for (int b = 0; b < B; ++b) st.push_back(random_state(d, uint32_t(200 + b)));
    st_sep = st;
    std::vector<float*> ptrs;
    for (auto& x : st) ptrs.push_back(x.data());
    std::vector<float> out(size_t(B) * d.nv * d.dv), out_sep(out.size());
    la->step(s.inputs(), ptrs.data(), out.data());
    for (int b = 0; b < B; ++b) {
      float* sp = st_sep[size_t(b)].data();
      la->step(s.inputs(b, 1), &sp, out_sep.data() + size_t(b) * d.nv * d.dv);
    }
    EXPECT_EQ(0, std::memcmp(out.data(), out_sep.data(), out.size() * sizeof(float))) << family_name(f);
    for (int b = 0; b < B; ++b)
      EXPECT_EQ(0, std::memcmp(st[size_t(b)].data(), st_sep[size_t(b)].data(), st[size_t(b)].size() * sizeof(float)));
  }
}

// The family object the model runs is the delta-rule engine with scalar gates at scale 1,
// bit for bit.
TEST(DeltaFamilies, GatedDeltaNetIsTheModelKernel) {
  const LaDims d{2, 4, 32, 48};
  const Seq s = make_seq(Family::kGatedDeltaNet, d, 150, 12);
  auto la = make_linear_attention(Family::kGatedDeltaNet, d);
  delta_chunk::Problem p;
  p.nk = d.nk;
  p.nv = d.nv;
  p.dk = d.dk;
  p.dv = d.dv;
  p.L = s.L;
  p.q = s.q.data();
  p.k = s.k.data();
  p.v = s.v.data();
  p.g = s.g.data();
  p.beta = s.beta.data();
  p.gate = delta_chunk::Gate::kScalar;
  std::vector<float> sa = random_state(d, 1), sb = sa, oa(size_t(s.L) * d.nv * d.dv), ob(oa.size());
  la->prefill(s.inputs(), sa.data(), oa.data());
  delta_chunk::prefill(p, sb.data(), ob.data());
  EXPECT_EQ(0, std::memcmp(oa.data(), ob.data(), oa.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(sa.data(), sb.data(), sa.size() * sizeof(float)));
  float* pa = sa.data();
  float* pb = sb.data();
  la->step(s.inputs(0, 1), &pa, oa.data());
  p.L = 1;
  delta_chunk::step(p, &pb, ob.data());
  EXPECT_EQ(0, std::memcmp(sa.data(), sb.data(), sa.size() * sizeof(float)));
}

// S(C | S₀) = T_C·S₀ + S(C | 0) for random S₀, against the recurrence from S₀; and S(C|0)
// and T_C themselves against the double reference.
TEST(DeltaFamilies, TransitionComposes) {
  double worst = 0, max_err = 0;
  for (Family f : kFamilies)
    for (const LaDims& d : {LaDims{2, 4, 32, 48}, LaDims{1, 3, 20, 36}, LaDims{1, 1, 64, 64}})
      for (int L : {1, 40, 64, 150}) {
        const Seq s = make_seq(f, d, L, uint32_t(31 + L + d.dk));
        auto la = make_linear_attention(f, d);
        Transition T;
        std::vector<float> s0(size_t(d.nv) * d.dk * d.dv, std::nanf(""));
        la->build_transition(s.inputs(), &T, s0.data());
        ASSERT_EQ(T.form, TransitionForm::kDense);
        ASSERT_EQ(T.data.size(), size_t(d.nv) * d.dk * d.dk);
        const double tol = tolerance(s);
        std::vector<double> ref0(s0.size(), 0.0), unused;
        reference(s, 0, L, ref0, unused, 1.0f, false);
        EXPECT_LT(rel_err_d(s0, ref0), tol) << name(f, d, L) << " S(C|0)";
        const auto Tref = test::delta_transition_reference(d.nk, d.nv, d.dk, L, s.k.data(), ref_gate(f),
                                                           s.g.empty() ? nullptr : s.g.data(), s.beta.data());
        // Under the extreme gates T may be below fp32's range (the kernel flushes what
        // would be denormal): compare it where it is representable, else require ~0.
        double num = 0, den = 0, got = 0;
        for (size_t i = 0; i < Tref.size(); ++i) {
          num += (T.data[i] - Tref[i]) * (T.data[i] - Tref[i]);
          den += Tref[i] * Tref[i];
          got += double(T.data[i]) * T.data[i];
        }
        if (std::sqrt(den) > 1e-30)
          EXPECT_LT(std::sqrt(num / den), tol) << name(f, d, L) << " T";
        else
          EXPECT_LT(std::sqrt(got), 1e-28) << name(f, d, L) << " T";
        const auto Sp = random_state(d, 99);
        std::vector<float> composed = Sp;
        transition_compose(T, d.dv, s0.data(), composed.data());
        std::vector<double> ref(Sp.begin(), Sp.end());
        reference(s, 0, L, ref, unused, 1.0f, false);
        const double e = rel_err_d(composed, ref);
        worst = std::max(worst, e / tol);
        max_err = std::max(max_err, e);
        EXPECT_LT(e, tol) << name(f, d, L) << " T·S₀ + S(C|0)";
      }
  std::printf("[la-delta] T·S0 + S(C|0) vs recurrence: max error %.3g; worst error / tolerance = %.3g\n",
              max_err, worst);
}

TEST(DeltaFamilies, EmptySegmentIsIdentity) {
  for (Family f : kFamilies) {
    const LaDims d{1, 2, 16, 8};
    auto la = make_linear_attention(f, d);
    LaInputs in;
    in.L = 0;
    Transition T;
    std::vector<float> s0(size_t(d.nv) * d.dk * d.dv, 1.0f);
    la->build_transition(in, &T, s0.data());
    const Transition I = Transition::identity(TransitionForm::kDense, d.nv, d.dk);
    EXPECT_EQ(T.data, I.data);
    for (float x : s0) EXPECT_EQ(x, 0.0f);
  }
}

// n = 4 segments composed one by one from a prefix state equal one prefill over their
// concatenation from the same state.
TEST(DeltaFamilies, SegmentsComposeLikeConcatenation) {
  const int lens[] = {37, 64, 100, 130};
  double max_direct = 0, max_ref = 0;
  for (Family f : kFamilies)
    for (const LaDims& d : {LaDims{2, 4, 32, 48}, LaDims{1, 2, 64, 64}}) {
      const int L = 37 + 64 + 100 + 130;
      const Seq s = make_seq(f, d, L, 4242 + uint32_t(f));
      auto la = make_linear_attention(f, d);
      const auto Sp = random_state(d, 17);
      std::vector<float> direct = Sp, out(size_t(L) * d.nv * d.dv);
      la->prefill(s.inputs(), direct.data(), out.data());
      std::vector<float> composed = Sp, s0(Sp.size());
      int t0 = 0;
      for (int n : lens) {
        Transition T;
        la->build_transition(s.inputs(t0, n), &T, s0.data());
        transition_compose(T, d.dv, s0.data(), composed.data());
        t0 += n;
      }
      std::vector<double> ref(Sp.begin(), Sp.end()), unused;
      reference(s, 0, L, ref, unused, 1.0f, false);
      const double tol = tolerance(s);
      EXPECT_LT(test::rel_err(composed, direct), 2 * tol) << name(f, d, L);
      EXPECT_LT(rel_err_d(composed, ref), tol) << name(f, d, L);
      max_direct = std::max(max_direct, test::rel_err(composed, direct));
      max_ref = std::max(max_ref, rel_err_d(composed, ref));
    }
  std::printf("[la-delta] 4 segments composed vs one prefill: max error %.3g (vs recurrence %.3g)\n",
              max_direct, max_ref);
}

// T_{C1C2} = T_{C2}·T_{C1}: the build over the concatenation against transition_chain, and
// S(C1C2|0) = T_{C2}·S(C1|0) + S(C2|0). Gates without underflow, so T is far from 0.
TEST(DeltaFamilies, TransitionsChain) {
  for (Family f : kFamilies) {
    const LaDims d{2, 4, 32, 24};
    const int L1 = 70, L2 = 90;
    const Seq s = make_seq(f, d, L1 + L2, 606, false, 0.001f, 0.02f);
    auto la = make_linear_attention(f, d);
    Transition T1, T2, T12;
    std::vector<float> a1(size_t(d.nv) * d.dk * d.dv), a2(a1.size()), a12(a1.size());
    la->build_transition(s.inputs(0, L1), &T1, a1.data());
    la->build_transition(s.inputs(L1), &T2, a2.data());
    la->build_transition(s.inputs(), &T12, a12.data());
    const Transition chained = transition_chain(T1, T2);
    const double tol = 2 * tolerance(s);
    EXPECT_LT(test::rel_err(chained.data, T12.data), tol) << family_name(f);
    std::printf("[la-delta] %s: T chain vs build over C1C2 error %.3g\n", family_name(f),
                test::rel_err(chained.data, T12.data));
    std::vector<float> s_chain = a1;
    transition_compose(T2, d.dv, a2.data(), s_chain.data());
    EXPECT_LT(test::rel_err(s_chain, a12), tol) << family_name(f);
    // Chaining with the identity changes nothing.
    const Transition I = Transition::identity(TransitionForm::kDense, d.nv, d.dk);
    EXPECT_EQ(transition_chain(I, T1).data, T1.data);
    EXPECT_EQ(transition_chain(T1, I).data, T1.data);
  }
}

// The fused cold-path build (outputs of a zero-state prefill in the same pass) gives the
// prefill's outputs and the very same (T, S(C|0)) as build_transition.
TEST(DeltaFamilies, BuildWithOutputsEqualsPrefillAndBuild) {
  for (Family f : kFamilies) {
    const LaDims d{2, 4, 32, 48};
    const Seq s = make_seq(f, d, 150, 8);
    auto la = make_linear_attention(f, d);
    auto* dla = dynamic_cast<const DeltaRuleAttention*>(la.get());
    ASSERT_NE(dla, nullptr);
    Transition Ta, Tb;
    std::vector<float> sa(size_t(d.nv) * d.dk * d.dv), sb(sa.size()), out(size_t(s.L) * d.nv * d.dv),
        out_ref(out.size()), st(sa.size(), 0.0f);
    LaInputs in = s.inputs();
    in.scale = 0.5f;
    dla->build_transition_with_outputs(in, &Ta, sa.data(), out.data());
    la->build_transition(in, &Tb, sb.data());
    la->prefill(in, st.data(), out_ref.data());
    EXPECT_EQ(Ta.data, Tb.data) << family_name(f);
    EXPECT_EQ(sa, sb) << family_name(f);
    EXPECT_LT(test::rel_err(out, out_ref), 2 * tolerance(s)) << family_name(f);
    EXPECT_LT(test::rel_err(sa, st), 2 * tolerance(s)) << family_name(f);
  }
}

// RoPE on the key dims (partial NeoX, the test's own model of "GDN with RoPE": q and k of
// token t rotated for position p + t). A segment built at p₀ and reused at p₁: re-rotating
// (S′ = R(Δ)·S, T′ = R(Δ)·T·R(Δ)ᵀ) equals building it at p₁ — exact for a scalar gate.
// Tolerance: the kernel's (both builds) plus the rotations' fp32 rounding (cos/sin and one
// product per entry, a few ε·√dk).
TEST(DeltaFamilies, RerotationEqualsBuildingAtNewPosition) {
  const int rot = 32;
  const double theta = 10000.0;
  double max_s = 0, max_t = 0;
  for (Family f : {Family::kGatedDeltaNet, Family::kDeltaNet})
    for (auto [p0, p1] : {std::pair<int64_t, int64_t>{0, 517}, {17, 1000}, {3000, 40}, {5, 250000}}) {
      const LaDims d{2, 4, 64, 32};
      const int L = 150;
      Seq s = make_seq(f, d, L, 1234, false, 0.02f, 1.0f);
      auto la = make_linear_attention(f, d);
      Seq s0 = s, s1 = s;
      test::rope_neox_reference(s0.k.data(), L, d.nk, d.dk, rot, theta, p0);
      test::rope_neox_reference(s1.k.data(), L, d.nk, d.dk, rot, theta, p1);
      Transition T0, T1;
      std::vector<float> a0(size_t(d.nv) * d.dk * d.dv), a1(a0.size());
      la->build_transition(s0.inputs(), &T0, a0.data());
      la->build_transition(s1.inputs(), &T1, a1.data());
      rerotate_state(d.nv, d.dk, d.dv, rot, float(theta), p1 - p0, a0.data());
      ASSERT_TRUE(rerotate_transition(rot, float(theta), p1 - p0, &T0));
      const double tol = 2 * tolerance(s1) + 8 * std::sqrt(double(d.dk)) * kEps;
      EXPECT_LT(test::rel_err(a0, a1), tol) << family_name(f) << " p0=" << p0 << " p1=" << p1;
      EXPECT_LT(test::rel_err(T0.data, T1.data), tol) << family_name(f) << " p0=" << p0 << " p1=" << p1;
      max_s = std::max(max_s, test::rel_err(a0, a1));
      max_t = std::max(max_t, test::rel_err(T0.data, T1.data));
      // And composed after a prefix state at p₁ equals the prefill at p₁.
      const auto Sp = random_state(d, 5);
      std::vector<float> composed = Sp, direct = Sp, out(size_t(L) * d.nv * d.dv);
      transition_compose(T0, d.dv, a0.data(), composed.data());
      test::rope_neox_reference(s1.q.data(), L, d.nk, d.dk, rot, theta, p1);
      la->prefill(s1.inputs(), direct.data(), out.data());
      EXPECT_LT(test::rel_err(composed, direct), tol) << family_name(f) << " p0=" << p0 << " p1=" << p1;
    }
  std::printf("[la-delta] re-rotated vs built at p1: max error S %.3g, T %.3g\n", max_s, max_t);
}

// Per-channel gates do not commute with a rotation: for KDA the re-rotated transition is not
// the one built at the new position (SPEC §2: no exact patch; no model combines them).
TEST(DeltaFamilies, KdaRerotationIsNotExact) {
  const LaDims d{1, 1, 64, 32};
  const int L = 100, rot = 32;
  Seq s = make_seq(Family::kKda, d, L, 4321, false, 0.05f, 0.5f);
  auto la = make_linear_attention(Family::kKda, d);
  Seq s0 = s, s1 = s;
  test::rope_neox_reference(s0.k.data(), L, 1, d.dk, rot, 10000.0, 0);
  test::rope_neox_reference(s1.k.data(), L, 1, d.dk, rot, 10000.0, 300);
  Transition T0, T1;
  std::vector<float> a0(size_t(d.dk) * d.dv), a1(a0.size());
  la->build_transition(s0.inputs(), &T0, a0.data());
  la->build_transition(s1.inputs(), &T1, a1.data());
  rerotate_state(1, d.dk, d.dv, rot, 10000.0f, 300, a0.data());
  const double e = test::rel_err(a0, a1);
  std::printf("[la-delta] KDA re-rotation error (not exact by design): %.3g\n", e);
  EXPECT_GT(e, 1e3 * tolerance(s1));
}

// Conv warm-up (SPEC §2): one causal conv (K = 4) + SiLU + GDN layer, q, k, v from the conv
// (split [q | k | v], q and k L2-normalised per head, q × dk^−½), g and β given per token.
// A segment composed after a prefix (its first K−1 tokens recomputed with the prefix's conv
// tail, then T_R, S(R|0)) equals the direct computation over prefix + segment: the state,
// the conv state, and the recomputed tokens' outputs. Several segments back to back, and
// segments shorter than K−1.
TEST(DeltaFamilies, ConvWarmupComposesLikeDirect) {
  double max_conv = 0;
  for (Family f : kFamilies) {
    const LaDims d{2, 4, 32, 24};
    const int K = 4;
    const int64_t C = 2 * int64_t(d.nk) * d.dk + int64_t(d.nv) * d.dv;
    auto la = make_linear_attention(f, d);
    const auto wt = test::randn(size_t(K) * C, 7, 0.5f);
    ConvLaLayer layer;
    layer.la = la.get();
    layer.K = K;
    layer.C = C;
    layer.conv_wt = wt.data();
    layer.to_qkv = [&](const float* y, int n, const float*, float* q, float* k, float* v) {
      const int64_t qk = int64_t(d.nk) * d.dk, vd = int64_t(d.nv) * d.dv;
      for (int t = 0; t < n; ++t) {
        std::memcpy(q + t * qk, y + t * C, size_t(qk) * 4);
        std::memcpy(k + t * qk, y + t * C + qk, size_t(qk) * 4);
        std::memcpy(v + t * vd, y + t * C + 2 * qk, size_t(vd) * 4);
      }
      l2norm(q, int64_t(n) * d.nk, d.dk, 1e-6f);
      l2norm(k, int64_t(n) * d.nk, d.dk, 1e-6f);
      const float sc = float(1.0 / std::sqrt(double(d.dk)));
      for (int64_t i = 0; i < int64_t(n) * qk; ++i) q[i] *= sc;
    };
    const int prefix = 50;
    const int lens[] = {100, 2, 1, 3, 4, 70};
    int total = prefix;
    for (int n : lens) total += n;
    // Gates and β from make_seq (q, k, v there are unused: they come from the conv).
    const Seq gs = make_seq(f, d, total, 55);
    const auto x = test::randn(size_t(total) * C, 56);
    const int64_t grow = gs.g_row();
    auto gptr = [&](int t) { return gs.g.empty() ? nullptr : gs.g.data() + t * grow; };
    auto bptr = [&](int t) { return gs.beta.data() + int64_t(t) * d.nv; };
    // Direct: everything from zero, one call per part (conv state and state carried).
    std::vector<float> st_d(size_t(d.nv) * d.dk * d.dv, 0.0f), cs_d(size_t(K - 1) * C, 0.0f);
    conv_la_prefill(layer, prefix, x.data(), gptr(0), bptr(0), st_d.data(), cs_d.data());
    std::vector<float> st_c = st_d, cs_c = cs_d;
    int t0 = prefix;
    for (int n : lens) {
      std::vector<float> out_d(size_t(n) * d.nv * d.dv);
      conv_la_prefill(layer, n, x.data() + t0 * C, gptr(t0), bptr(t0), st_d.data(), cs_d.data(),
                      out_d.data());
      const ConvSegmentEntry e = conv_segment_build(layer, n, x.data() + t0 * C, gptr(t0), bptr(t0));
      EXPECT_EQ(e.P, std::min(K - 1, n));
      std::vector<float> head(size_t(e.P) * d.nv * d.dv);
      conv_segment_compose(layer, e, st_c.data(), cs_c.data(), head.data());
      const double tol = 4 * tolerance(gs);
      EXPECT_LT(test::rel_err(st_c, st_d), tol) << family_name(f) << " segment of " << n;
      max_conv = std::max(max_conv, test::rel_err(st_c, st_d));
      EXPECT_EQ(cs_c, cs_d) << family_name(f) << " segment of " << n;
      std::vector<float> head_d(out_d.begin(), out_d.begin() + long(head.size()));
      EXPECT_LT(test::rel_err(head, head_d), tol) << family_name(f) << " segment of " << n;
      t0 += n;
    }
    // Without the warm-up (the segment's own zero-history conv for its first K−1 tokens)
    // the state would be off: the recipe is needed.
    const ConvSegmentEntry e = conv_segment_build(layer, 100, x.data() + prefix * C, gptr(prefix), bptr(prefix));
    std::vector<float> wrong(st_d.size(), 0.0f), right(st_d.size(), 0.0f), zero_cs(cs_d.size(), 0.0f),
        prefix_cs(cs_d.size(), 0.0f);
    conv_la_prefill(layer, prefix, x.data(), gptr(0), bptr(0), right.data(), prefix_cs.data());
    wrong = right;
    conv_segment_compose(layer, e, right.data(), prefix_cs.data());
    conv_segment_compose(layer, e, wrong.data(), zero_cs.data());
    EXPECT_GT(test::rel_err(wrong, right), 1e-4) << family_name(f);
    std::printf("[la-delta] %s: conv warm-up skipped, state error %.3g\n", family_name(f),
                test::rel_err(wrong, right));
  }
  std::printf("[la-delta] conv warm-up composed vs direct: max state error %.3g\n", max_conv);
}

}  // namespace hypic::kernels
