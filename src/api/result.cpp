#include "api/result.h"

namespace hypic::api {

using nlohmann::json;

json usage_json(const Usage& u) {
  json hypic{{"mode", u.mode},
             {"segments_hit", u.segments_hit},
             {"segments_missed", u.segments_missed},
             {"reused_tokens", u.reused_tokens},
             {"recomputed_tokens", u.recomputed_tokens},
             {"seam_tokens", u.seam_tokens},
             {"cached_new_tokens", u.cached_new_tokens},
             {"ttft_ms", u.ttft_ms}};
  if (u.auto_segments > 0) hypic["auto_segments"] = u.auto_segments;
  if (u.scatter)
    hypic["scatter"] = {{"built_remote", u.scatter->built_remote}, {"built_local", u.scatter->built_local},
                        {"rescheduled", u.scatter->rescheduled}, {"corrupt", u.scatter->corrupt}};
  if (!u.instance.empty()) hypic["instance"] = u.instance;
  return json{{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens},
              {"total_tokens", u.prompt_tokens + u.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", u.reused_tokens}}},
              {"hypic", std::move(hypic)}};
}

json segment_json(const SegmentInfo& s) {
  return json{{"id", s.id},
              {"object", "segment"},
              {"tokens", s.tokens},
              {"cached", s.cached},
              {"bytes", s.bytes},
              {"seam", s.seam},
              {"created", s.created},
              {"expires_at", s.expires_at ? json(*s.expires_at) : json(nullptr)}};
}

json tool_call_json(const ToolCall& c, int index) {
  return json{{"index", index}, {"id", c.id}, {"name", c.name}, {"arguments", c.arguments}};
}

bool tool_call_from_json(const json& j, ToolCall* c, int* index) {
  if (!j.is_object()) return false;
  const auto str = [&j](const char* k, std::string* out) {
    auto it = j.find(k);
    if (it == j.end() || !it->is_string()) return false;
    *out = it->get<std::string>();
    return true;
  };
  auto i = j.find("index");
  if (i == j.end() || !i->is_number_integer()) return false;
  *index = i->get<int>();
  return str("id", &c->id) && str("name", &c->name) && str("arguments", &c->arguments);
}

}  // namespace hypic::api
