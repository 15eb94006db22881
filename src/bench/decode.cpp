#include "bench/decode.h"

#include <algorithm>
#include <random>

#include "bench/forward.h"
#include "core/parallel.h"
#include "core/timer.h"
#include "core/quant.h"
#include "kernels/gemv.h"
#include "model/model.h"

namespace hypic::bench {
namespace {

// Tokens per second of `steps` calls of one_step (each decoding `batch` tokens) after two
// untimed ones.
template <typename Step>
Result<double> rate(int batch, int steps, const Step& one_step) {
  for (int i = 0; i < 2; ++i) HYPIC_RETURN_IF_ERROR(one_step());
  Timer t;
  for (int i = 0; i < steps; ++i) HYPIC_RETURN_IF_ERROR(one_step());
  return double(batch) * steps / t.seconds();
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
    HYPIC_ASSIGN_OR_RETURN(const double rb, rate(B, o.steps, batched));
    HYPIC_ASSIGN_OR_RETURN(const double rs, rate(B, o.steps, separate));
    nlohmann::json row = {{"B", B}, {"batched_tps", rb}, {"separate_tps", rs},
                          {"gemv_kernel", kernels::gemv_impl(matrix_dtype(o.dtype), std::min(B, 16))},
                          {"separate_gemv_kernel", kernels::gemv_impl(matrix_dtype(o.dtype), 1)}};
    if (o.on_row) o.on_row(row);
    out["rows"].push_back(std::move(row));
  }
  return out;
}

}  // namespace hypic::bench
