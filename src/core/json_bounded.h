// JSON text of untrusted values for error messages. nlohmann's dump() recurses once per
// nesting level, so a value of damaged bytes nested deeper than kMaxDumpDepth is described
// instead of dumped: it cannot overflow the stack. Nothing our formats define nests more
// than a few levels.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace hypic {

constexpr int kMaxDumpDepth = 64;

// True when `j` has structure more than `levels` deep (recursion bounded by `levels`).
inline bool json_nested_deeper(const nlohmann::json& j, int levels) {
  if (!j.is_structured()) return false;
  if (levels == 0) return true;
  for (const nlohmann::json& c : j)
    if (json_nested_deeper(c, levels - 1)) return true;
  return false;
}

inline std::string json_dump_bounded(const nlohmann::json& j) {
  if (json_nested_deeper(j, kMaxDumpDepth))
    return "(a value nested more than " + std::to_string(kMaxDumpDepth) + " levels deep)";
  return j.dump();
}

}  // namespace hypic
