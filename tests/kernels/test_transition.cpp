// The transition operators of kernels/transition.h in every structural form against their
// dense meaning (double): identity → I, log scalar t → e^{t}·I, log vector t → Diag(e^{t}),
// dense → T. apply, compose, chain, the identity as neutral element, and the RoPE patches
// (state re-rotation, T ← R·T·Rᵀ) against an explicit rotation matrix.
//
// Tolerance: an entry of T·S is a dk-term fp32 dot product (dense; oneDNN) or one product
// with an fp32 exp (≈1 ulp) — test::fp32_tol(dk), c = 8 covering the few roundings per term.
// Re-rotation: one rotation is 2 products + 1 sum per entry with cos/sin rounded to fp32;
// R·T·Rᵀ two of them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/testutil.h"
#include "kernels/transition.h"

namespace hypic::kernels {
namespace {
using test::rel_err_d;

const TransitionForm kForms[] = {TransitionForm::kIdentity, TransitionForm::kLogScalar,
                                 TransitionForm::kLogVector, TransitionForm::kDense};

Transition random_transition(TransitionForm form, int nv, int dk, uint32_t seed) {
  Transition t = Transition::identity(form, nv, dk);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> logs(-5.0f, 0.0f);
  std::normal_distribution<float> nrm(0.0f, float(1.0 / std::sqrt(double(dk))));
  switch (form) {
    case TransitionForm::kIdentity: break;
    case TransitionForm::kLogScalar:
    case TransitionForm::kLogVector:
      for (auto& x : t.data) x = logs(rng);
      break;
    case TransitionForm::kDense:
      for (auto& x : t.data) x = nrm(rng);
      break;
  }
  return t;
}

// The dense [nv, dk, dk] matrix a transition stands for.
std::vector<double> dense_of(const Transition& t) {
  const int nv = t.nv, dk = t.dk;
  std::vector<double> m(size_t(nv) * dk * dk, 0.0);
  for (int h = 0; h < nv; ++h)
    for (int i = 0; i < dk; ++i) {
      double* row = m.data() + (size_t(h) * dk + i) * dk;
      switch (t.form) {
        case TransitionForm::kIdentity: row[i] = 1.0; break;
        case TransitionForm::kLogScalar: row[i] = std::exp(double(t.data[size_t(h)])); break;
        case TransitionForm::kLogVector: row[i] = std::exp(double(t.data[size_t(h) * dk + i])); break;
        case TransitionForm::kDense:
          for (int j = 0; j < dk; ++j) row[j] = t.data[(size_t(h) * dk + i) * dk + j];
          break;
      }
    }
  return m;
}

// out[h] = M[h]·S[h] (+ s0[h]); M: [nv, dk, dk], S: [nv, dk, dv].
std::vector<double> matmul_ref(const std::vector<double>& M, const std::vector<double>& S, int nv,
                               int dk, int dv, const float* s0 = nullptr) {
  std::vector<double> out(size_t(nv) * dk * dv, 0.0);
  for (int h = 0; h < nv; ++h)
    for (int i = 0; i < dk; ++i)
      for (int j = 0; j < dv; ++j) {
        double s = s0 ? double(s0[(size_t(h) * dk + i) * dv + j]) : 0.0;
        for (int m = 0; m < dk; ++m)
          s += M[(size_t(h) * dk + i) * dk + m] * S[(size_t(h) * dk + m) * dv + j];
        out[(size_t(h) * dk + i) * dv + j] = s;
      }
  return out;
}


// R(Δ) on the first rot dims (NeoX pairs j, j + rot/2), identity beyond: [dk, dk].
std::vector<double> rotation_matrix(int dk, int rot, double theta, int64_t delta) {
  std::vector<double> R(size_t(dk) * dk, 0.0);
  for (int i = 0; i < dk; ++i) R[size_t(i) * dk + i] = 1.0;
  const int half = rot / 2;
  for (int j = 0; j < half; ++j) {
    const double a = double(delta) * std::pow(theta, -2.0 * j / rot), c = std::cos(a), s = std::sin(a);
    R[size_t(j) * dk + j] = c;
    R[size_t(j) * dk + j + half] = -s;
    R[size_t(j + half) * dk + j] = s;
    R[size_t(j + half) * dk + j + half] = c;
  }
  return R;
}

}  // namespace

TEST(Transition, ApplyAndComposeMatchDense) {
  const int nv = 3, dk = 24, dv = 10;
  for (TransitionForm form : kForms) {
    const Transition T = random_transition(form, nv, dk, 1);
    const auto M = dense_of(T);
    const auto S = test::randn(size_t(nv) * dk * dv, 2);
    const auto s0 = test::randn(S.size(), 3);
    const std::vector<double> Sd(S.begin(), S.end());
    std::vector<float> a = S;
    transition_apply(T, dv, a.data());
    EXPECT_LT(rel_err_d(a.data(), matmul_ref(M, Sd, nv, dk, dv).data(), a.size()), test::fp32_tol(dk))
        << transition_form_name(form);
    std::vector<float> c = S;
    transition_compose(T, dv, s0.data(), c.data());
    EXPECT_LT(rel_err_d(c.data(), matmul_ref(M, Sd, nv, dk, dv, s0.data()).data(), c.size()),
              test::fp32_tol(dk))
        << transition_form_name(form);
  }
}

TEST(Transition, ChainMatchesDenseProduct) {
  const int nv = 2, dk = 20;
  for (TransitionForm form : kForms) {
    const Transition first = random_transition(form, nv, dk, 11), second = random_transition(form, nv, dk, 12);
    const Transition c = transition_chain(first, second);
    EXPECT_EQ(c.form, form);
    EXPECT_EQ(c.data.size(), first.data.size());
    // dense(c) = dense(second)·dense(first)
    const auto A = dense_of(second), B = dense_of(first);
    const auto ref = matmul_ref(A, B, nv, dk, dk);
    const auto got = dense_of(c);
    std::vector<float> gotf(got.begin(), got.end());
    EXPECT_LT(rel_err_d(gotf.data(), ref.data(), ref.size()), test::fp32_tol(dk)) << transition_form_name(form);
    // Applying the chain equals applying first, then second.
    const int dv = 7;
    const auto S = test::randn(size_t(nv) * dk * dv, 13);
    std::vector<float> one = S, two = S;
    transition_apply(c, dv, one.data());
    transition_apply(first, dv, two.data());
    transition_apply(second, dv, two.data());
    EXPECT_LT(test::rel_err(one, two), 2 * test::fp32_tol(dk)) << transition_form_name(form);
  }
}

TEST(Transition, IdentityIsNeutral) {
  const int nv = 2, dk = 16, dv = 5;
  for (TransitionForm form : kForms) {
    const Transition I = Transition::identity(form, nv, dk);
    const Transition T = random_transition(form, nv, dk, 21);
    EXPECT_EQ(transition_chain(I, T).data, T.data) << transition_form_name(form);
    EXPECT_EQ(transition_chain(T, I).data, T.data) << transition_form_name(form);
    const auto S = test::randn(size_t(nv) * dk * dv, 22);
    std::vector<float> a = S;
    transition_apply(I, dv, a.data());
    EXPECT_EQ(a, S) << transition_form_name(form);
    const std::vector<float> zero(S.size(), 0.0f);
    transition_compose(I, dv, zero.data(), a.data());
    EXPECT_EQ(a, S) << transition_form_name(form);
  }
  EXPECT_EQ(Transition::identity(TransitionForm::kDense, 2, 16).bytes(), size_t(2 * 16 * 16 * 4));
  EXPECT_EQ(Transition::identity(TransitionForm::kIdentity, 2, 16).bytes(), 0u);
}

TEST(Transition, RerotateStateMatchesRotationMatrix) {
  const int nv = 2, dk = 32, dv = 6, rot = 16;
  const double theta = 10000.0;
  for (int64_t delta : {int64_t(1), int64_t(-37), int64_t(123457)}) {
    const auto S = test::randn(size_t(nv) * dk * dv, 31);
    std::vector<float> a = S;
    rerotate_state(nv, dk, dv, rot, float(theta), delta, a.data());
    const auto R = rotation_matrix(dk, rot, theta, delta);
    std::vector<double> RR;
    for (int h = 0; h < nv; ++h) RR.insert(RR.end(), R.begin(), R.end());
    const auto ref = matmul_ref(RR, std::vector<double>(S.begin(), S.end()), nv, dk, dv);
    EXPECT_LT(rel_err_d(a.data(), ref.data(), ref.size()), test::fp32_tol(2)) << delta;
    // R(Δ₁)·R(Δ₂) = R(Δ₁ + Δ₂), and R(−Δ) undoes R(Δ).
    std::vector<float> b = S;
    rerotate_state(nv, dk, dv, rot, float(theta), 1000, b.data());
    rerotate_state(nv, dk, dv, rot, float(theta), delta - 1000, b.data());
    EXPECT_LT(test::rel_err(b, a), 2 * test::fp32_tol(2)) << delta;
    rerotate_state(nv, dk, dv, rot, float(theta), -delta, b.data());
    EXPECT_LT(test::rel_err(b, S), 3 * test::fp32_tol(2)) << delta;
  }
  std::vector<float> s = test::randn(size_t(nv) * dk * dv, 32), s_copy = s;
  rerotate_state(nv, dk, dv, rot, float(theta), 0, s.data());
  EXPECT_EQ(s, s_copy);
}

TEST(Transition, RerotateTransitionPerForm) {
  const int nv = 2, dk = 24, rot = 12;
  const double theta = 500.0;
  const int64_t delta = 91;
  // Dense: T ← R·T·Rᵀ.
  Transition T = random_transition(TransitionForm::kDense, nv, dk, 41);
  const Transition T0 = T;
  ASSERT_TRUE(rerotate_transition(rot, float(theta), delta, &T));
  const auto R = rotation_matrix(dk, rot, theta, delta);
  std::vector<double> Rt(R.size());
  for (int i = 0; i < dk; ++i)
    for (int j = 0; j < dk; ++j) Rt[size_t(i) * dk + j] = R[size_t(j) * dk + i];
  std::vector<double> RR;
  for (int h = 0; h < nv; ++h) RR.insert(RR.end(), R.begin(), R.end());
  const auto RT = matmul_ref(RR, dense_of(T0), nv, dk, dk);  // R·T, then (R·T)·Rᵀ
  std::vector<double> ref(size_t(nv) * dk * dk, 0.0);
  for (int h = 0; h < nv; ++h)
    for (int i = 0; i < dk; ++i)
      for (int j = 0; j < dk; ++j) {
        double s = 0;
        for (int m = 0; m < dk; ++m) s += RT[(size_t(h) * dk + i) * dk + m] * Rt[size_t(m) * dk + j];
        ref[(size_t(h) * dk + i) * dk + j] = s;
      }
  EXPECT_LT(rel_err_d(T.data.data(), ref.data(), ref.size()), test::fp32_tol(4));
  // Identity and log-scalar commute with R: unchanged. Log-vector has no exact patch.
  for (TransitionForm form : {TransitionForm::kIdentity, TransitionForm::kLogScalar}) {
    Transition t = random_transition(form, nv, dk, 42);
    const auto before = t.data;
    EXPECT_TRUE(rerotate_transition(rot, float(theta), delta, &t)) << transition_form_name(form);
    EXPECT_EQ(t.data, before) << transition_form_name(form);
  }
  Transition v = random_transition(TransitionForm::kLogVector, nv, dk, 43);
  EXPECT_FALSE(rerotate_transition(rot, float(theta), delta, &v));
}

TEST(Transition, FormNames) {
  EXPECT_STREQ(transition_form_name(TransitionForm::kIdentity), "identity");
  EXPECT_STREQ(transition_form_name(TransitionForm::kLogScalar), "log-scalar");
  EXPECT_STREQ(transition_form_name(TransitionForm::kLogVector), "log-vector");
  EXPECT_STREQ(transition_form_name(TransitionForm::kDense), "dense");
}

}  // namespace hypic::kernels
