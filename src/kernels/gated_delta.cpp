// Gated DeltaNet kernels: the GDN entry points of the delta-rule engine (delta_chunk.h,
// where the chunked algorithm, its parallel layout and its measurements are documented).
#include "kernels/gated_delta.h"

#include "core/status.h"
#include "kernels/delta_chunk.h"

namespace hypic::kernels {
namespace {

delta_chunk::Problem problem(const GdnDims& d, int L, const float* q, const float* k,
                             const float* v, const float* g, const float* beta) {
  HYPIC_CHECK(d.nk > 0 && d.nv > 0 && d.dk > 0 && d.dv > 0, "bad GdnDims");
  HYPIC_CHECK(d.nv % d.nk == 0, "nv must be a multiple of nk");
  delta_chunk::Problem p;
  p.nk = d.nk;
  p.nv = d.nv;
  p.dk = d.dk;
  p.dv = d.dv;
  p.L = L;
  p.q = q;
  p.k = k;
  p.v = v;
  p.g = g;
  p.beta = beta;
  p.gate = g ? delta_chunk::Gate::kScalar : delta_chunk::Gate::kNone;
  return p;
}

}  // namespace

void gdn_prefill(const GdnDims& d, int L, const float* q, const float* k, const float* v,
                 const float* g, const float* beta, float* state, float* out) {
  HYPIC_CHECK(L >= 1, "gdn_prefill needs L >= 1");
  delta_chunk::prefill(problem(d, L, q, k, v, g, beta), state, out);
}

void gdn_step(const GdnDims& d, int B, const float* q, const float* k, const float* v,
              const float* g, const float* beta, float* const* states, float* out) {
  delta_chunk::step(problem(d, B, q, k, v, g, beta), states, out);
}

void gdn_build_transition(const GdnDims& d, int L, const float* q, const float* k,
                          const float* v, const float* g, const float* beta, float* T,
                          float* s0, float* out) {
  delta_chunk::build_transition(problem(d, L, q, k, v, g, beta), T, s0, out);
}

double gdn_prefill_flops(const GdnDims& d, int L) {
  const double dk = d.dk, dv = d.dv;
  auto chunk = [&](int ni) {  // one chunk of ni tokens, one value head
    const double n = ni;
    const double tri_strict = n * (n - 1) / 2, tri = n * (n + 1) / 2;
    double inv = 0;  // Σ_i Σ_{j<i} 2(j+1)
    for (int j = 0; j + 1 < ni; ++j) inv += 2.0 * (j + 1) * (n - 1 - j);
    return tri_strict * 2 * dk + tri * 2 * dk + inv + tri * 2 * (dk + dv) + 3 * 2 * n * dk * dv +
           tri * 2 * dv;
  };
  const int full = L / delta_chunk::kChunk, tail = L % delta_chunk::kChunk;
  return (full * chunk(delta_chunk::kChunk) + (tail ? chunk(tail) : 0.0)) * d.nv;
}

}  // namespace hypic::kernels
