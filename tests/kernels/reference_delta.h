// Plain token-by-token gated delta rule in double precision — the reference the chunked
// kernel is checked against. Written the obvious way, following transformers'
// torch_recurrent_gated_delta_rule (decay first, then the delta update, output after):
//   S ← e^{g_t}·S;   δ = β_t (v_t − Sᵀk_t);   S ← S + k_t δᵀ;   o_t = Sᵀq_t.
// (q is taken as given: the caller has already normalised and scaled it.)
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/reference_la.h"

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

// The largest ∞-norm condition number of the chunked solve for scalar gates (GDN), see
// delta_chunk_condition() in reference_la.h.
inline double chunk_solve_condition(int nk, int nv, int dk, int L, const float* k,
                                    const float* g, const float* beta, int chunk = 64) {
  return delta_chunk_condition(nk, nv, dk, L, k, g ? RefGate::kScalar : RefGate::kNone, g, beta,
                               chunk);
}

}  // namespace hypic::test
