// Gated DeltaNet through its family face (kernels/linear_attn.h, Family::kGatedDeltaNet, scale 1:
// q arrives pre-scaled, as the model passes it) against the plain token-by-token recurrence
// (reference_delta.h); the delta-rule engine's per-head machinery (delta_chunk.h) directly.
//
// Error measure: normalised error ‖a − b‖ / ‖b‖ over all outputs, resp. the whole final state.
//
// Tolerance (fp32, ε = 2^−24): a kernel output or state entry is a chain of dot products —
// the read of the incoming state (dk terms) and the intra-chunk mixing (≤ 64 terms) — and the
// state carries the error of every earlier chunk forward (the transitions e^g(I − βkkᵀ) are
// contractions, so those errors add up, they do not grow). Random-signed rounding errors add
// in quadrature: relative error ≈ √n·ε with n = (dk + 64)·#chunks accumulated terms. The
// unit lower triangular solve (I + M)⁻¹ amplifies the rounding of its inputs by up to its
// condition number κ∞ (computed per test case from the data: chunk_solve_condition). So
//     tol = c · √n · ε · κ,   c = 2 (a couple of roundings per term: product + FMA).
// The log-decays are exact enough not to add a term: the kernel accumulates G = cumsum(g)
// in double, so G_i − G_j carries no |G|·ε cancellation error (with fp32 G, as in HF, the
// relative error of e^{G_i−G_j} would be ~|G|·ε with |G| up to hundreds here).
// Measured: errors ≈ 0.2–0.3·√(dk+64)·ε (1e−7 … 3e−7), independent of L and κ; the bound
// is 1e−6 … 1e−4. A real bug (mask, decay, sign, tail) gives errors ≳ 1e−2.
#include <gtest/gtest.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "common/testutil.h"
#include "core/parallel.h"
#include "core/timer.h"
#include "kernels/delta_chunk.h"
#include "kernels/linear_attn.h"
#include "kernels/reference_delta.h"
#include "kernels/small_gemm.h"

namespace hypic::kernels {
namespace {
using test::rel_err_d;

constexpr double kEps = 5.9604644775390625e-08;  // 2^-24

struct Inputs {
  LaDims d;
  int L;
  std::vector<float> q, k, v, g, beta;
};

// Realistic ranges: q, k L2-normalised per head (x·rsqrt(Σx² + 1e−6), as HF), q also × dk^−½;
// g = −exp(A_log)·softplus(x) with per-head rates from slow (0.02) to fast (3), so g lies in
// about [−8, 0], plus ~2 % of tokens with very negative g (−20 … −100: e^g underflows);
// β = sigmoid(b) ∈ (0, 1).
Inputs make_inputs(LaDims d, int L, uint32_t seed) {
  Inputs in{d, L, {}, {}, {}, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> nrm(0.0f, 1.0f);
  std::uniform_real_distribution<float> uni(0.0f, 1.0f);
  auto heads = [&](std::vector<float>& x, int nh, int dh, float scale) {
    x.resize(size_t(L) * nh * dh);
    for (auto& e : x) e = nrm(rng);
    for (size_t r = 0; r < size_t(L) * nh; ++r) {
      float* p = x.data() + r * dh;
      double ss = 0;
      for (int i = 0; i < dh; ++i) ss += double(p[i]) * p[i];
      const float inv = float(1.0 / std::sqrt(ss + 1e-6)) * scale;
      for (int i = 0; i < dh; ++i) p[i] *= inv;
    }
  };
  heads(in.q, d.nk, d.dk, float(1.0 / std::sqrt(double(d.dk))));
  heads(in.k, d.nk, d.dk, 1.0f);
  in.v.resize(size_t(L) * d.nv * d.dv);
  for (auto& e : in.v) e = nrm(rng);
  std::vector<float> rate(size_t(d.nv));
  for (auto& r : rate) r = std::exp(std::log(0.02f) + uni(rng) * (std::log(3.0f) - std::log(0.02f)));
  in.g.resize(size_t(L) * d.nv);
  in.beta.resize(size_t(L) * d.nv);
  for (int t = 0; t < L; ++t)
    for (int h = 0; h < d.nv; ++h) {
      const float x = nrm(rng);
      float gv = -rate[size_t(h)] * std::log1p(std::exp(x));
      if (uni(rng) < 0.02f) gv = -(20.0f + 80.0f * uni(rng));
      in.g[size_t(t) * d.nv + h] = gv;
      in.beta[size_t(t) * d.nv + h] = 1.0f / (1.0f + std::exp(-1.5f * nrm(rng)));
    }
  return in;
}

std::vector<float> random_state(const LaDims& d, uint32_t seed) {
  return test::randn(size_t(d.nv) * d.dk * d.dv, seed, 0.5f);
}

std::unique_ptr<LinearAttention> gdn(const LaDims& d) {
  return make_linear_attention(Family::kGatedDeltaNet, d);
}

// Rows [t0, t0 + n) of `in`: tokens for prefill, one per sequence for step.
LaInputs rows(const Inputs& in, int t0, int n) {
  const LaDims& d = in.d;
  LaInputs r;
  r.L = n;
  r.q = in.q.data() + size_t(t0) * d.nk * d.dk;
  r.k = in.k.data() + size_t(t0) * d.nk * d.dk;
  r.v = in.v.data() + size_t(t0) * d.nv * d.dv;
  r.g = in.g.data() + size_t(t0) * d.nv;
  r.beta = in.beta.data() + size_t(t0) * d.nv;
  return r;
}


double tolerance(const Inputs& in) {
  const int chunks = (in.L + 63) / 64;
  const double n = double(in.d.dk + 64) * chunks;
  const double kappa = test::chunk_solve_condition(in.d.nk, in.d.nv, in.d.dk, in.L, in.k.data(),
                                                   in.g.data(), in.beta.data());
  return 2.0 * std::sqrt(n) * kEps * kappa;
}

struct IsaCase {
  Isa isa;
  const char* name;
};
std::vector<IsaCase> isas() {
  std::vector<IsaCase> r{{Isa::kGeneric, "generic"}};
  set_isa(Isa::kAuto);
  if (active_isa() == Isa::kAvx512)
    r.push_back({Isa::kAvx512, "avx512"});
  return r;
}

struct IsaGuard {
  ~IsaGuard() { set_isa(Isa::kAuto); }
};

}  // namespace

TEST(SmallGemm, MatchesNaive) {
  IsaGuard guard;
  for (const auto& isa : isas()) {
    set_isa(isa.isa);
    for (auto [M, N, K] : {std::tuple{1, 1, 1}, {5, 17, 3}, {64, 64, 128}, {64, 128, 64},
                           {13, 130, 37}, {128, 48, 64}, {7, 200, 0}}) {
      for (bool ta : {false, true})
        for (Tri tri : {Tri::kNone, Tri::kALower, Tri::kCLower}) {
          if (tri != Tri::kNone && (M != K && tri == Tri::kALower)) continue;
          if (tri == Tri::kCLower && M != N) continue;
          const int64_t lda = (ta ? M : K) + 3, ldb = N + 5, ldc = N + 2;
          auto A = test::randn(size_t((ta ? K : M) * lda + 1), 11);
          auto B = test::randn(size_t(K * ldb + 1), 12);
          auto C0 = test::randn(size_t(M * ldc + 1), 13);
          if (tri == Tri::kALower)  // zero above the diagonal, as the contract requires
            for (int i = 0; i < M; ++i)
              for (int p = i + 1; p < K; ++p) A[ta ? size_t(p * lda + i) : size_t(i * lda + p)] = 0;
          for (float beta : {0.0f, 0.75f}) {
            std::vector<float> C = C0;
            if (beta == 0.0f)  // C must not be read when beta == 0
              for (auto& c : C) c = std::nanf("");
            small_gemm(M, N, K, -1.5f, A.data(), lda, ta, B.data(), ldb, beta,
                                   C.data(), ldc, tri);
            // Error relative to the magnitude of the summed terms, |α|·Σ|a·b| + |β·c|
            // (the result itself may cancel).
            double num = 0, den = 0;
            for (int i = 0; i < M; ++i)
              for (int j = 0; j < N; ++j) {
                if (tri == Tri::kCLower && j > i) continue;
                double s = 0, mag = 0;
                for (int p = 0; p < K; ++p) {
                  const double t = double(ta ? A[size_t(p * lda + i)] : A[size_t(i * lda + p)]) *
                                   B[size_t(p * ldb + j)];
                  s += t;
                  mag += std::fabs(t);
                }
                const double c0 = beta != 0.0f ? beta * double(C0[size_t(i * ldc + j)]) : 0.0;
                const double ref = -1.5 * s + c0;
                const double got = C[size_t(i * ldc + j)];
                num += (got - ref) * (got - ref);
                den += (1.5 * mag + std::fabs(c0)) * (1.5 * mag + std::fabs(c0));
              }
            const double err = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
            EXPECT_LT(err, 4.0 * std::sqrt(double(K + 1)) * kEps)
                << isa.name << " M=" << M << " N=" << N << " K=" << K << " ta=" << ta
                << " tri=" << int(tri) << " beta=" << beta;
          }
        }
    }
  }
}

TEST(GatedDelta, PrefillMatchesRecurrence) {
  IsaGuard guard;
  const LaDims dims[] = {{1, 1, 16, 16}, {2, 4, 32, 48}, {1, 3, 20, 36}, {4, 8, 64, 32}, {1, 2, 128, 128}};
  double worst_ratio = 0;
  for (const auto& isa : isas()) {
    set_isa(isa.isa);
    uint32_t seed = 100;
    for (const LaDims& d : dims)
      for (int L : {1, 5, 63, 64, 65, 200, 257})
        for (bool warm : {false, true}) {
          const Inputs in = make_inputs(d, L, ++seed);
          std::vector<float> state = warm ? random_state(d, seed + 7) : std::vector<float>(size_t(d.nv) * d.dk * d.dv, 0.0f);
          std::vector<double> ref_state(state.begin(), state.end()), ref_out;
          test::gated_delta_reference(d.nk, d.nv, d.dk, d.dv, L, in.q.data(), in.k.data(), in.v.data(),
                                      in.g.data(), in.beta.data(), ref_state, ref_out);
          std::vector<float> out(size_t(L) * d.nv * d.dv, std::nanf(""));
          gdn(d)->prefill(rows(in, 0, L), state.data(), out.data());
          const double eo = rel_err_d(out.data(), ref_out.data(), out.size());
          const double es = rel_err_d(state.data(), ref_state.data(), state.size());
          const double tol = tolerance(in);
          worst_ratio = std::max({worst_ratio, eo / tol, es / tol});
          const auto msg = ::testing::Message()
                           << isa.name << " nk=" << d.nk << " nv=" << d.nv << " dk=" << d.dk << " dv=" << d.dv
                           << " L=" << L << (warm ? " warm" : " zero") << " err_out=" << eo
                           << " err_state=" << es << " tol=" << tol;
          EXPECT_LT(eo, tol) << msg;
          EXPECT_LT(es, tol) << msg;
          if (std::getenv("HYPIC_GDN_VERBOSE")) std::printf("%s\n", msg.GetString().c_str());
        }
  }
  std::printf("[gdn] prefill vs recurrence: worst error / tolerance = %.3g\n", worst_ratio);
}

// Every token strongly gated (g = −2 and −5): the decays e^{ΣG} of a chunk fall through the
// denormal range, which the kernels flush to zero (core/fp_env.h). The results still match the
// double-precision recurrence, and the caller's floating-point mode is left as it was.
TEST(GatedDelta, StrongGatesMatchRecurrenceAndKeepTheCallersMode) {
  const LaDims d{2, 4, 64, 64};
  const int L = 200;
  // x86-64: the mode bits of MXCSR (rounding, masks, FTZ, DAZ; the low 6 are sticky exception
  // flags); aarch64: FPCR (modes only).
  const auto mode = [] {
#if defined(__x86_64__)
    return uint64_t(_mm_getcsr() & ~0x3Fu);
#else
    uint64_t fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    return fpcr;
#endif
  };
  const uint64_t csr = mode();
  for (float gv : {-2.0f, -5.0f}) {
    Inputs in = make_inputs(d, L, 77);
    std::fill(in.g.begin(), in.g.end(), gv);
    std::vector<float> state = random_state(d, 78);
    std::vector<double> ref_state(state.begin(), state.end()), ref_out;
    test::gated_delta_reference(d.nk, d.nv, d.dk, d.dv, L, in.q.data(), in.k.data(), in.v.data(),
                                in.g.data(), in.beta.data(), ref_state, ref_out);
    std::vector<float> out(size_t(L) * d.nv * d.dv, std::nanf(""));
    gdn(d)->prefill(rows(in, 0, L), state.data(), out.data());
    EXPECT_EQ(mode(), csr);
    EXPECT_LT(rel_err_d(out.data(), ref_out.data(), out.size()), tolerance(in)) << "g=" << gv;
    EXPECT_LT(rel_err_d(state.data(), ref_state.data(), state.size()), tolerance(in)) << "g=" << gv;
  }
}

TEST(GatedDelta, SplitPrefillEqualsWhole) {
  const LaDims d{2, 4, 32, 48};
  for (auto [L1, L2] : {std::pair{64, 64}, {37, 100}, {1, 256}, {130, 3}, {5, 5}}) {
    const int L = L1 + L2;
    const Inputs in = make_inputs(d, L, uint32_t(7 * L1 + L2));
    const auto s0 = random_state(d, 5);
    const auto la = gdn(d);
    std::vector<float> s_whole = s0, out_whole(size_t(L) * d.nv * d.dv);
    la->prefill(rows(in, 0, L), s_whole.data(), out_whole.data());
    std::vector<float> s_split = s0, out_split(out_whole.size());
    la->prefill(rows(in, 0, L1), s_split.data(), out_split.data());
    la->prefill(rows(in, L1, L2), s_split.data(), out_split.data() + size_t(L1) * d.nv * d.dv);
    const double tol = tolerance(in);
    EXPECT_LT(test::rel_err(out_split, out_whole), tol) << L1 << "+" << L2;
    EXPECT_LT(test::rel_err(s_split, s_whole), tol) << L1 << "+" << L2;
  }
}

TEST(GatedDelta, StepEqualsPrefillTokenByToken) {
  for (const LaDims& d : {LaDims{2, 4, 32, 48}, LaDims{1, 2, 128, 128}}) {
    const int L = 70;
    const Inputs in = make_inputs(d, L, 77);
    const auto s0 = random_state(d, 78);
    std::vector<float> s_step = s0, s_pre = s0, s_whole = s0;
    std::vector<float> out_step(size_t(L) * d.nv * d.dv), out_pre(out_step.size()), out_whole(out_step.size());
    const auto la = gdn(d);
    const size_t vs = size_t(d.nv) * d.dv;
    for (int t = 0; t < L; ++t) {
      float* sp = s_step.data();
      la->step(rows(in, t, 1), &sp, out_step.data() + t * vs);
      la->prefill(rows(in, t, 1), s_pre.data(), out_pre.data() + t * vs);
    }
    la->prefill(rows(in, 0, L), s_whole.data(), out_whole.data());
    const double tol = tolerance(in);
    EXPECT_LT(test::rel_err(out_step, out_pre), tol);
    EXPECT_LT(test::rel_err(s_step, s_pre), tol);
    EXPECT_LT(test::rel_err(out_step, out_whole), tol);
    EXPECT_LT(test::rel_err(s_step, s_whole), tol);
    // and against the double reference
    std::vector<double> ref_state(s0.begin(), s0.end()), ref_out;
    test::gated_delta_reference(d.nk, d.nv, d.dk, d.dv, L, in.q.data(), in.k.data(), in.v.data(),
                                in.g.data(), in.beta.data(), ref_state, ref_out);
    EXPECT_LT(rel_err_d(out_step.data(), ref_out.data(), ref_out.size()), tol);
    EXPECT_LT(rel_err_d(s_step.data(), ref_state.data(), ref_state.size()), tol);
  }
}

TEST(GatedDelta, StepBatchEqualsSeparateCalls) {
  const LaDims d{2, 4, 32, 48};
  const int B = 3;
  const Inputs in = make_inputs(d, B, 91);  // token b of `in` serves as sequence b's input
  std::vector<std::vector<float>> st, st_sep;
  for (int b = 0; b < B; ++b) st.push_back(random_state(d, uint32_t(200 + b)));
  st_sep = st;
  std::vector<float*> ptrs;
  for (auto& s : st) ptrs.push_back(s.data());
  std::vector<float> out(size_t(B) * d.nv * d.dv), out_sep(out.size());
  const auto la = gdn(d);
  la->step(rows(in, 0, B), ptrs.data(), out.data());
  const size_t vs = size_t(d.nv) * d.dv;
  for (int b = 0; b < B; ++b) {
    float* sp = st_sep[size_t(b)].data();
    la->step(rows(in, b, 1), &sp, out_sep.data() + b * vs);
  }
  // Same per-(sequence, head) arithmetic: identical bits.
  EXPECT_EQ(0, std::memcmp(out.data(), out_sep.data(), out.size() * sizeof(float)));
  for (int b = 0; b < B; ++b)
    EXPECT_EQ(0, std::memcmp(st[size_t(b)].data(), st_sep[size_t(b)].data(), st[size_t(b)].size() * sizeof(float)));
}

// The augmented pass of SPEC §2: state [S | T] of width dv + dk from [0 | I] with values
// [v | 0] yields S(C|0) and T_C; then T_C·S₀ + S(C|0) must equal the run from S₀.
TEST(GatedDelta, AugmentedPassGivesTransitionOperator) {
  const LaDims d{1, 2, 32, 24};
  const int L = 150;
  const Inputs in = make_inputs(d, L, 31);
  const auto s0 = random_state(d, 32);
  const int W = d.dv + d.dk;
  delta_chunk::ChunkScratch ws;
  for (int h = 0; h < d.nv; ++h) {
    std::vector<float> aug(size_t(d.dk) * W, 0.0f);
    for (int i = 0; i < d.dk; ++i) aug[size_t(i) * W + d.dv + i] = 1.0f;
    const int hk = h / (d.nv / d.nk);
    delta_chunk::HeadSeq s;
    s.L = L;
    s.k = in.k.data() + hk * d.dk;
    s.k_ld = d.nk * d.dk;
    s.v = in.v.data() + h * d.dv;
    s.v_ld = d.nv * d.dv;
    s.v_cols = d.dv;
    s.g = in.g.data() + h;
    s.g_ld = d.nv;
    s.beta = in.beta.data() + h;
    s.beta_ld = d.nv;
    delta_chunk::run_head_chunks(d.dk, W, s, aug.data(), ws);
    // composed = T_C·S₀ + S(C|0)
    std::vector<float> composed(size_t(d.dk) * d.dv);
    const float* S0 = s0.data() + size_t(h) * d.dk * d.dv;
    for (int i = 0; i < d.dk; ++i)
      for (int j = 0; j < d.dv; ++j) {
        double acc = aug[size_t(i) * W + j];
        for (int m = 0; m < d.dk; ++m) acc += double(aug[size_t(i) * W + d.dv + m]) * S0[size_t(m) * d.dv + j];
        composed[size_t(i) * d.dv + j] = float(acc);
      }
    std::vector<double> ref_state(s0.begin(), s0.end()), ref_out;
    test::gated_delta_reference(d.nk, d.nv, d.dk, d.dv, L, in.q.data(), in.k.data(), in.v.data(),
                                in.g.data(), in.beta.data(), ref_state, ref_out);
    EXPECT_LT(rel_err_d(composed.data(), ref_state.data() + size_t(h) * d.dk * d.dv, composed.size()),
              tolerance(in))
        << "head " << h;
  }
}

// Heads sharing a key head, processed as a group (K·Kᵀ, Q·Kᵀ shared), give the same bits as
// one head at a time — so both layouts the Gated DeltaNet prefill may pick are covered
// whatever the thread count.
TEST(GatedDelta, GroupOfHeadsEqualsSingleHeads) {
  const LaDims d{1, 3, 48, 40};
  const int L = 133;
  const Inputs in = make_inputs(d, L, 55);
  const auto s0 = random_state(d, 56);
  std::vector<float> st_group = s0, st_single = s0;
  std::vector<float> out_group(size_t(L) * d.nv * d.dv), out_single(out_group.size());
  auto seq = [&](int h, std::vector<float>& out) {
    delta_chunk::HeadSeq s;
    s.L = L;
    s.q = in.q.data();
    s.q_ld = d.nk * d.dk;
    s.k = in.k.data();
    s.k_ld = d.nk * d.dk;
    s.v = in.v.data() + h * d.dv;
    s.v_ld = d.nv * d.dv;
    s.v_cols = d.dv;
    s.g = in.g.data() + h;
    s.g_ld = d.nv;
    s.beta = in.beta.data() + h;
    s.beta_ld = d.nv;
    s.out = out.data() + h * d.dv;
    s.out_ld = d.nv * d.dv;
    return s;
  };
  delta_chunk::ChunkScratch ws;
  std::vector<delta_chunk::HeadSeq> seqs;
  std::vector<float*> states;
  for (int h = 0; h < d.nv; ++h) {
    seqs.push_back(seq(h, out_group));
    states.push_back(st_group.data() + size_t(h) * d.dk * d.dv);
  }
  delta_chunk::run_group_chunks(d.dk, d.dv, d.nv, seqs.data(), states.data(), ws);
  for (int h = 0; h < d.nv; ++h)
    delta_chunk::run_head_chunks(d.dk, d.dv, seq(h, out_single), st_single.data() + size_t(h) * d.dk * d.dv, ws);
  EXPECT_EQ(0, std::memcmp(out_group.data(), out_single.data(), out_group.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(st_group.data(), st_single.data(), st_group.size() * sizeof(float)));
}

// Throughput of the Gated DeltaNet prefill at the real shape (Qwen3-Next / Qwen3.5-35B: 16 key
// heads, 32 value heads, dk = dv = 128), L = 4096, all threads. FLOPs as prefill_flops counts
// them: the chunked algorithm's products per value head, triangles counted as triangles,
// ≈ 9.0 MFLOP per 64-token chunk per head, 18.5 GFLOP in all. (The kernel computes K·Kᵀ and
// Q·Kᵀ once per key head, so it executes ≈ 6 % fewer: the printed rate is "effective".)
// Prints, does not assert.
TEST(GatedDelta, PrintThroughput) {
  const LaDims d{16, 32, 128, 128};
  const int L = 4096;
  const Inputs in = make_inputs(d, L, 4242);
  const auto la = gdn(d);
  std::vector<float> state(size_t(d.nv) * d.dk * d.dv), out(size_t(L) * d.nv * d.dv);
  double best = 1e30;
  for (int rep = 0; rep < 4; ++rep) {
    std::fill(state.begin(), state.end(), 0.0f);
    Timer t;
    la->prefill(rows(in, 0, L), state.data(), out.data());
    if (rep > 0) best = std::min(best, t.seconds());  // rep 0 warms up
  }
  const double flops = la->prefill_flops(L);
  std::printf("[gdn] prefill nk=16 nv=32 dk=dv=128 L=%d threads=%d isa=%s: %.1f ms, %.0f tokens/s, "
              "%.1f GFLOP/s (%.2f GFLOP)\n",
              L, num_threads(), active_isa() == Isa::kAvx512 ? "avx512" : "generic",
              best * 1e3, L / best, flops / best * 1e-9, flops * 1e-9);

  // Decode: one step for a batch of 8 sequences (state-bandwidth bound: 2 MiB of state each).
  const int B = 8;
  std::vector<std::vector<float>> st(B, std::vector<float>(state.size(), 0.01f));
  std::vector<float*> ptrs;
  for (auto& s : st) ptrs.push_back(s.data());
  std::vector<float> o(size_t(B) * d.nv * d.dv);
  double best_step = 1e30;
  for (int rep = 0; rep < 6; ++rep) {
    Timer t;
    la->step(rows(in, 0, B), ptrs.data(), o.data());
    if (rep > 0) best_step = std::min(best_step, t.seconds());
  }
  const double bytes = double(B) * state.size() * sizeof(float) * 2;  // read + write once
  std::printf("[gdn] step B=%d: %.3f ms, %.1f GB/s of state read+write\n", B, best_step * 1e3,
              bytes / best_step * 1e-9);
}

}  // namespace hypic::kernels
