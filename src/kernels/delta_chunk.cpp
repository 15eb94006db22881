// The delta-rule chunk engine. See delta_chunk.h for the math and the API.
//
// Layout of the work:
//  * prefill / build_transition: one task per key head (its nv/nk value heads together,
//    sharing K·Kᵀ and Q·Kᵀ) — or per value head when there are fewer key heads than threads,
//    and always for per-channel gates — spread by hypic::parallel_for (OpenMP, dynamic
//    schedule, one barrier per call). A task runs its heads' whole sequence chunk by chunk
//    (run_group_chunks), so the states [dk, width] and all chunk temporaries (~0.4 MiB) stay
//    in the core's L2 for the whole call.
//    Inside a chunk every product is a small GEMM on small_gemm (small_gemm.h), operands
//    read in place with their strides, triangular operands skipped block-wise.
//    Measured alternative (nk=16, nv=32, dk=dv=128, L=4096, 2 cores): chunk-major, each
//    S-dependent product batched across the 32 heads in one oneDNN matmul (brgemm
//    avx512) — ~140 ms against ~107 ms here; its batched scan alone (~84 ms) costs more than
//    the whole per-head scan here, and its 5 barriers per chunk make it fragile on a
//    shared machine. So the per-head layout is the one kept.
//  * step: one task per (sequence, value head); the state is swept in L1-sized column
//    blocks (read Sᵀk, then update + read Sᵀq), so it streams through memory once.
//
// Gates. The scalar path (GDN; DeltaNet as g = 0) keeps G as one double per token and takes
// e^{G_i−G_j} pairwise for i > j. Per-channel gates (KDA) cannot use a shared K·Kᵀ: the
// pairwise weights differ per channel. The chunk is cut into kSub-row blocks; for a block
// I = [i0, i1) and j < i0 the weight factors through r = i0:
//     e^{G_{i,d} − G_{j,d}} = e^{G_{i,d} − G_{r,d}} · e^{G_{r,d} − G_{j,d}},   j < r ≤ i,
// and since G is non-increasing both factors lie in (0, 1]: nothing overflows, and a factor
// that underflows to 0 means the true weight is below FLT_MIN. So M[I, <i0] and A_qk[I, <i0]
// are two GEMMs of (β ⊙ K_I ⊙ e^{G_I − G_r}) resp. (Q_I ⊙ e^{G_I − G_r}) with
// (K_{<i0} ⊙ e^{G_r − G_{<i0}})ᵀ. Inside a diagonal block (j, i ∈ I) no such r exists and
// e^{G_i − G_j} is formed pairwise per channel (kSub(kSub−1)/2 pairs × dk exps per block).
#include "kernels/delta_chunk.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/fp_env.h"
#include "core/parallel.h"
#include "core/status.h"
#include "kernels/elementwise.h"
#include "kernels/small_gemm.h"

namespace hypic::kernels::delta_chunk {
namespace {

// Tm = (I + M)⁻¹ for the strictly lower triangular M (n × n, ld kChunk), by forward
// substitution row by row: row_i = e_i − Σ_{j<i} M_ij row_j. Row j is zero beyond column j,
// so every row is computed over the full kChunk width (zeros included) with the
// accumulators in registers. Writes rows [0, n) of Tm over kChunk columns.
void unit_lower_inverse(int n, const float* M, float* Tm) {
  constexpr int C = kChunk;
#if defined(__AVX2__) && defined(__FMA__)
  static_assert(C == 64, "the register blocking below assumes 64-wide rows");
  for (int i = 0; i < n; ++i) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    const float* mrow = M + int64_t(i) * C;
    for (int j = 0; j < i; ++j) {
      const __m256 m = _mm256_set1_ps(-mrow[j]);
      const float* t = Tm + int64_t(j) * C;
      a0 = _mm256_fmadd_ps(m, _mm256_loadu_ps(t), a0);
      a1 = _mm256_fmadd_ps(m, _mm256_loadu_ps(t + 8), a1);
      a2 = _mm256_fmadd_ps(m, _mm256_loadu_ps(t + 16), a2);
      a3 = _mm256_fmadd_ps(m, _mm256_loadu_ps(t + 24), a3);
      a4 = _mm256_fmadd_ps(m, _mm256_loadu_ps(t + 32), a4);
      a5 = _mm256_fmadd_ps(m, _mm256_loadu_ps(t + 40), a5);
      a6 = _mm256_fmadd_ps(m, _mm256_loadu_ps(t + 48), a6);
      a7 = _mm256_fmadd_ps(m, _mm256_loadu_ps(t + 56), a7);
    }
    float* trow = Tm + int64_t(i) * C;
    _mm256_storeu_ps(trow, a0);
    _mm256_storeu_ps(trow + 8, a1);
    _mm256_storeu_ps(trow + 16, a2);
    _mm256_storeu_ps(trow + 24, a3);
    _mm256_storeu_ps(trow + 32, a4);
    _mm256_storeu_ps(trow + 40, a5);
    _mm256_storeu_ps(trow + 48, a6);
    _mm256_storeu_ps(trow + 56, a7);
    trow[i] = 1.0f;  // column i gets nothing from rows j < i
  }
#else
  for (int i = 0; i < n; ++i) {
    float* trow = Tm + int64_t(i) * C;
    std::fill(trow, trow + C, 0.0f);
    const float* mrow = M + int64_t(i) * C;
    for (int j = 0; j < i; ++j) {
      const float m = -mrow[j];
      const float* tj = Tm + int64_t(j) * C;
      for (int c = 0; c <= j; ++c) trow[c] += m * tj[c];
    }
    trow[i] = 1.0f;
  }
#endif
}

// dst[c * ldd + r] = src[r * lds + c] for r < rows, c < cols.
void transpose(int rows, int cols, const float* src, int64_t lds, float* dst, int64_t ldd) {
  int r0 = 0;
#if defined(__AVX2__) && defined(__FMA__)
  for (; r0 + 8 <= rows; r0 += 8) {
    int c0 = 0;
    for (; c0 + 8 <= cols; c0 += 8) {
      __m256 v[8], t[8];
      for (int k = 0; k < 8; ++k) v[k] = _mm256_loadu_ps(src + int64_t(r0 + k) * lds + c0);
      t[0] = _mm256_unpacklo_ps(v[0], v[1]);
      t[1] = _mm256_unpackhi_ps(v[0], v[1]);
      t[2] = _mm256_unpacklo_ps(v[2], v[3]);
      t[3] = _mm256_unpackhi_ps(v[2], v[3]);
      t[4] = _mm256_unpacklo_ps(v[4], v[5]);
      t[5] = _mm256_unpackhi_ps(v[4], v[5]);
      t[6] = _mm256_unpacklo_ps(v[6], v[7]);
      t[7] = _mm256_unpackhi_ps(v[6], v[7]);
      v[0] = _mm256_shuffle_ps(t[0], t[2], _MM_SHUFFLE(1, 0, 1, 0));
      v[1] = _mm256_shuffle_ps(t[0], t[2], _MM_SHUFFLE(3, 2, 3, 2));
      v[2] = _mm256_shuffle_ps(t[1], t[3], _MM_SHUFFLE(1, 0, 1, 0));
      v[3] = _mm256_shuffle_ps(t[1], t[3], _MM_SHUFFLE(3, 2, 3, 2));
      v[4] = _mm256_shuffle_ps(t[4], t[6], _MM_SHUFFLE(1, 0, 1, 0));
      v[5] = _mm256_shuffle_ps(t[4], t[6], _MM_SHUFFLE(3, 2, 3, 2));
      v[6] = _mm256_shuffle_ps(t[5], t[7], _MM_SHUFFLE(1, 0, 1, 0));
      v[7] = _mm256_shuffle_ps(t[5], t[7], _MM_SHUFFLE(3, 2, 3, 2));
      for (int k = 0; k < 4; ++k) {
        _mm256_storeu_ps(dst + int64_t(c0 + k) * ldd + r0, _mm256_permute2f128_ps(v[k], v[k + 4], 0x20));
        _mm256_storeu_ps(dst + int64_t(c0 + k + 4) * ldd + r0, _mm256_permute2f128_ps(v[k], v[k + 4], 0x31));
      }
    }
    for (; c0 < cols; ++c0)
      for (int k = 0; k < 8; ++k) dst[int64_t(c0) * ldd + r0 + k] = src[int64_t(r0 + k) * lds + c0];
  }
#endif
  for (; r0 < rows; ++r0)
    for (int c = 0; c < cols; ++c) dst[int64_t(c) * ldd + r0] = src[int64_t(r0) * lds + c];
}

constexpr int64_t rup16(int64_t n) { return (n + 15) & ~int64_t(15); }

// Per-channel gates, step 1b: M (strictly lower, rows [0, n)) and, when Q is given, A_qk
// (lower incl. diagonal, zeros above up to column n) of one head's chunk. See the file
// comment for the factorisation through r = i0.
//   Gd: [n, dk] cumulative log gates (double)   K, Q: rows of the chunk (ld k_ld, q_ld)
//   scratch: Kr [C, dk], KrT [dk, C], Xk, Xq [kSub, dk], E [kSub·dk]
void channel_pairwise(int n, int dk, const double* Gd, const float* K, int64_t k_ld,
                      const float* Q, int64_t q_ld, const float* bet, float* Mx, float* Aqk,
                      float* Kr, float* KrT, float* Xk, float* Xq, float* E) {
  constexpr int C = kChunk;
  for (int i0 = 0; i0 < n; i0 += kSub) {
    const int i1 = std::min(n, i0 + kSub), ib = i1 - i0;
    const double* Gr = Gd + int64_t(i0) * dk;
    if (i0 > 0) {
      // Kr_j = k_j ⊙ e^{G_r − G_j} for j < i0, then transposed (B operand).
      for (int j = 0; j < i0; ++j) {
        const double* Gj = Gd + int64_t(j) * dk;
        float* kr = Kr + int64_t(j) * dk;
#pragma omp simd
        for (int d = 0; d < dk; ++d) kr[d] = float(Gr[d] - Gj[d]);
      }
      exp_array(Kr, Kr, int64_t(i0) * dk);
      for (int j = 0; j < i0; ++j) {
        const float* kj = K + int64_t(j) * k_ld;
        float* kr = Kr + int64_t(j) * dk;
#pragma omp simd
        for (int d = 0; d < dk; ++d) kr[d] *= kj[d];
      }
      transpose(i0, dk, Kr, dk, KrT, C);
      // Xk_i = β_i k_i ⊙ e^{G_i − G_r}, Xq_i = q_i ⊙ e^{G_i − G_r}, i ∈ [i0, i1).
      for (int r = 0; r < ib; ++r) {
        const double* Gi = Gd + int64_t(i0 + r) * dk;
        float* e = E + int64_t(r) * dk;
#pragma omp simd
        for (int d = 0; d < dk; ++d) e[d] = float(Gi[d] - Gr[d]);
      }
      exp_array(E, E, int64_t(ib) * dk);
      for (int r = 0; r < ib; ++r) {
        const float* e = E + int64_t(r) * dk;
        const float* ki = K + int64_t(i0 + r) * k_ld;
        float* xk = Xk + int64_t(r) * dk;
        const float b = bet[i0 + r];
#pragma omp simd
        for (int d = 0; d < dk; ++d) xk[d] = b * ki[d] * e[d];
        if (Q) {
          const float* qi = Q + int64_t(i0 + r) * q_ld;
          float* xq = Xq + int64_t(r) * dk;
#pragma omp simd
          for (int d = 0; d < dk; ++d) xq[d] = qi[d] * e[d];
        }
      }
      small_gemm(ib, i0, dk, 1.0f, Xk, dk, false, KrT, C, 0.0f, Mx + int64_t(i0) * C, C);
      if (Q) small_gemm(ib, i0, dk, 1.0f, Xq, dk, false, KrT, C, 0.0f, Aqk + int64_t(i0) * C, C);
    }
    // Diagonal block: e^{G_i − G_j} pairwise per channel, i0 ≤ j < i.
    for (int i = i0; i < i1; ++i) {
      const double* Gi = Gd + int64_t(i) * dk;
      const int nj = i - i0;
      for (int jj = 0; jj < nj; ++jj) {
        const double* Gj = Gd + int64_t(i0 + jj) * dk;
        float* e = E + int64_t(jj) * dk;
#pragma omp simd
        for (int d = 0; d < dk; ++d) e[d] = float(Gi[d] - Gj[d]);
      }
      exp_array(E, E, int64_t(nj) * dk);
      const float* ki = K + int64_t(i) * k_ld;
      const float* qi = Q ? Q + int64_t(i) * q_ld : nullptr;
      float* mrow = Mx + int64_t(i) * C;
      float* arow = Aqk + int64_t(i) * C;
      for (int jj = 0; jj < nj; ++jj) {
        const float* kj = K + int64_t(i0 + jj) * k_ld;
        const float* e = E + int64_t(jj) * dk;
        float m = 0.0f, a = 0.0f;
        if (qi) {
#pragma omp simd reduction(+ : m, a)
          for (int d = 0; d < dk; ++d) {
            const float w = kj[d] * e[d];
            m += ki[d] * w;
            a += qi[d] * w;
          }
          arow[i0 + jj] = a;
        } else {
#pragma omp simd reduction(+ : m)
          for (int d = 0; d < dk; ++d) m += ki[d] * (kj[d] * e[d]);
        }
        mrow[i0 + jj] = bet[i] * m;
      }
      if (qi) {
        float a = 0.0f;
#pragma omp simd reduction(+ : a)
        for (int d = 0; d < dk; ++d) a += qi[d] * ki[d];
        arow[i] = a;  // e^0 = 1
        for (int j = i + 1; j < n; ++j) arow[j] = 0.0f;
      }
    }
  }
}

// One token of one head, decay first (delta_chunk.h):
//   S′ = D·S;  δ = β (v − S′ᵀk);  S ← S′ + k δᵀ;  o = Sᵀq.
// The state is swept in column blocks small enough for L1 ([dk × 64] = 32 KiB at dk = 128),
// so the second pass over a block hits L1 and the state streams through memory once.
// kChannel: D = Diag(e^{g}), eg: [dk] = e^{g}; else D = decay·I.
template <bool kChannelGate>
void step_head(int dk, int dv, const float* qv, const float* kv, const float* vv, float decay,
               const float* eg, float bt, float* S, float* o, float* delta) {
  auto block = [&](int j0, auto width) {
    const int w = width;  // compile-time 64 for full blocks: fixed-trip vector loops
    float* dl = delta + j0;
    float* ob = o + j0;
    // S′ᵀk: for a scalar decay, e^g·(Sᵀk); per channel, Sᵀ(e^g ⊙ k).
    std::fill(dl, dl + w, 0.0f);
    for (int i = 0; i < dk; ++i) {
      const float ki = kChannelGate ? kv[i] * eg[i] : kv[i];
      const float* row = S + int64_t(i) * dv + j0;
#pragma omp simd
      for (int j = 0; j < w; ++j) dl[j] += ki * row[j];
    }
    const float dread = kChannelGate ? 1.0f : decay;
#pragma omp simd
    for (int j = 0; j < w; ++j) dl[j] = bt * (vv[j0 + j] - dread * dl[j]);
    // S ← D·S + k δᵀ, and o = S_newᵀ q in the same pass.
    std::fill(ob, ob + w, 0.0f);
    for (int i = 0; i < dk; ++i) {
      const float ki = kv[i], qi = qv[i];
      const float di = kChannelGate ? eg[i] : decay;
      float* row = S + int64_t(i) * dv + j0;
#pragma omp simd
      for (int j = 0; j < w; ++j) {
        const float x = di * row[j] + ki * dl[j];
        row[j] = x;
        ob[j] += qi * x;
      }
    }
  };
  constexpr int kCols = 64;
  int j0 = 0;
  for (; j0 + kCols <= dv; j0 += kCols) block(j0, std::integral_constant<int, kCols>{});
  if (j0 < dv) block(j0, dv - j0);
}

void check_problem(const Problem& p) {
  HYPIC_CHECK(p.nk > 0 && p.nv > 0 && p.dk > 0 && p.dv > 0 && p.L >= 0, "bad delta-rule dims");
  HYPIC_CHECK(p.nv % p.nk == 0, "nv must be a multiple of nk");
  HYPIC_CHECK(p.L == 0 || (p.k && p.v && p.beta), "k, v and beta are required");
  HYPIC_CHECK(p.L == 0 || (p.gate == Gate::kNone) == (p.g == nullptr),
              "g must be given exactly when the family has a gate");
}

// Value heads per task: the value heads of a key head share K·Kᵀ and Q·Kᵀ (scalar gates),
// worth it when there are at least as many key heads as threads.
int task_group(const Problem& p) {
  const int rep = p.nv / p.nk;
  return (p.gate != Gate::kChannel && rep > 1 && p.nk >= num_threads()) ? rep : 1;
}

// Head hv's strided view of p (outputs: out_ld columns apart, v_cols = dv).
HeadSeq head_seq(const Problem& p, int hv, float* out, int64_t out_ld) {
  const int hk = hv / (p.nv / p.nk);
  HeadSeq s;
  s.L = p.L;
  s.q = out ? p.q + int64_t(hk) * p.dk : nullptr;
  s.q_ld = int64_t(p.nk) * p.dk;
  s.k = p.k + int64_t(hk) * p.dk;
  s.k_ld = int64_t(p.nk) * p.dk;
  s.v = p.v + int64_t(hv) * p.dv;
  s.v_ld = int64_t(p.nv) * p.dv;
  s.v_cols = p.dv;
  s.gate = p.gate;
  switch (p.gate) {
    case Gate::kNone: break;
    case Gate::kScalar:
      s.g = p.g + hv;
      s.g_ld = p.nv;
      break;
    case Gate::kChannel:
      s.g = p.g + int64_t(hv) * p.dk;
      s.g_ld = int64_t(p.nv) * p.dk;
      break;
  }
  s.beta = p.beta + hv;
  s.beta_ld = p.nv;
  s.out = out ? out + int64_t(hv) * p.dv : nullptr;
  s.out_ld = out_ld;
  return s;
}

constexpr int kMaxGroup = 16;

}  // namespace

// ---------------------------------------------------------------------------------------
// Chunk scratch. Sub-buffers (floats, each rounded up to 16 for 64-byte alignment):
//   G (double), eG, eGC, beta, tmp : kChunk each    gates and decays of the chunk
//   KT   [dk, C]        Kᵀ of the chunk (B operand of K·Kᵀ and Q·Kᵀ)
//   KK   [C, C]         K·Kᵀ (lower; shared by the heads of a group)
//   QK   [C, C]         Q·Kᵀ (lower; shared)
//   M    [C, C]         M (strictly lower), per head
//   Aqk  [C, C]         A_qk (lower incl. diagonal, zeros above), per head
//   Tm   [C, C]         (I + M)^{-1}
//   R    [C, dk+width]  [β e^G K | β V]
//   WU   [C, dk+width]  [W | U], U becomes V_new
//   X    [C, dk]        Q ⊙ e^G, then K ⊙ e^{G_C − G}
// and for per-channel gates:
//   Gd (double) [C, dk], eGv [C, dk] = e^{G}, eGCv [C, dk] = e^{G_C − G},
//   Kr [C, dk], KrT [dk, C], Xk, Xq, E [kSub, dk]   (channel_pairwise)
int64_t ChunkScratch::floats_needed(int dk, int width, bool channel_gates) {
  constexpr int64_t C = kChunk;
  const int64_t cd = C * int64_t(dk);
  int64_t n = 6 * rup16(C) + rup16(cd) + 5 * rup16(C * C) + 2 * rup16(C * (int64_t(dk) + width)) +
              rup16(cd);
  if (channel_gates) n += rup16(2 * cd) + 4 * rup16(cd) + 3 * rup16(int64_t(kSub) * dk);
  return n;
}

ChunkScratch::~ChunkScratch() { std::free(buf); }

void ChunkScratch::ensure(int dk, int width, bool channel_gates) {
  const int64_t need = floats_needed(dk, width, channel_gates);
  if (need <= cap) return;
  std::free(buf);
  buf = static_cast<float*>(std::aligned_alloc(64, size_t(need) * sizeof(float)));
  HYPIC_CHECK(buf != nullptr, "delta-rule scratch allocation failed");
  cap = need;
}

void run_group_chunks(int dk, int width, int nh, const HeadSeq* seqs, float* const* states,
                      ChunkScratch& ws) {
  constexpr int C = kChunk;
  HYPIC_CHECK(nh >= 1 && dk > 0 && width > 0);
  const HeadSeq& s0 = seqs[0];
  const bool chan = s0.gate == Gate::kChannel;
  for (int h = 0; h < nh; ++h) {
    const HeadSeq& s = seqs[h];
    HYPIC_CHECK(s.L == s0.L && s.k == s0.k && s.k_ld == s0.k_ld && s.q == s0.q &&
                    s.q_ld == s0.q_ld && (s.q == nullptr || s.out != nullptr),
                "heads of a group share q and k");
    HYPIC_CHECK(s.gate == s0.gate && (s.gate == Gate::kNone || s.g != nullptr));
    HYPIC_CHECK(s.v_cols >= 0 && s.v_cols <= width);
  }
  ws.ensure(dk, width, chan);
  float* p = ws.buf;
  auto take = [&p](int64_t n) { float* r = p; p += rup16(n); return r; };
  double* G = reinterpret_cast<double*>(take(2 * C));
  float* eG = take(C);
  float* eGC = take(C);
  float* bet = take(C);
  float* tmp = take(C);
  float* KT = take(int64_t(dk) * C);
  float* KK = take(C * C);
  float* QK = take(C * C);
  float* Mx = take(C * C);
  float* Aqk = take(C * C);
  float* Tm = take(C * C);
  const int RW = dk + width;
  float* R = take(int64_t(C) * RW);
  float* WU = take(int64_t(C) * RW);
  float* X = take(int64_t(C) * dk);
  float* const Wm = WU;      // W  [n, dk]    ld RW
  float* const U = WU + dk;  // U → V_new [n, width], ld RW
  double* Gd = nullptr;
  float *eGv = nullptr, *eGCv = nullptr, *Kr = nullptr, *KrT = nullptr, *Xk = nullptr,
        *Xq = nullptr, *E = nullptr;
  if (chan) {
    Gd = reinterpret_cast<double*>(take(2 * int64_t(C) * dk));
    eGv = take(int64_t(C) * dk);
    eGCv = take(int64_t(C) * dk);
    Kr = take(int64_t(C) * dk);
    KrT = take(int64_t(dk) * C);
    Xk = take(int64_t(kSub) * dk);
    Xq = take(int64_t(kSub) * dk);
    E = take(int64_t(kSub) * dk);
  }

  for (int t0 = 0; t0 < s0.L; t0 += C) {
    // A short tail chunk is processed with its n real rows. That is exactly the zero
    // padding of SPEC §2 (k = v = g = β = 0 rows, A_t = I): padded rows would only add
    // exact zeros to every product and to the state.
    const int n = std::min(C, s0.L - t0);
    const float* Kr0 = s0.k + int64_t(t0) * s0.k_ld;
    const float* Qr = s0.q ? s0.q + int64_t(t0) * s0.q_ld : nullptr;

    // --- step 1a (shared by the group, scalar gates): K·Kᵀ and Q·Kᵀ, lower triangles.
    if (!chan) {
      transpose(n, dk, Kr0, s0.k_ld, KT, C);
      small_gemm(n, n, dk, 1.0f, Kr0, s0.k_ld, false, KT, C, 0.0f, KK, C, Tri::kCLower);
      if (Qr) small_gemm(n, n, dk, 1.0f, Qr, s0.q_ld, false, KT, C, 0.0f, QK, C, Tri::kCLower);
    }

    for (int h = 0; h < nh; ++h) {
      const HeadSeq& s = seqs[h];
      float* S = states[h];
      const int vc = s.v_cols;
      const float* Vr = s.v + int64_t(t0) * s.v_ld;
      for (int i = 0; i < n; ++i) bet[i] = s.beta[int64_t(t0 + i) * s.beta_ld];

      // --- gate stage: G = cumsum(g) inside the chunk, e^{G}, e^{G_C − G}.
      // G is accumulated in double: with strongly negative gates |G| reaches hundreds, and
      // in fp32 G_i − G_j would carry an absolute error ~|G|·ε, i.e. a relative error of
      // that size in e^{G_i−G_j} even when G_i ≈ G_j. In double the differences are exact
      // to fp32.
      float chunk_decay = 1.0f;
      if (!chan) {
        double acc = 0.0;
        for (int i = 0; i < n; ++i) {
          if (s.g) acc += double(s.g[int64_t(t0 + i) * s.g_ld]);
          G[i] = acc;
        }
        const double GC = G[n - 1];
        for (int i = 0; i < n; ++i) {
          eG[i] = float(G[i]);
          eGC[i] = float(GC - G[i]);
        }
        exp_array(eG, eG, n);
        exp_array(eGC, eGC, n);
        chunk_decay = eG[n - 1];
      } else {
        for (int i = 0; i < n; ++i) {
          const float* gi = s.g + int64_t(t0 + i) * s.g_ld;
          double* Gi = Gd + int64_t(i) * dk;
          const double* Gp = i > 0 ? Gi - dk : nullptr;
          if (Gp) {
#pragma omp simd
            for (int d = 0; d < dk; ++d) Gi[d] = Gp[d] + double(gi[d]);
          } else {
            for (int d = 0; d < dk; ++d) Gi[d] = double(gi[d]);
          }
        }
        const double* GC = Gd + int64_t(n - 1) * dk;
        for (int i = 0; i < n; ++i) {
          const double* Gi = Gd + int64_t(i) * dk;
          float* a = eGv + int64_t(i) * dk;
          float* b = eGCv + int64_t(i) * dk;
#pragma omp simd
          for (int d = 0; d < dk; ++d) {
            a[d] = float(Gi[d]);
            b[d] = float(GC[d] - Gi[d]);
          }
        }
        exp_array(eGv, eGv, int64_t(n) * dk);
        exp_array(eGCv, eGCv, int64_t(n) * dk);
      }

      // --- step 1b: M = β_i Σ_d k_i k_j e^{G_i−G_j} (i > j), A_qk likewise with q_i (i ≥ j).
      if (!chan) {
        for (int i = 0; i < n; ++i) {
          const double Gi = G[i];
          for (int j = 0; j < i; ++j) tmp[j] = float(Gi - G[j]);
          exp_array(tmp, tmp, i);  // pairwise e^{G_i − G_j}, never e^{G_i}·e^{−G_j}
          const float* kkrow = KK + int64_t(i) * C;
          float* mrow = Mx + int64_t(i) * C;
          const float bi = bet[i];
          for (int j = 0; j < i; ++j) mrow[j] = kkrow[j] * (bi * tmp[j]);
          if (Qr) {
            const float* qkrow = QK + int64_t(i) * C;
            float* arow = Aqk + int64_t(i) * C;  // diagonal kept (e^0 = 1), zeros above
            for (int j = 0; j < i; ++j) arow[j] = qkrow[j] * tmp[j];
            arow[i] = qkrow[i];
            for (int j = i + 1; j < n; ++j) arow[j] = 0.0f;
          }
        }
      } else {
        channel_pairwise(n, dk, Gd, Kr0, s0.k_ld, Qr, s0.q_ld, bet, Mx, Aqk, Kr, KrT, Xk, Xq, E);
      }

      // --- step 2: Tm = (I + M)^{-1} (forward substitution).
      unit_lower_inverse(n, Mx, Tm);

      // --- step 3: [W | U] = Tm · [β e^G K | β V].
      for (int i = 0; i < n; ++i) {
        float* rrow = R + int64_t(i) * RW;
        const float* krow = Kr0 + int64_t(i) * s0.k_ld;
        const float* vrow = Vr + int64_t(i) * s.v_ld;
        const float b = bet[i];
        if (!chan) {
          const float a = b * eG[i];
#pragma omp simd
          for (int d = 0; d < dk; ++d) rrow[d] = a * krow[d];
        } else {
          const float* e = eGv + int64_t(i) * dk;
#pragma omp simd
          for (int d = 0; d < dk; ++d) rrow[d] = b * e[d] * krow[d];
        }
#pragma omp simd
        for (int c = 0; c < vc; ++c) rrow[dk + c] = b * vrow[c];
      }
      small_gemm(n, dk + vc, n, 1.0f, Tm, C, false, R, RW, 0.0f, WU, RW, Tri::kALower);
      if (vc < width)
        for (int i = 0; i < n; ++i)
          std::fill(U + int64_t(i) * RW + vc, U + int64_t(i) * RW + width, 0.0f);

      // --- step 4: V_new = U − W·S (in place in U).
      small_gemm(n, width, dk, -1.0f, Wm, RW, false, S, width, 1.0f, U, RW);

      // --- step 5: O = (Q ⊙ e^G)·S + A_qk·V_new, the first v_cols columns.
      if (Qr) {
        float* O = s.out + int64_t(t0) * s.out_ld;
        for (int i = 0; i < n; ++i) {
          const float* qrow = Qr + int64_t(i) * s0.q_ld;
          float* xrow = X + int64_t(i) * dk;
          if (!chan) {
            const float e = eG[i];
#pragma omp simd
            for (int d = 0; d < dk; ++d) xrow[d] = qrow[d] * e;
          } else {
            const float* e = eGv + int64_t(i) * dk;
#pragma omp simd
            for (int d = 0; d < dk; ++d) xrow[d] = qrow[d] * e[d];
          }
        }
        small_gemm(n, vc, dk, 1.0f, X, dk, false, S, width, 0.0f, O, s.out_ld);
        small_gemm(n, vc, n, 1.0f, Aqk, C, false, U, RW, 1.0f, O, s.out_ld, Tri::kALower);
      }

      // --- step 6: S ← Diag(e^{G_C})·S + (K ⊙ e^{G_C − G})ᵀ·V_new.
      for (int i = 0; i < n; ++i) {
        const float* krow = Kr0 + int64_t(i) * s0.k_ld;
        float* xrow = X + int64_t(i) * dk;
        if (!chan) {
          const float e = eGC[i];
#pragma omp simd
          for (int d = 0; d < dk; ++d) xrow[d] = krow[d] * e;
        } else {
          const float* e = eGCv + int64_t(i) * dk;
#pragma omp simd
          for (int d = 0; d < dk; ++d) xrow[d] = krow[d] * e[d];
        }
      }
      if (chan) {
        const float* ec = eGv + int64_t(n - 1) * dk;
        for (int d = 0; d < dk; ++d) {
          float* row = S + int64_t(d) * width;
          const float e = ec[d];
#pragma omp simd
          for (int c = 0; c < width; ++c) row[c] *= e;
        }
      }
      small_gemm(dk, width, n, 1.0f, X, dk, true, U, RW, chunk_decay, S, width);
    }
  }
}

void run_head_chunks(int dk, int width, const HeadSeq& s, float* state, ChunkScratch& ws) {
  run_group_chunks(dk, width, 1, &s, &state, ws);
}

// ---------------------------------------------------------------------------------------
void prefill(const Problem& p, float* state, float* out) {
  check_problem(p);
  if (p.L == 0) return;
  HYPIC_CHECK(p.q != nullptr && out != nullptr, "prefill needs q and out");
  const int group = task_group(p);
  const int64_t out_ld = int64_t(p.nv) * p.dv;
  parallel_for(p.nv / group, [&](int64_t task) {
    const FlushDenormals ftz;
    thread_local ChunkScratch ws;
    HeadSeq seqs[kMaxGroup];
    float* states[kMaxGroup];
    const int h0 = int(task) * group;
    for (int h = h0; h < h0 + group;) {
      const int nh = std::min(kMaxGroup, h0 + group - h);
      for (int i = 0; i < nh; ++i) {
        seqs[i] = head_seq(p, h + i, out, out_ld);
        states[i] = state + int64_t(h + i) * p.dk * p.dv;
      }
      run_group_chunks(p.dk, p.dv, nh, seqs, states, ws);
      h += nh;
    }
  });
}

void build_transition(const Problem& p, float* T, float* s0, float* out) {
  check_problem(p);
  const bool outputs = p.q != nullptr && out != nullptr;
  const int group = task_group(p);
  const int dk = p.dk, dv = p.dv, W = dv + dk;
  const int64_t out_ld = int64_t(p.nv) * p.dv;
  parallel_for(p.nv / group, [&](int64_t task) {
    const FlushDenormals ftz;
    thread_local ChunkScratch ws;
    thread_local std::vector<float> aug;
    HeadSeq seqs[kMaxGroup];
    float* states[kMaxGroup];
    const int h0 = int(task) * group;
    for (int h = h0; h < h0 + group;) {
      const int nh = std::min(kMaxGroup, h0 + group - h);
      aug.assign(size_t(nh) * dk * W, 0.0f);  // [0 | I] per head
      for (int i = 0; i < nh; ++i) {
        seqs[i] = head_seq(p, h + i, outputs ? out : nullptr, out_ld);
        states[i] = aug.data() + size_t(i) * dk * W;
        for (int r = 0; r < dk; ++r) states[i][int64_t(r) * W + dv + r] = 1.0f;
      }
      if (p.L > 0) run_group_chunks(dk, W, nh, seqs, states, ws);
      for (int i = 0; i < nh; ++i) {
        const int64_t hv = h + i;
        for (int r = 0; r < dk; ++r) {
          const float* row = states[i] + int64_t(r) * W;
          std::memcpy(s0 + (hv * dk + r) * dv, row, size_t(dv) * sizeof(float));
          std::memcpy(T + (hv * dk + r) * dk, row + dv, size_t(dk) * sizeof(float));
        }
      }
      h += nh;
    }
  });
}

void step(const Problem& p, float* const* states, float* out) {
  check_problem(p);
  const int rep = p.nv / p.nk;
  const int dk = p.dk, dv = p.dv;
  const bool chan = p.gate == Gate::kChannel;
  auto one = [&](int64_t idx) {
    const FlushDenormals ftz;
    thread_local std::vector<float> tmp;
    if (int64_t(tmp.size()) < int64_t(dv) + dk) tmp.resize(size_t(dv) + dk);
    const int64_t b = idx / p.nv;
    const int h = int(idx % p.nv), hk = h / rep;
    const float* qv = p.q + (b * p.nk + hk) * dk;
    const float* kv = p.k + (b * p.nk + hk) * dk;
    const float* vv = p.v + idx * dv;
    float* S = states[b] + int64_t(h) * dk * dv;
    float* o = out + idx * dv;
    const float bt = p.beta[idx];
    if (chan) {
      float* eg = tmp.data() + dv;
      exp_array(p.g + idx * dk, eg, dk);
      step_head<true>(dk, dv, qv, kv, vv, 1.0f, eg, bt, S, o, tmp.data());
    } else {
      const float decay = p.g ? std::exp(p.g[idx]) : 1.0f;
      step_head<false>(dk, dv, qv, kv, vv, decay, nullptr, bt, S, o, tmp.data());
    }
  };
  // A step is ~1 µs per 16 K state entries; below ~256 KiB of state in all a parallel region
  // (and its barrier) costs more than it saves.
  const int64_t tasks = int64_t(p.L) * p.nv;
  if (tasks * dk * dv < (int64_t(1) << 16)) {
    for (int64_t i = 0; i < tasks; ++i) one(i);
  } else {
    parallel_for(tasks, one);
  }
}

double prefill_flops(const LaDims& d, int L) {
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

}  // namespace hypic::kernels::delta_chunk

// ---------------------------------------------------------------------------------------
namespace hypic::kernels {
namespace {
void scale_outputs(float scale, float* out, int64_t n) {
  if (scale == 1.0f) return;
  for (int64_t i = 0; i < n; ++i) out[i] *= scale;
}
}  // namespace

delta_chunk::Problem DeltaRuleAttention::problem(const LaInputs& in) const {
  delta_chunk::Problem p;
  p.nk = d_.nk;
  p.nv = d_.nv;
  p.dk = d_.dk;
  p.dv = d_.dv;
  p.L = in.L;
  p.q = in.q;
  p.k = in.k;
  p.v = in.v;
  p.g = in.g;
  p.beta = in.beta;
  p.gate = gate_;
  HYPIC_CHECK(in.L == 0 || (gate_ == delta_chunk::Gate::kNone) == (in.g == nullptr),
              gate_ == delta_chunk::Gate::kNone ? "DeltaNet takes no gate g"
                                                : "this delta-rule family needs its gate g");
  HYPIC_CHECK(in.L == 0 || in.beta != nullptr, "delta-rule families need beta: [L, nv]");
  return p;
}

void DeltaRuleAttention::prefill(const LaInputs& in, float* state, float* out) const {
  delta_chunk::prefill(problem(in), state, out);
  scale_outputs(in.scale, out, int64_t(in.L) * d_.nv * d_.dv);
}

void DeltaRuleAttention::step(const LaInputs& in, float* const* states, float* out) const {
  delta_chunk::step(problem(in), states, out);
  scale_outputs(in.scale, out, int64_t(in.L) * d_.nv * d_.dv);
}

void DeltaRuleAttention::build_transition(const LaInputs& in, Transition* T, float* s0) const {
  build_transition_with_outputs(in, T, s0, nullptr);
}

void DeltaRuleAttention::build_transition_with_outputs(const LaInputs& in, Transition* T,
                                                       float* s0, float* out) const {
  T->form = TransitionForm::kDense;
  T->nv = d_.nv;
  T->dk = d_.dk;
  T->data.resize(size_t(d_.nv) * d_.dk * d_.dk);
  delta_chunk::Problem p = problem(in);
  if (!out) p.q = nullptr;
  delta_chunk::build_transition(p, T->data.data(), s0, out);
  if (out && p.q) scale_outputs(in.scale, out, int64_t(in.L) * d_.nv * d_.dv);
}

double DeltaRuleAttention::prefill_flops(int L) const { return delta_chunk::prefill_flops(d_, L); }

}  // namespace hypic::kernels
