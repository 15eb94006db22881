#include "server/usage.h"

namespace hypic::server {

using nlohmann::json;

json usage_json(const RequestFigures& f) {
  const ComposeStats& cs = f.compose;
  json hypic{{"mode", pic_mode_name(f.mode)},
             {"segments_hit", cs.segments_hit},
             {"segments_missed", cs.segments_missed},
             {"reused_tokens", cs.reused_tokens},
             {"recomputed_tokens", cs.recomputed_tokens},
             {"seam_tokens", cs.seam_tokens},
             {"cached_new_tokens", cs.cached_new_tokens},
             {"ttft_ms", f.ttft_ms}};
  if (f.build)
    hypic["scatter"] = {{"built_remote", f.build->built_remote}, {"built_local", f.build->built_local},
                        {"rescheduled", f.build->rescheduled}, {"corrupt", f.build->corrupt}};
  return json{{"prompt_tokens", cs.prompt_tokens},
              {"completion_tokens", f.completion_tokens},
              {"total_tokens", cs.prompt_tokens + f.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", cs.reused_tokens}}},
              {"hypic", std::move(hypic)}};
}

}  // namespace hypic::server
