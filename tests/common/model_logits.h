// The logits of every position of a fixed 12-token prompt, for a model directory loaded in
// type t (empty, with a test failure, when it does not load): what tests compare between two
// ways of producing the same weights.
#pragma once
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "model/model.h"

namespace hypic::test {

inline std::vector<float> prompt_logits(const std::string& dir, DType t) {
  auto m = Model::load(dir, {t, false});
  EXPECT_TRUE(m.is_ok()) << m.status().to_string();
  if (!m.is_ok()) return {};
  SeqState st = (*m)->new_state();
  std::vector<float> lg;
  const std::vector<int32_t> prompt{1, 17, 42, 7, 99, 3, 250, 11, 5, 64, 2, 8};
  EXPECT_TRUE((*m)->forward(st, prompt, LogitsFor::kAll, &lg).is_ok());
  return lg;
}

}  // namespace hypic::test
