// The engine against transformers on hypic-tiny (issue: "the C++ engine and transformers agree
// on hypic-tiny"): tools/tiny/export.py stores transformers' greedy outputs (fp32) for the
// held-out records in models/hypic-tiny/eval/reference_outputs.jsonl; the engine, also fp32,
// must produce the same token ids for the first records of every task. HYPIC_TINY_DIR points
// the test at another export (e.g. an intermediate checkpoint).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "engine/eval_task.h"
#include "engine/generate.h"
#include "engine/prompt.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace hypic {
namespace {

constexpr int kPerTask = 4;

TEST(TinyAgreement, GreedyAnswersMatchTransformers) {
  const char* env = std::getenv("HYPIC_TINY_DIR");
  const std::string dir = env ? env : std::string(HYPIC_SOURCE_DIR) + "/models/hypic-tiny";
  const std::string refs_path = dir + "/eval/reference_outputs.jsonl";
  if (!std::filesystem::exists(refs_path)) GTEST_SKIP() << "no hypic-tiny export at " << dir;
  auto records = load_eval_records(dir + "/eval/heldout.jsonl");
  ASSERT_TRUE(records.is_ok()) << records.status().to_string();
  std::map<std::string, const EvalRecord*> by_id;
  for (const auto& r : records.value()) by_id[r.id] = &r;

  LoadOptions lo;
  lo.compute = DType::kF32;
  lo.progress = false;
  auto model = Model::load(dir, lo);
  ASSERT_TRUE(model.is_ok()) << model.status().to_string();
  auto tok = Tokenizer::load(dir + "/tokenizer.json");
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();

  std::ifstream f(refs_path);
  std::map<std::string, int> done;
  int compared = 0;
  for (std::string line; std::getline(f, line);) {
    const auto ref = nlohmann::json::parse(line);
    const std::string task = ref["task"];
    if (done[task] >= kPerTask) continue;
    ++done[task];
    ASSERT_TRUE(by_id.count(ref["id"])) << ref["id"];
    const EvalRecord& r = *by_id[ref["id"]];
    const auto ids = chat_parts(model_chat_template(model.value()->config()), tok.value(), r.system, r.segments, r.query).concatenated();
    GenerateOptions go;
    go.max_tokens = 48;
    auto g = generate(*model.value(), tok.value(), ids, go);
    ASSERT_TRUE(g.is_ok()) << g.status().to_string();
    const std::vector<int32_t> want = ref["output_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(g->tokens, want) << r.id << ": engine '" << g->text << "' vs transformers '"
                               << ref["text"].get<std::string>() << "'";
    EXPECT_EQ(g->text, ref["text"].get<std::string>()) << r.id;
    ++compared;
  }
  EXPECT_EQ(done.size(), 3u) << "every task compared";
  EXPECT_GE(compared, 3);
}

}  // namespace
}  // namespace hypic
