// The tool-use records hypic-tiny trains on and `hypic eval --tasks tools` runs
// (tools/tiny/gen_tools.py) are written as the server writes them: for the records that carry
// their prompts, the server's prompt of the request (its tools as segments) and of the request
// after the tools' results decodes to exactly the generator's text.
#include <fstream>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api/auto_segments.h"
#include "api/request.h"
#include "api/request_tools.h"
#include "server/engine_request.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace hypic::server {
namespace {

using OJson = nlohmann::ordered_json;
const std::string kTiny = std::string(HYPIC_SOURCE_DIR) + "/models/hypic-tiny";

// The prompt the server writes for `messages` and `tools`, decoded; how many segments it has.
std::string server_prompt(const Tokenizer& tok, const OJson& messages, const OJson& tools, size_t* segments) {
  const OJson body{{"model", "m"}, {"messages", messages}, {"tools", tools}, {"max_tokens", 16}};
  const api::RequestLimits lim;
  api::ApiRequest r;
  const ChatTemplate& chat = *chat_template_for("qwen3.5").value();
  if (auto e = api::parse_request(body.dump(), api::Endpoint::kChat, lim, &r)) return "refused: " + e->message;
  api::AutoSegments as;
  as.tools = true;
  if (auto e = api::apply_auto_segments(&r, as, lim)) return "refused: " + e->message;
  if (auto e = api::request_grammar(chat, &r)) return "refused: " + e->message;
  PromptParts parts;
  if (auto e = build_prompt(tok, chat, r, 8192, &parts)) return "refused: " + e->message;
  *segments = parts.segments.size();
  std::vector<int32_t> ids = parts.prefix;
  for (const auto& s : parts.segments) ids.insert(ids.end(), s.begin(), s.end());
  ids.insert(ids.end(), parts.suffix.begin(), parts.suffix.end());
  return tok.decode(ids);
}

TEST(ToolPrompts, GeneratorWritesWhatTheServerWrites) {
  auto tok = Tokenizer::load(kTiny + "/tokenizer.json");
  ASSERT_TRUE(tok.is_ok()) << tok.status().to_string();
  std::ifstream f(kTiny + "/eval/tools_heldout.jsonl");
  ASSERT_TRUE(f) << "models/hypic-tiny/eval/tools_heldout.jsonl";
  std::string line;
  int checked = 0;
  while (std::getline(f, line)) {
    const OJson r = OJson::parse(line);
    if (!r.contains("prompt")) continue;
    size_t segments = 0;
    EXPECT_EQ(server_prompt(tok.value(), r["messages"], r["tools"], &segments), r["prompt"].get<std::string>()) << r["id"];
    EXPECT_EQ(segments, r["tools"].size()) << "each tool a segment";
    if (!r["calls"].empty()) {
      OJson m = r["messages"], calls = OJson::array();
      for (size_t k = 0; k < r["calls"].size(); ++k)
        calls.push_back({{"id", "c" + std::to_string(k)},
                         {"type", "function"},
                         {"function", {{"name", r["calls"][k]["name"]}, {"arguments", r["calls"][k]["arguments"].dump()}}}});
      m.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", calls}});
      for (size_t k = 0; k < r["results"].size(); ++k)
        m.push_back({{"role", "tool"}, {"tool_call_id", "c" + std::to_string(k)}, {"content", r["results"][k]}});
      EXPECT_EQ(server_prompt(tok.value(), m, r["tools"], &segments), r["result_prompt"].get<std::string>()) << r["id"];
    }
    ++checked;
  }
  EXPECT_EQ(checked, 4) << "one record of each task carries its prompts";
}

}  // namespace
}  // namespace hypic::server
