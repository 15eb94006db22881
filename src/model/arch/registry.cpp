// The architecture registry: the built-in families, then any registered at run time.
#include <mutex>

#include "model/arch.h"

namespace hypic {

// One per file in model/arch/. A new built-in family adds its line here.
const Architecture& qwen3_next_architecture();
const Architecture& qwen3_5_architecture();
const Architecture& qwen3_5_moe_architecture();
const Architecture& bailing_moe_linear_architecture();
const Architecture& minimax_architecture();
const Architecture& kimi_linear_architecture();
const Architecture& bailing_hybrid_architecture();

namespace {

struct Registry {
  std::mutex mu;
  std::vector<const Architecture*> archs{&qwen3_next_architecture(), &qwen3_5_architecture(),
                                         &qwen3_5_moe_architecture(),
                                         &bailing_moe_linear_architecture(),
                                         &minimax_architecture(),
                                         &kimi_linear_architecture(),
                                         &bailing_hybrid_architecture()};
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

std::vector<const Architecture*> architectures() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.archs;
}

const Architecture* find_architecture(const std::string& model_type) {
  for (const Architecture* a : architectures())
    for (const std::string& t : a->model_types())
      if (t == model_type) return a;
  return nullptr;
}

Status register_architecture(const Architecture* a) {
  if (a == nullptr) return invalid_argument("register_architecture: null architecture");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const Architecture* b : r.archs)
    for (const std::string& t : b->model_types())
      for (const std::string& u : a->model_types())
        if (t == u)
          return invalid_argument("model_type '" + u + "' is already read by the " + b->name() +
                                " architecture");
  r.archs.push_back(a);
  return Status::ok();
}

}  // namespace hypic
