// The prompt-processing modes (SPEC §4), named here so that the API layer (src/api/), which
// parses them from requests, needs nothing of the engine that runs them (engine/compose.h).
#pragma once

#include <string>

namespace hypic {

enum class PicMode { kFull, kPrefix, kHypic, kNaive };
const char* pic_mode_name(PicMode m);  // "full", "prefix", "hypic", "naive"
bool parse_pic_mode(const std::string& s, PicMode* m);

}  // namespace hypic
