#include "bench/decode.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "bench/forward.h"
#include "core/parallel.h"
#include "core/timer.h"
#include "core/quant.h"
#include "core/tensor.h"
#include "kernels/gemv.h"
#include "model/model.h"

namespace hypic::bench {
namespace {

struct Rate {
  double tps = 0;             // tokens per second over the batch
  double bytes_per_step = 0;  // weight bytes the decode products read per step
  double weight_GBps = 0;     // of those bytes
};

// `steps` calls of one_step (each decoding `batch` tokens) after two untimed ones.
template <typename Step>
Result<Rate> rate(int batch, int steps, const Step& one_step) {
  for (int i = 0; i < 2; ++i) HYPIC_RETURN_IF_ERROR(one_step());
  const uint64_t b0 = kernels::gemv_weight_bytes();
  Timer t;
  for (int i = 0; i < steps; ++i) HYPIC_RETURN_IF_ERROR(one_step());
  const double s = t.seconds(), bytes = double(kernels::gemv_weight_bytes() - b0);
  return Rate{double(batch) * steps / s, bytes / steps, bytes / s * 1e-9};
}

// The machine's memory bandwidth, GB/s, on huge-page buffers as the weights are (larger than
// any cache, as a decode step's weights are), best of 3 each: read = a sum of 1 GiB on every
// thread, copy = a memcpy of 512 MiB counted as read + write.
struct Bandwidth {
  double read = 0, copy = 0;
};

constexpr size_t kWords = (size_t(1) << 30) / 8;

// The 1 GiB the measurement reads, on huge pages; made once per bench (zeroing it costs
// seconds of page faults in a VM).
Tensor bandwidth_buffer() {
  const HugePageScope huge;
  return Tensor::zeros(DType::kF32, {int64_t(kWords * 2)});
}

Bandwidth bandwidth(const Tensor& buf) {
  constexpr size_t kChunk = size_t(1) << 20;
  auto* a = static_cast<uint64_t*>(buf.raw());
  const int64_t chunks = int64_t(kWords / kChunk);
  std::vector<uint64_t> part(static_cast<size_t>(chunks));
  Bandwidth bw;
  auto best = [](auto&& f) {
    double t_best = 1e30;
    for (int r = 0; r < 3; ++r) {
      Timer t;
      f();
      t_best = std::min(t_best, t.seconds());
    }
    return t_best;
  };
  bw.read = double(kWords * 8) * 1e-9 / best([&] {
    parallel_for(chunks, [&](int64_t c) {
      uint64_t s = 0;
      for (size_t i = size_t(c) * kChunk; i < size_t(c + 1) * kChunk; ++i) s += a[i];
      part[size_t(c)] = s;
    });
  });
  const size_t half = kWords * 8 / 2;
  bw.copy = double(2 * half) * 1e-9 / best([&] { std::memcpy(a + kWords / 2, a, half); });
  volatile uint64_t sink = part[0];
  (void)sink;
  return bw;
}

}  // namespace

Result<nlohmann::json> bench_decode(const DecodeBenchOptions& o) {
  if (o.batches.empty() || o.prompt < 1 || o.steps < 1)
    return invalid_argument("bench decode: needs batch sizes, prompt >= 1 and steps >= 1");
  LoadOptions lo;
  lo.compute = o.dtype;
  auto loaded = Model::load(o.model, lo);
  if (!loaded) return loaded.status();
  const Model& model = **loaded;
  const Tensor bw_buf = bandwidth_buffer();
  const Bandwidth before = bandwidth(bw_buf);
  std::mt19937 rng(1);
  nlohmann::json out = {{"model", o.model},       {"dtype", o.dtype_label},
                        {"prompt", o.prompt},     {"steps", o.steps},
                        {"threads", num_threads()},
                        {"rows", nlohmann::json::array()}};
  for (int B : o.batches) {
    if (B < 1) return invalid_argument("bench decode: batch sizes must be >= 1");
    std::vector<SeqState> seqs;
    std::vector<float> logits;
    for (int b = 0; b < B; ++b) {
      seqs.push_back(model.new_state(o.prompt + 2 * o.steps + 8));  // both timed runs
      HYPIC_RETURN_IF_ERROR(model.forward(seqs.back(), random_tokens(rng, o.prompt,
                                                                     model.config().vocab_size),
                                          LogitsFor::kLast, &logits));
    }
    std::vector<SeqState*> ptrs;
    for (auto& s : seqs) ptrs.push_back(&s);
    const std::vector<int32_t> toks(size_t(B), 1);
    auto batched = [&]() -> Status { return model.decode_batch(ptrs, toks, &logits); };
    auto separate = [&]() -> Status {
      for (auto& s : seqs) HYPIC_RETURN_IF_ERROR(model.forward(s, {1}, LogitsFor::kLast, &logits));
      return Status();
    };
    HYPIC_ASSIGN_OR_RETURN(const Rate rb, rate(B, o.steps, batched));
    HYPIC_ASSIGN_OR_RETURN(const Rate rs, rate(B, o.steps, separate));
    nlohmann::json row = {{"B", B}, {"batched_tps", rb.tps}, {"separate_tps", rs.tps},
                          {"weight_bytes_per_step", rb.bytes_per_step},
                          {"batched_weight_GBps", rb.weight_GBps},
                          {"separate_weight_GBps", rs.weight_GBps},
                          {"gemv_kernel", kernels::gemv_impl(matrix_dtype(o.dtype), std::min(B, 16))},
                          {"separate_gemv_kernel", kernels::gemv_impl(matrix_dtype(o.dtype), 1)}};
    if (o.on_row) o.on_row(row);
    out["rows"].push_back(std::move(row));
  }
  const Bandwidth after = bandwidth(bw_buf);  // the host's bandwidth may change during the rows
  out["read_GBps"] = {before.read, after.read};
  out["copy_GBps"] = {before.copy, after.copy};
  return out;
}

}  // namespace hypic::bench
