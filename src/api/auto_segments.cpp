#include "api/auto_segments.h"

#include <vector>

namespace hypic::api {
namespace {

// `text` cut at every `sep` (the separators dropped).
std::vector<std::string> split(const std::string& text, const std::string& sep) {
  std::vector<std::string> out;
  size_t p = 0;
  for (size_t q; (q = text.find(sep, p)) != std::string::npos; p = q + sep.size()) out.push_back(text.substr(p, q - p));
  out.push_back(text.substr(p));
  return out;
}

// Chat, separator: the last user message's parts with each separated text cut into segments
// and its last piece; false (and the separators only removed) if that layout is not valid.
bool cut_parts(std::vector<ContentPart>* parts, const std::string& sep, int* made) {
  std::vector<ContentPart> out;
  int n = 0;
  for (const ContentPart& p : *parts) {
    if (p.text.find(sep) == std::string::npos) {
      out.push_back(p);
      continue;
    }
    const std::vector<std::string> pieces = split(p.text, sep);
    for (size_t i = 0; i + 1 < pieces.size(); ++i)
      if (!pieces[i].empty()) {
        out.push_back({pieces[i], true, ""});
        ++n;
      }
    if (!pieces.back().empty()) out.push_back({pieces.back(), false, ""});
  }
  if (out.empty()) out.push_back({"", false, ""});  // nothing but separators: an empty text, not no content
  // Valid only if the segments are consecutive (no text between two of them).
  int first = -1, last = -1;
  for (int j = 0; j < int(out.size()); ++j)
    if (out[j].segment) {
      if (first < 0) first = j;
      last = j;
    }
  for (int j = first + 1; first >= 0 && j < last; ++j)
    if (!out[j].segment) {
      for (ContentPart& p : *parts) {  // not cut: the text without its separators
        std::string joined;
        for (const std::string& s : split(p.text, sep)) joined += s;
        p.text = std::move(joined);
      }
      return false;
    }
  *parts = std::move(out);
  *made += n;
  return true;
}

}  // namespace

bool parse_auto_segments(std::string_view list, AutoSegments* out, std::string* error) {
  out->separator = out->parts = out->tools = false;
  if (list.empty() || list == "off") return true;
  while (!list.empty()) {
    const size_t c = list.find(',');
    const std::string_view m = list.substr(0, c);
    if (m == "separator") out->separator = true;
    else if (m == "parts") out->parts = true;
    else if (m == "tools") out->tools = true;
    else {
      *error = "unknown automatic segment mode '" + std::string(m) + "' (separator, parts, tools, or off)";
      return false;
    }
    list = c == std::string_view::npos ? std::string_view() : list.substr(c + 1);
  }
  return true;
}

std::optional<ApiError> apply_auto_segments(ApiRequest* r, const AutoSegments& server_default,
                                            const RequestLimits& lim) {
  AutoSegments a = server_default;
  if (r->auto_segments) {
    std::string error;
    if (*r->auto_segments == "default") {
      if (!a.any()) a.separator = true;
    } else if (!parse_auto_segments(*r->auto_segments, &a, &error)) {
      return bad_request(error, "hypic.auto_segments", "invalid_value");
    }
  }
  if (!a.any() || a.sep.empty()) return std::nullopt;
  int made = 0;
  if (r->endpoint == Endpoint::kCompletions) {
    if (!a.separator || r->prompt.find(a.sep) == std::string::npos) return std::nullopt;
    std::vector<std::string> pieces = split(r->prompt, a.sep);
    while (pieces.size() > 1 && pieces.back().empty()) pieces.pop_back();  // the text after the last one is the prompt
    r->prompt = pieces.back();
    pieces.pop_back();
    for (std::string& p : pieces)
      if (!p.empty()) r->prompt_segments.push_back(std::move(p));
    made = int(r->prompt_segments.size());
  } else {
    if (r->segment_count() > 0) return std::nullopt;  // the client marked its own
    std::vector<ContentPart>& parts = r->messages.back().parts;
    const bool user_last = r->messages.back().role == Role::kUser;
    if (a.separator && user_last) cut_parts(&parts, a.sep, &made);
    if (a.parts && user_last && made == 0 && parts.size() >= 2) {
      for (size_t j = 0; j + 1 < parts.size(); ++j)
        if (!parts[j].text.empty()) {
          parts[j].segment = true;
          ++made;
        }
    }
    // Tool descriptions, else tool results (api/request_tools.h writes them as segments).
    if (a.tools && made == 0 && r->uses_tools() && r->tools.size() <= size_t(lim.max_segments)) {
      r->segment_tools = true;
      made = int(r->tools.size());
    }
    if (a.parts && made == 0 && !user_last) {
      for (size_t i = r->messages.size(); i-- > 0 && r->messages[i].role == Role::kTool;) ++made;
      r->segment_tool_results = made <= lim.max_segments;
      if (!r->segment_tool_results) made = 0;
    }
  }
  if (made > lim.max_segments)
    return bad_request("the prompt cuts into " + std::to_string(made) + " automatic segments, more than the " +
                           std::to_string(lim.max_segments) + " a request may have; send fewer separated documents",
                       r->endpoint == Endpoint::kChat ? "messages" : "prompt", "too_many_segments");
  r->auto_segments_made = made;
  return std::nullopt;
}

}  // namespace hypic::api
