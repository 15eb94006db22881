// A completion's usage object from the request's figures (engine/runner.h): OpenAI's token
// counts, and hypic's own under "hypic" (mode, segment hits and misses, reused / recomputed /
// seam tokens, TTFT, and "scatter" when segment parallelism built the missed segments). The
// Combine service's protobuf form mirrors it (usage_to_pb / usage_from_pb).
#pragma once

#include <nlohmann/json.hpp>

#include "engine/runner.h"

namespace hypic::server {

nlohmann::json usage_json(const RequestFigures& f);

}  // namespace hypic::server
