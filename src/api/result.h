// What a finished job produced, typed: a completion's choices and usage, or a registered
// segment. Built by the server's jobs (server/jobs.h) or, in the router, from an instance's
// protobuf events (api/outcome_pb.h); rendered once per API shape by api/respond.cpp
// (OpenAI chat and completions), api/anthropic.cpp (messages), the Combine service (proto).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/tool_calls.h"

namespace hypic::api {

// Built by segment parallelism: where the request's missed segments were built.
struct ScatterUsage {
  int built_remote = 0, built_local = 0;
  int rescheduled = 0;  // moved to a local lane after their remote builder failed
  int corrupt = 0;      // entries rejected by verification, then rebuilt
};

// A completion's token counts (OpenAI's usage) and hypic's PIC figures ("usage.hypic").
struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0;
  std::string mode;  // the PIC mode's name
  int64_t segments_hit = 0, segments_missed = 0;
  int64_t reused_tokens = 0;      // prompt tokens whose work came from a cache (OpenAI's cached_tokens)
  int64_t recomputed_tokens = 0;  // prompt tokens run through the model
  int64_t seam_tokens = 0;        // of which seam windows
  int64_t cached_new_tokens = 0;  // tokens this request put in a cache
  double ttft_ms = 0;
  int auto_segments = 0;          // segments made by hypic.auto_segments (shown when > 0)
  std::optional<ScatterUsage> scatter;
  std::string instance;           // the router: the instance that answered (shown when set)
};

// {"prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details":
// {"cached_tokens"}, "hypic": {...}}.
nlohmann::json usage_json(const Usage& u);

// One of a completion's n choices.
struct ChoiceResult {
  std::string text;                // without the tool calls read out of it
  std::string finish_reason;       // "stop", "length", "tool_calls", "abort"
  std::string stop_sequence;       // the stop string that ended it ("" none)
  nlohmann::json logprobs;         // the endpoint's logprobs object (null: not asked for)
  std::vector<ToolCall> tool_calls;
  std::string reasoning;           // the reply's reasoning ("" none, or a model that does not reason)
};

struct CompletionResult {
  std::vector<ChoiceResult> choices;  // the request's n, in order
  Usage usage;                        // every choice's completion tokens counted
};

// A registered segment as POST / GET /v1/segments show it.
struct SegmentInfo {
  std::string id;
  int64_t tokens = 0;
  bool cached = false;  // its entry is pinned in memory
  int64_t bytes = 0, seam = 0, created = 0;
  std::optional<int64_t> expires_at;
};
nlohmann::json segment_json(const SegmentInfo& s);

// A streamed tool call as the Combine protocol carries it: {"index", "id", "name", "arguments"}.
nlohmann::json tool_call_json(const ToolCall& c, int index);
// Back; false when `j` is not such an object.
bool tool_call_from_json(const nlohmann::json& j, ToolCall* c, int* index);

}  // namespace hypic::api
