// Helpers of the engine tests: the committed test checkpoints (loaded once per test binary,
// f32), a segment store, random token ids standing in for documents.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cache/segment_store.h"
#include "model/model.h"

namespace hypic::test {

inline std::string model_dir(const std::string& name) {
  return std::string(HYPIC_SOURCE_DIR) + "/tests/models/" + name;
}

inline const Model& model(const std::string& name = "qwen3_5_dense") {
  static std::map<std::string, std::unique_ptr<Model>> cache;
  auto& m = cache[name];
  if (!m) m = std::move(Model::load(model_dir(name), {DType::kF32, false})).value();
  return *m;
}

inline std::shared_ptr<SegmentStore> store(size_t mib = 256, const std::string& dir = "") {
  SegmentStore::Options o;
  o.mem_budget_bytes = mib << 20;
  o.disk_dir = dir;
  return std::shared_ptr<SegmentStore>(std::move(SegmentStore::open(o)).value());
}

// `n` random token ids below `vocab` (the tiny models' vocabulary is 512).
inline std::vector<int32_t> doc(uint32_t seed, int n, int vocab = 500) {
  std::mt19937 g(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = int32_t(g() % uint32_t(vocab));
  return t;
}

}  // namespace hypic::test
