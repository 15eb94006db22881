// Each op against a plain reference written the obvious way, in double precision.
#include <gtest/gtest.h>

#include <cmath>

#include "common/testutil.h"
#include "core/tensor.h"
#include "kernels/attention.h"
#include "kernels/conv1d.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/rope.h"

namespace hypic::kernels {
using test::fp32_tol;
using test::randn;
using test::rel_err;

TEST(Gemm, LinearF32MatchesNaive) {
  for (auto [M, K, N] : {std::tuple{1, 64, 48}, {37, 128, 96}, {300, 64, 130}}) {
    auto x = randn(size_t(M * K), 1), w = randn(size_t(N * K), 2);
    Tensor W = Tensor::zeros_f32({N, K});
    std::copy(w.begin(), w.end(), W.f32());
    std::vector<float> y(size_t(M * N), 1.0f), ref(size_t(M * N));
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) {
        double s = 0;
        for (int c = 0; c < K; ++c) s += double(x[size_t(i * K + c)]) * w[size_t(j * K + c)];
        ref[size_t(i * N + j)] = float(s);
      }
    linear(x.data(), M, W, y.data());
    EXPECT_LT(rel_err(y, ref), fp32_tol(K)) << M << "x" << K << "x" << N;
    // accumulate adds onto y
    std::vector<float> y2(y.size(), 1.0f);
    linear(x.data(), M, W, y2.data(), true);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y2[i], y[i] + 1.0f, 1e-4);
  }
}

TEST(Gemm, LinearBf16WithinBf16Rounding) {
  const int M = 33, K = 256, N = 64;
  auto x = randn(size_t(M * K), 3), w = randn(size_t(N * K), 4);
  Tensor Wf = Tensor::zeros_f32({N, K});
  std::copy(w.begin(), w.end(), Wf.f32());
  Tensor Wb = Wf.to(DType::kBF16);
  std::vector<float> yf(size_t(M * N)), yb(size_t(M * N));
  linear(x.data(), M, Wf, yf.data());
  linear(x.data(), M, Wb, yb.data());
  // Both operands rounded to bf16 (relative error 2^-9 each), random-signed sum.
  EXPECT_LT(rel_err(yb, yf), 4 * 2 * std::ldexp(1.0, -9));
  EXPECT_GT(rel_err(yb, yf), 0.0);  // really went through bf16
}

// The same primitive executed on several threads at once (MoE experts run concurrently)
// gives exactly the single-threaded result: each thread brings its own scratchpad.
TEST(Gemm, ConcurrentCallsOnOneShapeAreExact) {
  const int M = 96, K = 512, N = 256, T = 8;
  auto w = randn(size_t(N * K), 21);
  Tensor W = Tensor::zeros_f32({N, K});
  std::copy(w.begin(), w.end(), W.f32());
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Tensor Wd = W.to(dt);
    std::vector<std::vector<float>> xs, ref(T), got(T);
    for (int t = 0; t < T; ++t) {
      xs.push_back(randn(size_t(M * K), 100 + t));
      ref[size_t(t)].resize(size_t(M * N));
      got[size_t(t)].resize(size_t(M * N));
      linear(xs.back().data(), M, Wd, ref[size_t(t)].data());
    }
#pragma omp parallel for num_threads(2)
    for (int t = 0; t < T; ++t) linear(xs[size_t(t)].data(), M, Wd, got[size_t(t)].data());
    for (int t = 0; t < T; ++t) EXPECT_EQ(got[size_t(t)], ref[size_t(t)]) << dtype_name(dt) << " " << t;
  }
}

TEST(Gemm, BatchedTransposes) {
  const int B = 3, M = 5, N = 7, K = 9;
  auto a = randn(size_t(B * M * K), 5), b = randn(size_t(B * K * N), 6);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      std::vector<float> c(size_t(B * M * N)), ref(c.size());
      for (int z = 0; z < B; ++z)
        for (int i = 0; i < M; ++i)
          for (int j = 0; j < N; ++j) {
            double s = 0;
            for (int t = 0; t < K; ++t) {
              const float av = ta ? a[size_t(z * M * K + t * M + i)] : a[size_t(z * M * K + i * K + t)];
              const float bv = tb ? b[size_t(z * K * N + j * K + t)] : b[size_t(z * K * N + t * N + j)];
              s += double(av) * bv;
            }
            ref[size_t(z * M * N + i * N + j)] = float(s);
          }
      batched_matmul_f32(B, M, N, K, a.data(), ta, b.data(), tb, c.data());
      EXPECT_LT(rel_err(c, ref), fp32_tol(K)) << ta << tb;
    }
}

TEST(Norms, RmsnormBothConventionsAndGated) {
  const int R = 4, n = 96;
  auto x = randn(size_t(R * n), 7), w = randn(size_t(n), 8, 0.3f), z = randn(size_t(R * n), 9);
  for (bool zc : {false, true}) {
    std::vector<float> y(x.size()), ref(x.size());
    rmsnorm(x.data(), w.data(), y.data(), R, n, 1e-6f, zc);
    for (int r = 0; r < R; ++r) {
      double ss = 0;
      for (int i = 0; i < n; ++i) ss += double(x[size_t(r * n + i)]) * x[size_t(r * n + i)];
      const double inv = 1.0 / std::sqrt(ss / n + 1e-6);
      for (int i = 0; i < n; ++i)
        ref[size_t(r * n + i)] = float(x[size_t(r * n + i)] * inv * (zc ? 1.0 + w[size_t(i)] : w[size_t(i)]));
    }
    EXPECT_LT(rel_err(y, ref), fp32_tol(n));
  }
  std::vector<float> y(x.size()), ref(x.size());
  rmsnorm_gated(x.data(), z.data(), w.data(), y.data(), R, n, 1e-6f);
  for (int r = 0; r < R; ++r) {
    double ss = 0;
    for (int i = 0; i < n; ++i) ss += double(x[size_t(r * n + i)]) * x[size_t(r * n + i)];
    const double inv = 1.0 / std::sqrt(ss / n + 1e-6);
    for (int i = 0; i < n; ++i) {
      const double zz = z[size_t(r * n + i)];
      ref[size_t(r * n + i)] = float(w[size_t(i)] * x[size_t(r * n + i)] * inv * zz / (1 + std::exp(-zz)));
    }
  }
  EXPECT_LT(rel_err(y, ref), fp32_tol(n));
}

TEST(Norms, GroupRmsnormWithSigmoidGate) {
  const int R = 3, n = 96;
  auto x = randn(size_t(R * n), 17), w = randn(size_t(n), 18, 0.3f), z = randn(size_t(R * n), 19);
  for (int groups : {1, 2, 3, 8}) {
    const int g = n / groups;
    std::vector<float> y(x.size()), ref(x.size());
    group_rmsnorm_sigmoid(x.data(), z.data(), w.data(), y.data(), R, n, groups, 1e-5f);
    for (int r = 0; r < R; ++r)
      for (int k = 0; k < groups; ++k) {
        const size_t o = size_t(r * n + k * g);
        double ss = 0;
        for (int i = 0; i < g; ++i) ss += double(x[o + size_t(i)]) * x[o + size_t(i)];
        const double inv = 1.0 / std::sqrt(ss / g + 1e-5);
        for (int i = 0; i < g; ++i) {
          const double zz = z[o + size_t(i)];
          ref[o + size_t(i)] = float(x[o + size_t(i)] * inv * w[size_t(k * g + i)] / (1 + std::exp(-zz)));
        }
      }
    EXPECT_LT(rel_err(y, ref), fp32_tol(n)) << groups << " groups";
  }
}

// y = silu(g)·u, and with a limit l (Ling-3.0) min(silu(g), l)·clamp(u, −l, l); 37 elements
// cover the 8-lane body and the scalar tail.
TEST(Elementwise, SwigluWithAndWithoutLimitMatchesFormula) {
  const int64_t n = 37;
  const std::vector<float> g = test::randn(size_t(n), 41, 6.0f), u = test::randn(size_t(n), 42, 6.0f);
  for (float limit : {0.0f, 2.5f}) {
    std::vector<float> y(static_cast<size_t>(n));
    swiglu(g.data(), u.data(), y.data(), n, limit);
    for (int64_t i = 0; i < n; ++i) {
      const double s = double(g[size_t(i)]) / (1.0 + std::exp(-double(g[size_t(i)])));
      const double a = limit > 0 ? std::min(s, double(limit)) : s;
      const double b = limit > 0 ? std::clamp(double(u[size_t(i)]), -double(limit), double(limit)) : u[size_t(i)];
      EXPECT_NEAR(y[size_t(i)], a * b, 1e-5 * (1 + std::abs(a * b))) << "limit " << limit << " i " << i;
    }
  }
}

TEST(Rope, PartialNeoxMatchesFormula) {
  const int L = 10, nh = 3, hd = 32, rot = 8;
  const float theta = 10000.0f;
  auto x = randn(size_t(L * nh * hd), 10);
  auto y = x;
  Rope rope(rot, theta);
  rope.apply(y.data(), L, nh, hd, 100);
  std::vector<float> ref = x;
  for (int t = 0; t < L; ++t)
    for (int h = 0; h < nh; ++h)
      for (int i = 0; i < rot / 2; ++i) {
        const double f = (100.0 + t) * std::pow(double(theta), -2.0 * i / rot);
        const size_t o = size_t((t * nh + h) * hd);
        const double a = x[o + size_t(i)], b = x[o + size_t(i + rot / 2)];
        ref[o + size_t(i)] = float(a * std::cos(f) - b * std::sin(f));
        ref[o + size_t(i + rot / 2)] = float(b * std::cos(f) + a * std::sin(f));
      }
  // Positions ~100 rad: fp32 argument rounding (~100·ε) dominates.
  EXPECT_LT(rel_err(y, ref), 1e-5);
  for (int t = 0; t < L; ++t)  // pass-through dims untouched
    for (int i = rot; i < hd; ++i) EXPECT_EQ(y[size_t(t * nh * hd + i)], x[size_t(t * nh * hd + i)]);
}

TEST(Rope, InterleavedPairsMatchFormula) {
  const int L = 7, nh = 2, hd = 12, rot = 8;
  const float theta = 6e6f;
  auto x = randn(size_t(L * nh * hd), 11);
  auto y = x;
  Rope(rot, theta, /*interleaved=*/true).apply(y.data(), L, nh, hd, 40);
  std::vector<float> ref = x;
  for (int t = 0; t < L; ++t)
    for (int h = 0; h < nh; ++h)
      for (int i = 0; i < rot / 2; ++i) {
        const double f = (40.0 + t) * std::pow(double(theta), -2.0 * i / rot);
        const size_t o = size_t((t * nh + h) * hd);
        const double a = x[o + size_t(2 * i)], b = x[o + size_t(2 * i + 1)];
        ref[o + size_t(2 * i)] = float(a * std::cos(f) - b * std::sin(f));
        ref[o + size_t(2 * i + 1)] = float(b * std::cos(f) + a * std::sin(f));
      }
  EXPECT_LT(rel_err(y, ref), 1e-5);
}

TEST(Conv1d, CausalWithStateComposes) {
  const int L = 11, C = 300, K = 4;
  auto x = randn(size_t(L * C), 11), w = randn(size_t(C * K), 12, 0.5f);
  std::vector<float> wt(size_t(K * C));  // [K, C] layout the kernel takes
  for (int c = 0; c < C; ++c)
    for (int j = 0; j < K; ++j) wt[size_t(j * C + c)] = w[size_t(c * K + j)];
  std::vector<float> state(size_t((K - 1) * C), 0.0f), y(size_t(L * C)), ref(y.size());
  for (int t = 0; t < L; ++t)
    for (int c = 0; c < C; ++c) {
      double acc = 0;
      for (int j = 0; j < K; ++j) {
        const int src = t - (K - 1) + j;
        if (src >= 0) acc += double(w[size_t(c * K + j)]) * x[size_t(src * C + c)];
      }
      ref[size_t(t * C + c)] = float(acc / (1 + std::exp(-acc)));
    }
  causal_conv1d_silu(x.data(), L, C, wt.data(), K, state.data(), y.data());
  EXPECT_LT(rel_err(y, ref), fp32_tol(K));
  // Split into 7 + 1 + 3 tokens carrying the state: identical outputs.
  std::vector<float> st2(size_t((K - 1) * C), 0.0f), y2(y.size());
  int t0 = 0;
  for (int n : {7, 1, 3}) {
    causal_conv1d_silu(x.data() + t0 * C, n, C, wt.data(), K, st2.data(), y2.data() + t0 * C);
    t0 += n;
  }
  EXPECT_EQ(y2, y);
  EXPECT_EQ(st2, state);
}

// Naive attention: full score matrix, double precision; keys and values at d's strides.
std::vector<float> naive_attention(const AttnDims& d, const std::vector<float>& q, int64_t Lq,
                                   int64_t qpos0, const std::vector<float>& k,
                                   const std::vector<float>& v, float scale) {
  const int g = d.nh / d.nkv, dv = d.vdim();
  const int64_t ks = d.k_stride(), vs = d.v_stride();
  std::vector<float> out(size_t(Lq * d.nh * dv));
  for (int64_t i = 0; i < Lq; ++i)
    for (int h = 0; h < d.nh; ++h) {
      const int64_t n = qpos0 + i + 1;
      std::vector<double> s(static_cast<size_t>(n));
      double mx = -1e300;
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int c = 0; c < d.hd; ++c)
          acc += double(q[size_t((i * d.nh + h) * d.hd + c)]) * k[size_t(j * ks + (h / g) * d.hd + c)];
        s[size_t(j)] = acc * scale;
        mx = std::max(mx, s[size_t(j)]);
      }
      double sum = 0;
      for (auto& e : s) sum += (e = std::exp(e - mx));
      for (int c = 0; c < dv; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < n; ++j) acc += s[size_t(j)] * v[size_t(j * vs + (h / g) * dv + c)];
        out[size_t((i * d.nh + h) * dv + c)] = float(acc / sum);
      }
    }
  return out;
}

TEST(Attention, CausalGqaMatchesNaive) {
  const AttnDims d{4, 2, 32};
  for (auto [Lq, qpos0] : {std::pair<int64_t, int64_t>{1, 0}, {1, 300}, {37, 0}, {200, 0}, {45, 160}}) {
    const int64_t Lk = qpos0 + Lq;
    auto q = randn(size_t(Lq * d.nh * d.hd), 13), k = randn(size_t(Lk * d.nkv * d.hd), 14),
         v = randn(size_t(Lk * d.nkv * d.hd), 15);
    std::vector<float> out(q.size());
    const float scale = 1.0f / std::sqrt(float(d.hd));
    attention_causal(d, q.data(), Lq, qpos0, k.data(), v.data(), Lk, scale, out.data());
    auto ref = naive_attention(d, q, Lq, qpos0, k, v, scale);
    EXPECT_LT(rel_err(out, ref), fp32_tol(double(Lk) * d.hd)) << Lq << " @" << qpos0;
  }
}

// Value heads of another width (MLA expanded: qk 24, v 16), and MLA's absorbed form: one kv
// head whose values are the first dv dims of the key rows (latent | rope part, v = k).
TEST(Attention, ValueWidthAndStridesMatchNaive) {
  const AttnDims expanded{4, 4, 24, 16};
  AttnDims absorbed{4, 1, 40, 32};
  absorbed.ldk = absorbed.ldv = 40;
  for (const AttnDims& d : {expanded, absorbed})
    for (auto [Lq, qpos0] : {std::pair<int64_t, int64_t>{1, 0}, {1, 290}, {70, 0}, {33, 260}}) {
      const int64_t Lk = qpos0 + Lq;
      auto q = randn(size_t(Lq * d.nh * d.hd), 16), k = randn(size_t(Lk * d.k_stride()), 17);
      auto v = d.ldv > 0 ? k : randn(size_t(Lk * d.v_stride()), 18);
      std::vector<float> out(size_t(Lq * d.nh * d.vdim()));
      const float scale = 0.2f;
      attention_causal(d, q.data(), Lq, qpos0, k.data(), v.data(), Lk, scale, out.data());
      auto ref = naive_attention(d, q, Lq, qpos0, k, v, scale);
      EXPECT_LT(rel_err(out, ref), fp32_tol(double(Lk) * d.hd)) << d.nkv << ": " << Lq << " @" << qpos0;
    }
}

// A decode batch: one query per sequence over its own cache (lengths around the key block
// of 256), bit-identical to attention_causal on each sequence alone, and near the naive one.
TEST(Attention, DecodeBatchEqualsPerSequence) {
  const AttnDims d{8, 2, 32};
  const std::vector<int64_t> pos = {0, 1, 255, 256, 257, 600};
  const int64_t B = int64_t(pos.size()), row = int64_t(d.nh) * d.hd;
  auto q = randn(size_t(B * row), 21);
  std::vector<std::vector<float>> k, v;
  std::vector<const float*> kb, vb;
  for (int64_t b = 0; b < B; ++b) {
    k.push_back(randn(size_t((pos[size_t(b)] + 1) * d.nkv * d.hd), 30 + uint32_t(b)));
    v.push_back(randn(size_t((pos[size_t(b)] + 1) * d.nkv * d.hd), 60 + uint32_t(b)));
    kb.push_back(k.back().data());
    vb.push_back(v.back().data());
  }
  const float scale = 1.0f / std::sqrt(float(d.hd));
  std::vector<float> out(q.size());
  attention_decode(d, B, q.data(), pos.data(), kb.data(), vb.data(), scale, out.data());
  for (int64_t b = 0; b < B; ++b) {
    const int64_t p = pos[size_t(b)];
    std::vector<float> qb(q.begin() + b * row, q.begin() + (b + 1) * row), one(qb.size());
    attention_causal(d, qb.data(), 1, p, kb[size_t(b)], vb[size_t(b)], p + 1, scale, one.data());
    const std::vector<float> got(out.begin() + b * row, out.begin() + (b + 1) * row);
    EXPECT_EQ(got, one) << "sequence " << b;
    auto ref = naive_attention(d, qb, 1, p, k[size_t(b)], v[size_t(b)], scale);
    EXPECT_LT(rel_err(got, ref), fp32_tol(double(p + 1) * d.hd)) << "sequence " << b;
  }
}

}  // namespace hypic::kernels
