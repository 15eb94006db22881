// Plain token-by-token gated delta rule in double precision — the reference the chunked
// kernel is checked against. Written the obvious way, following transformers'
// torch_recurrent_gated_delta_rule (decay first, then the delta update, output after):
//   S ← e^{g_t}·S;   δ = β_t (v_t − Sᵀk_t);   S ← S + k_t δᵀ;   o_t = Sᵀq_t.
// (q is taken as given: the caller has already normalised and scaled it.)
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace hypic::test {

// q, k: [L, nk, dk]  v: [L, nv, dv]  g, beta: [L, nv]  state: [nv, dk, dv] in/out
// out: [L, nv, dv]. Value head h reads key head h / (nv / nk).
inline void gated_delta_reference(int nk, int nv, int dk, int dv, int L, const float* q,
                                  const float* k, const float* v, const float* g,
                                  const float* beta, std::vector<double>& state,
                                  std::vector<double>& out) {
  out.assign(size_t(L) * nv * dv, 0.0);
  const int rep = nv / nk;
  std::vector<double> kv(size_t(dv), 0.0);
  for (int t = 0; t < L; ++t) {
    for (int h = 0; h < nv; ++h) {
      const int hk = h / rep;
      const float* qt = q + (size_t(t) * nk + hk) * dk;
      const float* kt = k + (size_t(t) * nk + hk) * dk;
      const float* vt = v + (size_t(t) * nv + h) * dv;
      double* S = state.data() + size_t(h) * dk * dv;
      const double decay = std::exp(double(g[size_t(t) * nv + h]));
      const double b = beta[size_t(t) * nv + h];
      for (int i = 0; i < dk * dv; ++i) S[i] *= decay;
      for (int j = 0; j < dv; ++j) {
        double s = 0;
        for (int i = 0; i < dk; ++i) s += S[size_t(i) * dv + j] * kt[i];
        kv[size_t(j)] = s;
      }
      for (int i = 0; i < dk; ++i)
        for (int j = 0; j < dv; ++j)
          S[size_t(i) * dv + j] += double(kt[i]) * b * (double(vt[j]) - kv[size_t(j)]);
      double* o = out.data() + (size_t(t) * nv + h) * dv;
      for (int j = 0; j < dv; ++j) {
        double s = 0;
        for (int i = 0; i < dk; ++i) s += S[size_t(i) * dv + j] * qt[i];
        o[j] = s;
      }
    }
  }
}

// The largest ∞-norm condition number κ(I + M) = ‖I+M‖∞·‖(I+M)⁻¹‖∞ over all heads and
// 64-token chunks, M_ij = β_i (k_i·k_j) e^{G_i−G_j} (i > j) — the unit lower triangular
// system the chunked kernel solves. Rounding in that solve is amplified by up to κ.
inline double chunk_solve_condition(int nk, int nv, int dk, int L, const float* k,
                                    const float* g, const float* beta, int chunk = 64) {
  const int rep = nv / nk;
  double worst = 1.0;
  for (int h = 0; h < nv; ++h) {
    const int hk = h / rep;
    for (int t0 = 0; t0 < L; t0 += chunk) {
      const int n = std::min(chunk, L - t0);
      std::vector<double> G(static_cast<size_t>(n)), A(size_t(n) * n, 0.0), T(size_t(n) * n, 0.0);
      double acc = 0;
      for (int i = 0; i < n; ++i) G[size_t(i)] = acc += g[size_t(t0 + i) * nv + h];
      for (int i = 0; i < n; ++i) {
        A[size_t(i) * n + i] = 1.0;
        for (int j = 0; j < i; ++j) {
          double dot = 0;
          for (int d = 0; d < dk; ++d)
            dot += double(k[(size_t(t0 + i) * nk + hk) * dk + d]) *
                   k[(size_t(t0 + j) * nk + hk) * dk + d];
          A[size_t(i) * n + j] =
              beta[size_t(t0 + i) * nv + h] * dot * std::exp(G[size_t(i)] - G[size_t(j)]);
        }
      }
      // T = A⁻¹ by forward substitution, column by column.
      for (int c = 0; c < n; ++c)
        for (int i = c; i < n; ++i) {
          double s = (i == c) ? 1.0 : 0.0;
          for (int j = c; j < i; ++j) s -= A[size_t(i) * n + j] * T[size_t(j) * n + c];
          T[size_t(i) * n + c] = s;
        }
      double na = 0, nt = 0;
      for (int i = 0; i < n; ++i) {
        double ra = 0, rt = 0;
        for (int j = 0; j < n; ++j) {
          ra += std::fabs(A[size_t(i) * n + j]);
          rt += std::fabs(T[size_t(i) * n + j]);
        }
        na = std::max(na, ra);
        nt = std::max(nt, rt);
      }
      worst = std::max(worst, na * nt);
    }
  }
  return worst;
}

}  // namespace hypic::test
