// Shared pieces of the cluster tests: the tiny dense model in f32, stores, synthetic prompts,
// and the single-instance cold reference every distributed run must equal bit for bit.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/compose.h"

namespace hypic::test {

inline std::string dist_model_dir() {
  return std::string(HYPIC_SOURCE_DIR) + "/tests/models/qwen3_5_dense";
}

inline const Model& dist_model() {
  static std::unique_ptr<Model> m = std::move(Model::load(dist_model_dir(), {DType::kF32, false})).value();
  return *m;
}

inline std::shared_ptr<SegmentStore> dist_store(size_t mib = 256) {
  SegmentStore::Options o;
  o.mem_budget_bytes = mib << 20;
  return std::shared_ptr<SegmentStore>(std::move(SegmentStore::open(o)).value());
}

// Random token ids standing in for documents (the tiny model's vocabulary is 512).
inline std::vector<int32_t> dist_doc(uint32_t seed, int n) {
  std::mt19937 g(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = int32_t(g() % 500);
  return t;
}

// A prompt of segments of the given lengths (seeds from `seed`), a prefix and a suffix.
inline PromptParts dist_parts(const std::vector<int>& lengths, uint32_t seed = 1) {
  PromptParts p;
  p.prefix = dist_doc(900, 12);
  for (size_t i = 0; i < lengths.size(); ++i) p.segments.push_back(dist_doc(seed + uint32_t(i), lengths[i]));
  p.suffix = dist_doc(901, 9);
  return p;
}

inline ComposeOptions dist_opts(int seam = 4, const std::string& salt = "") {
  ComposeOptions o;
  o.mode = PicMode::kHypic;
  o.seam = seam;
  o.salt = salt;
  return o;
}

// `p` keyed under o's seam and salt.
inline TokenizedRequest keyed(const PromptParts& p, const ComposeOptions& o) {
  return make_request(dist_model(), p, o.seam, o.salt);
}

// Composer::prefill over `store`; the logits of the last token.
inline std::vector<float> compose_logits(const std::shared_ptr<SegmentStore>& store,
                                         const PromptParts& p, const ComposeOptions& o,
                                         ComposeStats* stats = nullptr) {
  const Model& m = dist_model();
  Composer c(m, store, nullptr);
  SeqState st = m.new_state(p.total_tokens() + 1);
  std::vector<float> logits;
  ComposeStats s;
  Status status = c.prefill(keyed(p, o), o, &st, &logits, &s);
  EXPECT_TRUE(status.is_ok()) << status.to_string();
  if (stats) *stats = s;
  return logits;
}

// A single instance, cold: what every distributed run must reproduce exactly.
inline std::vector<float> reference_logits(const PromptParts& p, const ComposeOptions& o) {
  return compose_logits(dist_store(), p, o);
}

}  // namespace hypic::test
