// hypic eval --tasks tools: how well a model calls tools from descriptions it reads as
// segments, per PIC mode and seam (records of tools/tiny/gen_tools.py: 4-20 tools, a question
// that needs one or two calls, the tools' results, the final reply).
//
// Each record goes through the server's own request path (api::parse_request, the request's
// tools as segments as with `--auto-segments tools`, server::build_prompt), greedy and
// unconstrained (the model's own calls: no tool grammar), three runs per (mode, seam):
//   cold    the record's request with empty caches for its tools: scored (the reply's calls
//           read by the server's reader against the gold calls)
//   warm    the same request with the tools in a new order and a subset of them (the gold
//           tools kept): timed only, the agent situation (hypic reuses every known tool)
//   result  the conversation after the gold calls and the tools' responses: the final reply
//           scored against the gold answer, timed
// Scores per task: name accuracy (the reply's tool names equal the gold ones, as multisets),
// exact-arguments accuracy (names and argument objects equal), valid-call rate (at least one
// call and no unread call markup left in the text), no-call rate (no_tool: answered without a
// call), answer accuracy (no_tool: the direct reply; the others: the reply after the results),
// and, informative even for a model that calls badly, the share of first replies identical to
// full's (agreement_with_full: what composition changes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/tool_calls.h"
#include "bench/eval.h"
#include "core/status.h"

namespace hypic::bench {

// One reply's calls (as the server's reader made them) and its remaining text against the gold
// calls ([{name, arguments: object}]): names equal as multisets; names and arguments equal
// (argument objects compared as JSON values, so 1987 is not "1987"); valid: at least one call
// and no call markup left unread in the text.
struct CallScore {
  bool names = false, args = false, valid = false;
};
CallScore score_calls(const std::vector<api::ToolCall>& calls, const std::string& content,
                      const nlohmann::ordered_json& gold);

// EvalOptions::tasks are of tool_direct, tool_doc, tool_two, no_tool (empty: all).
// {model, data, dtype, records_per_task, max_tokens, results}: per configuration, per task
// n, name_accuracy, args_accuracy, valid_call_rate, no_call_rate, answer_accuracy,
// agreement_with_full, ttft_cold_ms, ttft_warm_ms, ttft_result_ms, warm_reused_fraction; the
// means over the calling tasks and agreement_with_full over all records; with full among the configurations, points_vs_full of each mean. Progress on
// stderr.
Result<nlohmann::json> run_tool_eval(const EvalOptions& o);

}  // namespace hypic::bench
