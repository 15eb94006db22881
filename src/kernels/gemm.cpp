#include "kernels/gemm.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "core/cpu.h"
#include "core/ggml_quant.h"
#include "core/parallel.h"
#include "core/timer.h"
#include "kernels/gemm_avx2.h"
#include "kernels/gemv.h"

namespace hypic::kernels {
namespace {

using dnnl::memory;
using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

#if defined(__x86_64__)
// oneDNN's ISA for a tier: the start-up cap is set before the first primitive exists (later
// calls cannot change it).
dnnl::cpu_isa dnnl_isa(cpu::Tier t) {
  switch (t) {
    case cpu::Tier::kGeneric:
    case cpu::Tier::kAvx2: return dnnl::cpu_isa::avx2;
    case cpu::Tier::kAvxVnni: return dnnl::cpu_isa::avx2_vnni;
    case cpu::Tier::kAvx512: return dnnl::cpu_isa::avx512_core;
    case cpu::Tier::kAvx512Vnni: return dnnl::cpu_isa::avx512_core_vnni;
    case cpu::Tier::kAvx512Bf16: return dnnl::cpu_isa::avx512_core_bf16;
    case cpu::Tier::kAmx: return dnnl::cpu_isa::all;
  }
  return dnnl::cpu_isa::all;
}
#endif

dnnl::engine& cpu_engine() {
  static dnnl::engine eng = [] {
#if defined(__x86_64__)
    if (cpu::startup_cap() != cpu::best_tier()) dnnl::set_max_cpu_isa(dnnl_isa(cpu::startup_cap()));
#endif
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return eng;
}

[[noreturn]] void fail(const std::string& what, const std::exception& e) {
  throw KernelError("oneDNN could not " + what + " on this CPU (" + cpu::model_name() +
                    ", ISA tier " + cpu::tier_name(cpu::tier()) + "): " + e.what() +
                    ". Try --dtype f32, or HYPIC_MAX_ISA=" + cpu::tier_name(cpu::Tier(1)) +
                    ", and report this with the output of `hypic --version`");
}

std::string shape(int64_t M, int64_t K, int64_t N, dt wt) {
  return std::to_string(M) + "×" + std::to_string(K) + " · " + std::to_string(K) + "×" +
         std::to_string(N) + (wt == dt::bf16 ? " bf16" : " f32");
}

// Key: batch, M, K, N, weight type, ta, tb, accumulate, lda, ldc.
using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int, bool, bool, bool, int64_t, int64_t>;

struct Prim {
  dnnl::matmul prim;
  memory::desc a, b, c, scratch;
  std::string impl;
};

std::mutex g_mu;
std::map<Key, Prim>& cache() {
  static std::map<Key, Prim> c;
  return c;
}

// Row-tile size for the next call: prefill rows go in tiles of 1024, a shorter remainder in
// one tile rounded down to a multiple of 16 and then one tile of the last < 16 rows. A
// long-lived process thus creates at most ~80 primitives per weight shape (not one per
// length), and no weight matrix is streamed more than twice for M < 1024.
int64_t tile_rows(int64_t M) {
  if (M >= 1024) return 1024;
  return M >= 16 ? M / 16 * 16 : M;
}

const Prim& get_prim(int64_t batch, int64_t M, int64_t K, int64_t N, dt wt, bool ta, bool tb,
                     bool acc, int64_t lda, int64_t ldc) {
  Key key{batch, M, K, N, int(wt), ta, tb, acc, lda, ldc};
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = cache().find(key);
  if (it != cache().end()) return it->second;
  const dt at = (wt == dt::bf16) ? dt::bf16 : dt::f32;
  memory::desc a, b, c;
  if (batch == 1 && !ta) {
    a = memory::desc({M, K}, at, memory::dims{lda, 1});
    b = tb ? memory::desc({K, N}, wt, tag::ba) : memory::desc({K, N}, wt, tag::ab);
    c = memory::desc({M, N}, dt::f32, memory::dims{ldc, 1});
  } else {
    a = memory::desc({batch, M, K}, at, ta ? tag::acb : tag::abc);
    b = memory::desc({batch, K, N}, wt, tb ? tag::acb : tag::abc);
    c = memory::desc({batch, M, N}, dt::f32, tag::abc);
  }
  dnnl::primitive_attr attr;
  // User-provided scratchpad: each executing thread passes its own, so one primitive may
  // run concurrently on several threads (oneDNN's library-owned scratchpad is per primitive).
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (acc) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  try {
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, cpu_engine());
    Prim p{dnnl::matmul(pd), a, b, c, pd.scratchpad_desc(), pd.impl_info_str()};
    return cache().emplace(key, std::move(p)).first->second;
  } catch (const dnnl::error& e) {
    fail("create a matmul " + shape(M, K, N, wt), e);
  }
}

void run(const Prim& p, const void* a, const void* b, float* c) {
  thread_local dnnl::stream strm(cpu_engine());
  memory am(p.a, cpu_engine(), const_cast<void*>(a));
  memory bm(p.b, cpu_engine(), const_cast<void*>(b));
  memory cm(p.c, cpu_engine(), c);
  thread_local std::vector<uint8_t> scratch;
  if (scratch.size() < p.scratch.get_size()) scratch.resize(p.scratch.get_size());
  memory sm(p.scratch, cpu_engine(), scratch.data());
  try {
    p.prim.execute(strm, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm},
                          {DNNL_ARG_SCRATCHPAD, sm}});
    strm.wait();
  } catch (const dnnl::error& e) {
    fail("run a matmul (" + p.impl + ")", e);
  }
}

// Whether many rows of bf16 / packed weights are multiplied on oneDNN's bf16 matmul (x
// rounded to bf16), else on fp32 panels: bf16 where it is the faster, on AMX tiles and on
// AMD's AVX512-BF16 (Zen 4 on: h1024-8l prefill at 1,892 tok/s in bf16 against llama.cpp's
// 1,028, docs/BENCHMARKS.md). Intel's AVX512-BF16 without AMX issues vdpbf16ps on one port
// where fp32 FMAs use two: on a Xeon with AMX hidden, 2 threads, oneDNN 512 × 1024 × 6144 at
// 142 GFLOP/s in bf16 against 232 in fp32. oneDNN 2.6 has no bf16 matmul below AVX512-BF16.
// HYPIC_PREFILL_GEMM=bf16|f32 overrides the choice (where the CPU has the bf16 matmul).
std::atomic<PrefillGemm> g_prefill{[] {
  const char* e = std::getenv("HYPIC_PREFILL_GEMM");
  const std::string v = e ? e : "";
  return v == "bf16"   ? PrefillGemm::kBf16
         : v == "f32"  ? PrefillGemm::kF32
         : v == "int8" ? PrefillGemm::kInt8
                       : PrefillGemm::kAuto;
}()};

bool bf16_gemm() {
#if !defined(__x86_64__)
  return false;
#else
  using namespace cpu;
  if (!has(kAvx512F | kAvx512Bw | kAvx512Vl | kAvx512Bf16)) return false;
  switch (g_prefill.load(std::memory_order_relaxed)) {
    case PrefillGemm::kBf16: return true;
    case PrefillGemm::kAuto: return has(kAmxTile | kAmxBf16) || vendor() == Vendor::kAmd;
    default: return false;
  }
#endif
}

// Packed weights on 256-bit integer dot products (kernels/gemm_avx2.h) where there is no bf16
// matmul: x quantized per block as the GEMVs do it. h1024-8l prefill, 512 tokens, on a Xeon
// capped to AVX2, int8 / q4: fp32 panels 403 / 433, integer 574 / 748 tok/s; with AVX-VNNI
// (tier avx512_bf16) fp32 panels on zmm 636 / 649, integer 917 / 805. Q8 without AVX-VNNI needs
// vpsignb and vpmaddwd per product pair: on an AVX-512 CPU the fp32 panels on zmm beat it.
bool int8_gemm(DType t) {
#if !defined(__x86_64__)
  return false;
#else
  using namespace cpu;
  if (!has(kAvx2 | kFma | kF16c)) return false;
  switch (g_prefill.load(std::memory_order_relaxed)) {
    case PrefillGemm::kInt8: return true;
    case PrefillGemm::kAuto: return t == DType::kQ4T || has(kAvxVnni) || !has(kAvx512F);
    default: return false;
  }
#endif
}

// How many rows of weights of type t are multiplied.
enum class Method { kF32, kBf16, kBf16Panels, kF32Panels, kInt8 };
Method method(DType t) {
  if (t == DType::kF32) return Method::kF32;
  if (bf16_gemm()) return t == DType::kBF16 ? Method::kBf16 : Method::kBf16Panels;
  // ggml's blocks (kernels/gemv_ggml.h): Q4_0 and Q4_K as Q4T (re-laid a chunk at a time), the
  // others on dequantized panels.
  if (t == DType::kGQ4_0 || t == DType::kGQ4K) return int8_gemm(DType::kQ4T) ? Method::kInt8 : Method::kF32Panels;
  return dtype_packed(t) && !dtype_ggml(t) && int8_gemm(t) ? Method::kInt8 : Method::kF32Panels;
}

// Weight rows per oneDNN call of a many-row product: an eighth of W (tasks for 8 threads),
// at most ~4 MiB of fp32 weights, whole multiples of 64 rows (Q4T groups are never split). A
// shape's chunks never depend on the threads.
int64_t chunk_rows(int64_t N, int64_t K) {
  const int64_t eighth = (N + 7) / 8, cap = (int64_t(1) << 20) / K;
  return std::min(N, std::max<int64_t>(64, (std::min(eighth, cap) + 63) / 64 * 64));
}

// y [M, N] (+)= x · Wᵀ for many rows, by fixed chunks of W's rows, each chunk one task that
// multiplies it by every row tile of x on oneDNN (a call inside the parallel region runs on
// its thread alone). So each output element is computed by one call of a fixed shape with one
// thread: a row's result never depends on the thread count (oneDNN's own threading may split
// K, and its split follows the threads) — the determinism scatter's local lanes rely on.
// W as stored (F32; BF16 where oneDNN multiplies bf16, x rounded to bf16 once), or converted
// a chunk at a time into the task's buffer: packed W to bf16 (bf16_gemm) or to fp32, BF16 to
// fp32 (no bf16 matmul). No copy of the whole matrix is ever made.
void linear_chunks(const float* x, int64_t ldx, int64_t M, const Tensor& W, float* y,
                   int64_t ldy, bool accumulate) {
  const int64_t N = W.dim(0), K = W.dim(1);
  const DType t = W.dtype();
  const Method how = method(t);
  const int64_t chunk = chunk_rows(N, K);
#if defined(__x86_64__)
  if (how == Method::kInt8) {
    if (t != DType::kGQ4K) return avx2::linear_int8(x, ldx, M, W, y, ldy, accumulate, chunk);
    // Q4_K as Q4T leaves each 32-block an offset (core/ggml_quant.h): after the integer GEMM,
    // y += the sums of x's quantized blocks · offsetsᵀ, an fp32 product of K / 32 terms.
    // Both factors in this thread's buffers (kept: a fresh mapping per call cost page faults).
    const int64_t nb = K / 32;
    thread_local std::vector<float> sums, offs;
    sums.resize(size_t(M * nb));
    offs.resize(size_t(N * nb));
    float *xs = sums.data(), *off = offs.data();
    avx2::linear_int8(x, ldx, M, W, y, ldy, accumulate, chunk, xs, off);
    return linear_chunks(xs, nb, M, Tensor::view(DType::kF32, {N, nb}, off, nullptr), y, ldy, true);
  }
#endif
  const bool bf = how == Method::kBf16 || how == Method::kBf16Panels;
  const bool convert = how == Method::kBf16Panels || how == Method::kF32Panels;
  const size_t esz = bf ? 2 : 4;
  thread_local std::vector<uint16_t> xb;
  const void* xa = x;
  int64_t lda = ldx;
  if (bf) {
    xb.resize(size_t(M * K));
    uint16_t* xp = xb.data();  // thread_local: the workers must use this thread's buffer
    parallel_for(M, [&](int64_t i) { from_f32(DType::kBF16, x + i * ldx, xp + i * K, size_t(K)); });
    xa = xp;
    lda = K;
  }
  parallel_tasks((N + chunk - 1) / chunk, [&](int64_t c) {
    const int64_t n0 = c * chunk, n = std::min(chunk, N - n0);
    const void* w = static_cast<const uint8_t*>(W.raw()) + size_t(n0) * size_t(K) * esz;
    thread_local std::vector<uint8_t> wb;
    if (convert) {
      wb.resize(size_t(n * K) * esz);
      if (bf) dequantize_rows_bf16(W, n0, n0 + n, reinterpret_cast<uint16_t*>(wb.data()));
      else rows_f32(W, n0, n0 + n, reinterpret_cast<float*>(wb.data()));
      w = wb.data();
    }
    for (int64_t r0 = 0; r0 < M;) {
      const int64_t m = tile_rows(M - r0);
      const Prim& p = get_prim(1, m, K, n, bf ? dt::bf16 : dt::f32, false, true, accumulate, lda, ldy);
      run(p, static_cast<const uint8_t*>(xa) + size_t(r0 * lda) * esz, w, y + r0 * ldy + n0);
      r0 += m;
    }
  });
}

// HYPIC_TEST_GEMM_FAULT_ROWS=R: every product of R rows or more fails as a kernel would (a
// test hook for the paths that must survive one; 0: never).
int64_t fault_rows() {
  static const int64_t r = [] {
    const char* e = std::getenv("HYPIC_TEST_GEMM_FAULT_ROWS");
    return e ? std::atoll(e) : 0;
  }();
  return r;
}

// Whether M rows against W go to the GEMV kernels: few rows of a type they handle.
// HYPIC_GEMV=0 sends f32 and bf16 rows to oneDNN too (side-by-side benchmarks); packed types
// have no other kernel for few rows.
bool use_gemv(int64_t M, DType t) {
  static const bool on = [] {
    const char* e = std::getenv("HYPIC_GEMV");
    return e == nullptr || std::string(e) != "0";
  }();
  return gemv_handles(t) && M <= gemv_max_rows(t) && (on || dtype_packed(t));
}

}  // namespace

void linear_strided(const float* x, int64_t ldx, int64_t M, const Tensor& W, float* y,
                    int64_t ldy, bool accumulate) {
  HYPIC_CHECK(W.ndim() == 2 && W.dtype() != DType::kF16,
              "linear needs F32 / BF16 / Q8 / Q4 [N, K] weights");
  if (fault_rows() > 0 && M >= fault_rows())
    throw KernelError("injected kernel failure (HYPIC_TEST_GEMM_FAULT_ROWS=" +
                      std::to_string(fault_rows()) + ", " + std::to_string(M) + " rows)");
  if (use_gemv(M, W.dtype())) return gemv(x, ldx, M, W, y, ldy, accumulate);
  linear_chunks(x, ldx, M, W, y, ldy, accumulate);
}

void linear(const float* x, int64_t M, const Tensor& W, float* y, bool accumulate) {
  linear_strided(x, W.dim(1), M, W, y, W.dim(0), accumulate);
}

void batched_matmul_f32(int64_t batch, int64_t M, int64_t N, int64_t K, const float* A, bool ta,
                        const float* B, bool tb, float* C, bool accumulate) {
  // One call per matrix, each on one thread (as linear_chunks): results independent of the
  // thread count.
  const Prim& p = get_prim(1, M, K, N, dt::f32, ta, tb, accumulate, K, N);
  parallel_tasks(batch, [&](int64_t b) { run(p, A + b * M * K, B + b * K * N, C + b * M * N); });
}

double measure_matmul_gflops(int64_t M, int64_t K, int64_t N, DType wt, int reps) {
  Tensor x = Tensor::zeros_f32({M, K});
  Tensor w = Tensor::zeros(wt, {N, K});
  Tensor y = Tensor::zeros_f32({M, N});
  for (int64_t i = 0; i < M * K; ++i) x.f32()[i] = float((i * 7) % 13) * 0.01f;
  linear(x.f32(), M, w, y.f32());  // warm-up: primitive creation, page faults
  // Best of at least `reps` runs and at least 0.5 s of runs: robust to a busy machine.
  double best = 1e30;
  Timer total;
  for (int r = 0; r < reps || total.seconds() < 0.5; ++r) {
    Timer t;
    linear(x.f32(), M, w, y.f32());
    best = std::min(best, t.seconds());
  }
  return 2.0 * double(M) * double(K) * double(N) / best * 1e-9;
}

void prefill_gemm_force(PrefillGemm p) { g_prefill = p; }

const char* prefill_impl(DType t) {
  switch (method(t)) {
    case Method::kF32: return "onednn_f32";
    case Method::kBf16: return "onednn_bf16";
    case Method::kBf16Panels: return "bf16_panels";
    case Method::kF32Panels: return "f32_panels";
    case Method::kInt8:
#if defined(__x86_64__)
      if (t == DType::kQ4T && avx2::q4t_on_avx512()) return "int8_avx512_vnni";
      return cpu::has(cpu::kAvxVnni) ? "int8_avx_vnni" : "int8_avx2";
#else
      break;
#endif
  }
  return "none";
}

std::string onednn_isa() {
#if !defined(__x86_64__)
  return cpu::arch_name();  // oneDNN 2.6's ISA enumeration names x86 ISAs only
#endif
  cpu_engine();  // the cap first: querying the ISA fixes it
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "other";
  }
}

std::string matmul_impl_name(int64_t M, int64_t K, int64_t N, DType wt) {
  if (use_gemv(M, wt)) return std::string("hypic_gemv:") + gemv_impl(wt, M);
  if (method(wt) == Method::kInt8) return std::string("hypic_") + prefill_impl(wt);
  if (wt != DType::kF32 && !bf16_gemm())
    return "f32_panels:" + get_prim(1, tile_rows(M), K, N, dt::f32, false, true, false, K, N).impl;
  const dt w = wt == DType::kBF16 || dtype_packed(wt) ? dt::bf16 : dt::f32;
  return get_prim(1, tile_rows(M), K, N, w, false, true, false, K, N).impl;
}

}  // namespace hypic::kernels
