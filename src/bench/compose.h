// hypic bench compose: the segment transition operator of each linear-attention family
// (SPEC §2) — how exact composition is, how wrong naive addition is, and what building
// (T_C, S(C|0)) costs against a plain prefill (and, with a model, against a whole forward).
//
// Per family: random inputs in the family's realistic ranges; a prefix of P tokens gives
// S_p; then for the segment of L tokens
//   direct   = prefill(segment) from S_p
//   composed = T_C·S_p + S(C|0)            (build_transition, transition_compose)
//   naive    = S_p + S(C|0)
// compose_max_rel_err = max over heads ‖composed − direct‖/‖direct‖; naive_add_rel_err =
// ‖naive − direct‖/‖direct‖ over the whole state (per head in naive_add_rel_err_per_head).
// Timings are the best of `reps` interleaved repetitions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "kernels/linear_attn.h"

namespace hypic::bench {

struct ComposeBenchOptions {
  int tokens = 256;           // segment length L, >= 1
  int heads = 16;             // value heads (= key heads), >= 1
  int dk = 128, dv = 128;     // >= 1
  bool heads_given = false;   // false: Gated DeltaNet takes Qwen3.5's 16 key / 32 value heads
  std::optional<int> prefix;  // prefix length P >= 0; none: random in [L, 4L] from the seed
  int reps = 5;               // timed repetitions after one warm-up, >= 1 (best kept)
  uint32_t seed = 1;          // inputs (and the default prefix length)
};

// A whole forward of a model over L random tokens: what the build costs are related to.
struct ModelForward {
  std::string dir;
  double seconds = 0;      // best of the repetitions
  int linear_layers = 0;
  kernels::Family family = kernels::Family::kGatedDeltaNet;  // its linear layers' family
  kernels::LaDims dims;    // the model's linear layer
  // Lightning: the first linear layer's decay, and RoPE inside the layer (Ring-linear).
  std::vector<float> lightning_decay;
  int rotary_dim = 0;
  float rope_theta = 0;
};
Result<ModelForward> measure_forward(const std::string& dir, int tokens, int reps);

// One family's JSON object. With `model`, the model's own family runs at its linear-layer
// shape (decay, RoPE) and also reports its build costs relative to the whole forward (times
// its layers). Where the layer applies RoPE to its keys (Ring-linear), the segment's entry is
// built at canonical positions 0…L−1 and composed at P: compose_max_rel_err is with the
// state re-rotated by P (SPEC §2), compose_no_rerotate_rel_err without.
nlohmann::json bench_compose_family(kernels::Family f, const ComposeBenchOptions& o,
                                    const ModelForward* model);

}  // namespace hypic::bench
