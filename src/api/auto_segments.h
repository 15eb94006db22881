// Automatic segments for clients that do not mark them (--auto-segments, or a request's
// "hypic": {"auto_segments": ...}). Composition is an approximation, so nothing is segmented
// unless asked; explicit marks (cache_control / hypic_segment / segment_id) always win: a
// request that has them is left as it is.
//
//   separator  a text containing the separator (default "<<PIC_SEP>>", the one the paper's
//              own SGLang fork splits prompts on) is cut there: every piece but the last is a
//              segment, the last stays plain text (the question). Chat: the text parts of the
//              last user message; completions: the prompt (then the pieces before the last
//              are its segments, the last its text). The separators are removed.
//   parts      chat: every text part of the last user message but the last is a segment;
//              when the conversation ends with tool results, each result is a segment.
//   tools      chat with tools: each tool's description in the system turn is a segment, so
//              an agent whose tool list changes between requests reuses every tool it had
//              before, in any order and any subset (only when nothing else is segmented: the
//              layout has one run of segments, and documents in the question come first).
//
// A cut that would leave text between two segments (separators in two parts, say) is not
// made: the separators are removed and the text stays plain (the answer is the full one).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "api/request.h"

namespace hypic::api {

inline constexpr std::string_view kDefaultSegmentSeparator = "<<PIC_SEP>>";

struct AutoSegments {
  bool separator = false;
  bool parts = false;
  bool tools = false;
  std::string sep = std::string(kDefaultSegmentSeparator);
  bool any() const { return separator || parts || tools; }
};

// A comma-separated list of "separator", "parts", "tools"; "off" / "" (none); false and an
// error otherwise.
bool parse_auto_segments(std::string_view list, AutoSegments* out, std::string* error);

// Applies the request's choice (ApiRequest::auto_segments: none = `server_default`) to *r;
// r->auto_segments_made counts the segments made. Errors: more segments than lim allows.
std::optional<ApiError> apply_auto_segments(ApiRequest* r, const AutoSegments& server_default,
                                            const RequestLimits& lim);

}  // namespace hypic::api
