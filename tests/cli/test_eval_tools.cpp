// The tool eval's scoring (bench/eval_tools.h): the reply's calls against the gold ones.
#include <gtest/gtest.h>

#include "bench/eval_tools.h"

namespace hypic::bench {
namespace {

using OJson = nlohmann::ordered_json;

const OJson kGold = OJson::parse(R"([{"name": "rainfall_get", "arguments": {"town": "Brennwick", "year": 1987}},
                                     {"name": "weather_show", "arguments": {"town": "Dalford"}}])");

api::ToolCall call(const std::string& name, const std::string& args) { return {"call_0", name, args}; }

TEST(ToolEvalScore, CallsAreComparedAsMultisetsOfNamesAndArgumentValues) {
  // The same calls in another order, the arguments' keys in another order: right.
  CallScore s = score_calls({call("weather_show", R"({"town": "Dalford"})"),
                             call("rainfall_get", R"({"year": 1987, "town": "Brennwick"})")}, "", kGold);
  EXPECT_TRUE(s.names && s.args && s.valid);
  // A string where the schema says integer: the right tools, wrong arguments.
  s = score_calls({call("rainfall_get", R"({"town": "Brennwick", "year": "1987"})"), call("weather_show", R"({"town": "Dalford"})")},
                  "", kGold);
  EXPECT_TRUE(s.names);
  EXPECT_FALSE(s.args);
  EXPECT_TRUE(s.valid);
  // One call of two: neither names nor arguments.
  s = score_calls({call("weather_show", R"({"town": "Dalford"})")}, "", kGold);
  EXPECT_FALSE(s.names || s.args);
  // The same tool twice instead of two tools.
  s = score_calls({call("weather_show", R"({"town": "Dalford"})"), call("weather_show", R"({"town": "Dalford"})")}, "", kGold);
  EXPECT_FALSE(s.names);
}

TEST(ToolEvalScore, ValidNeedsACallAndNoUnreadMarkup) {
  const OJson one = OJson::parse(R"([{"name": "weather_show", "arguments": {"town": "Dalford"}}])");
  EXPECT_FALSE(score_calls({}, "Answer: sunny", one).valid);
  EXPECT_FALSE(score_calls({}, "<tool_call>\n<function=weather_show>\n", one).valid);
  const auto c = call("weather_show", R"({"town": "Dalford"})");
  EXPECT_TRUE(score_calls({c}, "Let me look.", one).valid);
  EXPECT_FALSE(score_calls({c}, "<tool_call>\n<function=nope>\n</tool_call>", one).valid) << "a block the reader refused";
  EXPECT_TRUE(score_calls({c}, "", one).args);
}

}  // namespace
}  // namespace hypic::bench
