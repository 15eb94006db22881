// Plain token-by-token references for the linear-attention families (SPEC §2), in double.
// Shared by the family tests; each block of functions below belongs to one group of
// families — keep additions in their own clearly marked section.
//
// Shapes as in kernels/linear_attn.h: q, k: [L, nk, dk]; v: [L, nv, dv]; state: [nv, dk, dv];
// out: [L, nv, dv]; value head h reads key head h / (nv / nk).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace hypic::test {

// =========================================================================================
// Decay families: vanilla linear attention, RetNet / simple GLA, Lightning, Mamba2, GLA.
//     S_t = D_t·S_{t−1} + k_t v_tᵀ,   o_t = scale·S_tᵀ q_t,
// D_t = I (kNone), e^{g_t}·I (kScalar) or Diag(e^{g_t}) (kVector), written the obvious way.
// =========================================================================================

enum class RefGate { kNone, kScalar, kVector };

// g: kScalar: g[t·g_tok_ld + h]; kVector: g[t·g_tok_ld + h·dk + i]; g_tok_ld = 0 repeats the
// same gate for every token (Lightning). q may be null (no outputs; `out` left empty).
inline void decay_reference(int nk, int nv, int dk, int dv, int L, const float* q, const float* k,
                            const float* v, RefGate gate, const float* g, int64_t g_tok_ld,
                            float scale, std::vector<double>& state, std::vector<double>& out) {
  out.assign(q ? size_t(L) * nv * dv : 0, 0.0);
  const int rep = nv / nk;
  for (int t = 0; t < L; ++t)
    for (int h = 0; h < nv; ++h) {
      const int hk = h / rep;
      const float* kt = k + (size_t(t) * nk + hk) * dk;
      const float* vt = v + (size_t(t) * nv + h) * dv;
      double* S = state.data() + size_t(h) * dk * dv;
      for (int i = 0; i < dk; ++i) {
        double decay = 1.0;
        if (gate == RefGate::kScalar) decay = std::exp(double(g[t * g_tok_ld + h]));
        if (gate == RefGate::kVector) decay = std::exp(double(g[t * g_tok_ld + int64_t(h) * dk + i]));
        for (int j = 0; j < dv; ++j)
          S[size_t(i) * dv + j] = decay * S[size_t(i) * dv + j] + double(kt[i]) * vt[j];
      }
      if (!q) continue;
      const float* qt = q + (size_t(t) * nk + hk) * dk;
      double* o = out.data() + (size_t(t) * nv + h) * dv;
      for (int j = 0; j < dv; ++j) {
        double s = 0;
        for (int i = 0; i < dk; ++i) s += S[size_t(i) * dv + j] * qt[i];
        o[j] = double(scale) * s;
      }
    }
}

// NeoX rotary embedding in double on the first `rot` dims of each head: pairs (j, j + rot/2)
// rotated by angle pos·theta^(−2j/rot), token t at position pos0 + t. x: [L, nh, hd].
inline void rope_neox_reference(float* x, int L, int nh, int hd, int rot, double theta,
                                int64_t pos0) {
  const int half = rot / 2;
  for (int t = 0; t < L; ++t)
    for (int h = 0; h < nh; ++h) {
      float* r = x + (size_t(t) * nh + h) * hd;
      for (int j = 0; j < half; ++j) {
        const double a = double(pos0 + t) * std::pow(theta, -2.0 * j / rot);
        const double c = std::cos(a), s = std::sin(a), u = r[j], w = r[j + half];
        r[j] = float(c * u - s * w);
        r[j + half] = float(c * w + s * u);
      }
    }
}

// RetNet's fixed per-head decay (torchscale: log(1 − 2^(−5 − arange(H)))).
inline std::vector<float> retnet_log_decay_reference(int nv) {
  std::vector<float> g(static_cast<size_t>(nv));
  for (int h = 0; h < nv; ++h) g[size_t(h)] = float(std::log1p(-std::exp2(-5.0 - h)));
  return g;
}


// =========================================================================================
// Delta-rule families: DeltaNet (kNone), Gated DeltaNet (kScalar), KDA (kVector), decay
// first (SPEC §2):
//     S′ = D_t·S;   S_t = S′ + β_t k_t (v_t − S′ᵀk_t)ᵀ;   o_t = scale·S_tᵀ q_t,
// D_t = I, e^{g_t}·I or Diag(e^{g_t}); g: [L, nv] (kScalar) or [L, nv, dk] (kVector);
// beta: [L, nv]. Written the obvious way, in double.
// =========================================================================================

inline double delta_ref_decay(RefGate gate, const float* g, int nv, int dk, int t, int h, int i) {
  switch (gate) {
    case RefGate::kNone: return 1.0;
    case RefGate::kScalar: return std::exp(double(g[size_t(t) * nv + h]));
    case RefGate::kVector: return std::exp(double(g[(size_t(t) * nv + h) * dk + i]));
  }
  return 1.0;
}

// state: [nv, dk, dv] in/out; out: [L, nv, dv] (left empty when q is null).
// out_mag (optional): [L, nv, dv], the magnitude of the terms of each output's final read,
// |scale|·Σ_i |S_t,ij·q_t,i| — the scale fp32 rounding of that dot product is relative to
// (the output itself may cancel: a single random dot product of 32 terms loses ~9 ε on
// average relative to its result, ~10⁴ ε in the worst of 10⁴ draws).
inline void delta_rule_reference(int nk, int nv, int dk, int dv, int L, const float* q,
                                 const float* k, const float* v, RefGate gate, const float* g,
                                 const float* beta, float scale, std::vector<double>& state,
                                 std::vector<double>& out, std::vector<double>* out_mag = nullptr) {
  out.assign(q ? size_t(L) * nv * dv : 0, 0.0);
  if (out_mag) out_mag->assign(out.size(), 0.0);
  const int rep = nv / nk;
  std::vector<double> kv(size_t(dv), 0.0);
  for (int t = 0; t < L; ++t)
    for (int h = 0; h < nv; ++h) {
      const int hk = h / rep;
      const float* kt = k + (size_t(t) * nk + hk) * dk;
      const float* vt = v + (size_t(t) * nv + h) * dv;
      double* S = state.data() + size_t(h) * dk * dv;
      for (int i = 0; i < dk; ++i) {
        const double dcy = delta_ref_decay(gate, g, nv, dk, t, h, i);
        for (int j = 0; j < dv; ++j) S[size_t(i) * dv + j] *= dcy;
      }
      for (int j = 0; j < dv; ++j) {
        double s = 0;
        for (int i = 0; i < dk; ++i) s += S[size_t(i) * dv + j] * kt[i];
        kv[size_t(j)] = s;
      }
      const double b = beta[size_t(t) * nv + h];
      for (int i = 0; i < dk; ++i)
        for (int j = 0; j < dv; ++j)
          S[size_t(i) * dv + j] += double(kt[i]) * b * (double(vt[j]) - kv[size_t(j)]);
      if (!q) continue;
      const float* qt = q + (size_t(t) * nk + hk) * dk;
      double* o = out.data() + (size_t(t) * nv + h) * dv;
      double* om = out_mag ? out_mag->data() + (size_t(t) * nv + h) * dv : nullptr;
      for (int j = 0; j < dv; ++j) {
        double s = 0, m = 0;
        for (int i = 0; i < dk; ++i) {
          s += S[size_t(i) * dv + j] * qt[i];
          m += std::fabs(S[size_t(i) * dv + j] * qt[i]);
        }
        o[j] = double(scale) * s;
        if (om) om[j] = std::fabs(double(scale)) * m;
      }
    }
}

// T_C = A_{t_L} ⋯ A_{t_1} per value head, A_t = (I − β_t k_t k_tᵀ)·D_t: [nv, dk, dk] row-major.
inline std::vector<double> delta_transition_reference(int nk, int nv, int dk, int L,
                                                      const float* k, RefGate gate,
                                                      const float* g, const float* beta) {
  std::vector<double> T(size_t(nv) * dk * dk, 0.0), w(static_cast<size_t>(dk));
  const int rep = nv / nk;
  for (int h = 0; h < nv; ++h) {
    double* Th = T.data() + size_t(h) * dk * dk;
    for (int i = 0; i < dk; ++i) Th[size_t(i) * dk + i] = 1.0;
    for (int t = 0; t < L; ++t) {
      const float* kt = k + (size_t(t) * nk + h / rep) * dk;
      const double b = beta[size_t(t) * nv + h];
      for (int i = 0; i < dk; ++i) {  // D·T (rows)
        const double dcy = delta_ref_decay(gate, g, nv, dk, t, h, i);
        for (int j = 0; j < dk; ++j) Th[size_t(i) * dk + j] *= dcy;
      }
      for (int j = 0; j < dk; ++j) {  // w = Tᵀk
        double s = 0;
        for (int i = 0; i < dk; ++i) s += Th[size_t(i) * dk + j] * kt[i];
        w[size_t(j)] = s;
      }
      for (int i = 0; i < dk; ++i)  // T ← T − β k wᵀ
        for (int j = 0; j < dk; ++j) Th[size_t(i) * dk + j] -= b * kt[i] * w[size_t(j)];
    }
  }
  return T;
}

// The largest ∞-norm condition number κ(I + M) = ‖I+M‖∞·‖(I+M)⁻¹‖∞ over all heads and
// 64-token chunks, M_ij = β_i Σ_d k_{i,d} k_{j,d} e^{G_{i,d}−G_{j,d}} (i > j) — the unit lower
// triangular system the chunked kernel solves; its rounding is amplified by up to κ.
inline double delta_chunk_condition(int nk, int nv, int dk, int L, const float* k, RefGate gate,
                                    const float* g, const float* beta, int chunk = 64) {
  const int rep = nv / nk;
  double worst = 1.0;
  for (int h = 0; h < nv; ++h)
    for (int t0 = 0; t0 < L; t0 += chunk) {
      const int n = std::min(chunk, L - t0);
      std::vector<double> G(size_t(n) * dk, 0.0), A(size_t(n) * n, 0.0), T(size_t(n) * n, 0.0);
      for (int i = 0; i < n; ++i)
        for (int d = 0; d < dk; ++d) {
          const double lg = std::log(delta_ref_decay(gate, g, nv, dk, t0 + i, h, d));
          G[size_t(i) * dk + d] = (i ? G[size_t(i - 1) * dk + d] : 0.0) + lg;
        }
      for (int i = 0; i < n; ++i) {
        A[size_t(i) * n + i] = 1.0;
        const float* ki = k + (size_t(t0 + i) * nk + h / rep) * dk;
        for (int j = 0; j < i; ++j) {
          const float* kj = k + (size_t(t0 + j) * nk + h / rep) * dk;
          double s = 0;
          for (int d = 0; d < dk; ++d)
            s += double(ki[d]) * kj[d] * std::exp(G[size_t(i) * dk + d] - G[size_t(j) * dk + d]);
          A[size_t(i) * n + j] = beta[size_t(t0 + i) * nv + h] * s;
        }
      }
      for (int c = 0; c < n; ++c)  // T = A⁻¹, column by column
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
  return worst;
}

}  // namespace hypic::test
