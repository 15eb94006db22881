#include "kernels/system_info.h"

#include "core/cpu.h"
#include "core/parallel.h"
#include "core/version.h"
#include "kernels/gemm.h"
#include "kernels/gemv.h"

namespace hypic::kernels {
namespace {

struct Kind {
  const char* name;
  DType t;
};
constexpr Kind kKinds[] = {
    {"f32", DType::kF32}, {"bf16", DType::kBF16}, {"int8", DType::kQ8}, {"q4", DType::kQ4T}};

std::string tier_text() {
  std::string s = cpu::tier_name(cpu::tier());
  if (cpu::tier() != cpu::best_tier())
    s += std::string(" (capped; this CPU: ") + cpu::tier_name(cpu::best_tier()) + ")";
  return s;
}

}  // namespace

std::string system_info_line() {
  std::string decode, prefill;
  for (const Kind& k : kKinds) {
    decode += std::string(decode.empty() ? "" : ", ") + k.name + " " + gemv_impl(k.t, 1);
    prefill += std::string(prefill.empty() ? "" : ", ") + k.name + " " + prefill_impl(k.t);
  }
  return std::string("hypic ") + version() + " (" + build_commit() + ") | CPU: " + cpu::model_name() +
         " (" + cpu::arch_name() + ") | features: " + cpu::feature_names() + " | ISA tier: " + tier_text() +
         " | decode: " + decode + " | prefill: " + prefill + " | oneDNN: " + onednn_isa() +
         " | threads: " + std::to_string(num_threads());
}

nlohmann::json system_info_json() {
  nlohmann::json decode, prefill;
  for (const Kind& k : kKinds) {
    decode[k.name] = gemv_impl(k.t, 1);
    prefill[k.name] = prefill_impl(k.t);
  }
  return {{"version", version()},
          {"commit", build_commit()},
          {"cpu", cpu::model_name()},
          {"arch", cpu::arch_name()},
          {"features", cpu::feature_names()},
          {"tier", cpu::tier_name(cpu::tier())},
          {"cpu_tier", cpu::tier_name(cpu::best_tier())},
          {"decode_kernel", decode},
          {"prefill_kernel", prefill},
          {"onednn_isa", onednn_isa()},
          {"threads", num_threads()}};
}

}  // namespace hypic::kernels
