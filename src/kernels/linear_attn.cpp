#include "kernels/linear_attn.h"

#include <vector>

#include "core/status.h"
#include "kernels/la_families.h"

namespace hypic::kernels {

const char* family_name(Family f) {
  switch (f) {
    case Family::kLinear: return "linear";
    case Family::kRetNet: return "retnet";
    case Family::kLightning: return "lightning";
    case Family::kMamba2: return "mamba2";
    case Family::kGla: return "gla";
    case Family::kDeltaNet: return "deltanet";
    case Family::kGatedDeltaNet: return "gated_deltanet";
    case Family::kKda: return "kda";
  }
  return "?";
}

std::vector<Family> all_families() {
  return {Family::kLinear, Family::kRetNet,   Family::kLightning,     Family::kMamba2,
          Family::kGla,    Family::kDeltaNet, Family::kGatedDeltaNet, Family::kKda};
}

bool parse_family(const std::string& s, Family* f) {
  for (Family x : all_families())
    if (s == family_name(x)) {
      *f = x;
      return true;
    }
  return false;
}

void LinearAttention::build_transition_with_outputs(const LaInputs& in, Transition* T, float* s0,
                                                   float* out) const {
  if (out) {
    std::vector<float> state(size_t(d_.nv) * size_t(d_.dk) * size_t(d_.dv), 0.0f);
    prefill(in, state.data(), out);
  }
  build_transition(in, T, s0);
}

std::unique_ptr<LinearAttention> make_linear_attention(Family f, const LaDims& d) {
  HYPIC_CHECK(d.nk > 0 && d.nv > 0 && d.nv % d.nk == 0 && d.dk > 0 && d.dv > 0);
  switch (f) {
    case Family::kLinear: return make_la_linear(d);
    case Family::kRetNet: return make_la_retnet(d);
    case Family::kLightning: return make_la_lightning(d);
    case Family::kMamba2: return make_la_mamba2(d);
    case Family::kGla: return make_la_gla(d);
    case Family::kDeltaNet: return make_la_deltanet(d);
    case Family::kGatedDeltaNet: return make_la_gated_deltanet(d);
    case Family::kKda: return make_la_kda(d);
  }
  return nullptr;
}

}  // namespace hypic::kernels
