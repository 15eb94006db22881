// What a command runs on, printed first; models loaded for serving with their self-test; the
// benchmarks' JSON with the same facts.
#include <cstdio>

#include "cli/commands.h"
#include "core/cpu.h"
#include "core/log.h"
#include "kernels/system_info.h"
#include "model/model.h"

namespace hypic::cli {

void log_system_info(const std::string& cmd) {
  HYPIC_LOG_INFO("%s: %s", cmd.c_str(), kernels::system_info_line().c_str());
  if (!cpu::cap_warning().empty()) HYPIC_LOG_WARN("%s", cpu::cap_warning().c_str());
}

Result<std::unique_ptr<Model>> load_checked_model(const std::string& dir, const LoadOptions& lo) {
  HYPIC_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::load(dir, lo));
  HYPIC_RETURN_IF_ERROR(model->self_test());
  return model;
}

void print_bench_json(nlohmann::json j, int indent) {
  j["system"] = kernels::system_info_json();
  std::printf("%s\n", j.dump(indent).c_str());
}

}  // namespace hypic::cli
