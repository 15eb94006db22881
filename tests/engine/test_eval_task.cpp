// Scoring of the multi-document reading tasks (engine/eval_task.h): the same normalisation
// as tools/tiny/gen_data.py's normalize_answer, token F1, and the JSONL reader's errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "engine/eval_task.h"

namespace hypic {
namespace {

TEST(EvalTask, NormalizeMatchesTheGenerator) {
  EXPECT_EQ(normalize_answer("Answer: Drovem Pidantre.<|im_end|>"), "drovem pidantre");
  EXPECT_EQ(normalize_answer("  Answer:   1342  "), "1342");
  EXPECT_EQ(normalize_answer("Kelport,  Brekdale\n and  Holm"), "kelport, brekdale and holm");
  EXPECT_EQ(normalize_answer("answer: x"), "answer: x");  // the prefix is case-sensitive, as in Python
  EXPECT_EQ(normalize_answer(""), "");
  // Restated facts: the values are read back.
  EXPECT_EQ(normalize_answer("Answer: The mayor of Fidranwick is Drovem Pidantre<|im_end|>"), "drovem pidantre");
  EXPECT_EQ(normalize_answer("Answer: The employer of Tousteik Stirmeirbun is Thelfou Company. "
                             "The founder of Thelfou Company is Haszal  Mulcho.<|im_end|>"),
            "thelfou company, haszal mulcho");
  EXPECT_EQ(normalize_answer("The birth year of Ana is 1750."), "1750");
  EXPECT_EQ(normalize_answer("Answer: The mayor of X is . The river of Y is Z"), ", z");  // as Python
}

TEST(EvalTask, F1) {
  EXPECT_DOUBLE_EQ(answer_f1("Answer: Kelport, Brekdale", "Kelport, Brekdale"), 1.0);
  EXPECT_DOUBLE_EQ(answer_f1("Kelport", "Kelport, Brekdale"), 2 * 1.0 * 0.5 / 1.5);
  EXPECT_DOUBLE_EQ(answer_f1("Holm", "Kelport"), 0.0);
  EXPECT_DOUBLE_EQ(answer_f1("a a", "a"), 2 * 0.5 * 1.0 / 1.5);  // repeated words count once each
  EXPECT_DOUBLE_EQ(answer_f1("", ""), 1.0);
  EXPECT_DOUBLE_EQ(answer_f1("x", ""), 0.0);
}

TEST(EvalTask, LoadsTheSampleAndRendersSegments) {
  auto r = load_eval_records(std::string(HYPIC_SOURCE_DIR) + "/tests/data/eval_sample.jsonl");
  ASSERT_TRUE(r.is_ok()) << r.status().to_string();
  ASSERT_EQ(r->size(), 3u);
  const EvalRecord& e = (*r)[0];
  EXPECT_EQ(e.task, "single");
  ASSERT_EQ(e.segments.size(), 2u);
  EXPECT_EQ(e.segments[0].rfind("Document: Fidranwick\n", 0), 0u);
  EXPECT_EQ(e.segments[0].substr(e.segments[0].size() - 2), "\n\n");
  EXPECT_EQ(e.query, "Question: In which year was Fidranwick founded?");
}

TEST(EvalTask, LoadErrorsNameTheLine) {
  const auto dir = std::filesystem::path(::testing::TempDir());
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  };
  EXPECT_FALSE(load_eval_records((dir / "missing.jsonl").string()).is_ok());
  const std::string ok_line =
      R"({"id":"a","task":"single","kind":"k","system":"s","question":"q","answer":"x","documents":[{"title":"t","text":"b"}]})";
  struct Case {
    std::string text, needle;
  };
  for (const Case& c : {Case{"not json\n", ":1: not a JSON object"},
                        Case{ok_line + "\n[1]\n", ":2: not a JSON object"},
                        Case{R"({"id":"a"})" "\n", "'task'"},
                        Case{R"({"id":"a","task":"single","kind":"k","system":"s","question":"q","answer":"x","documents":[]})", "documents"},
                        Case{R"({"id":"a","task":"single","kind":"k","system":"s","question":"q","answer":"x","documents":[{"title":1,"text":"b"}]})", "title"},
                        Case{"\n\n", "no records"}}) {
    auto r = load_eval_records(write("case.jsonl", c.text));
    ASSERT_FALSE(r.is_ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos) << r.status().message();
  }
  auto good = load_eval_records(write("good.jsonl", ok_line + "\n\n" + ok_line + "\n"));
  ASSERT_TRUE(good.is_ok());
  EXPECT_EQ(good->size(), 2u);
}

}  // namespace
}  // namespace hypic
