#include "server/usage.h"

namespace hypic::server {

using namespace api;  // the server speaks the API's types

Usage usage_of(const RequestFigures& f) {
  const ComposeStats& cs = f.compose;
  Usage u;
  u.prompt_tokens = cs.prompt_tokens;
  u.completion_tokens = f.completion_tokens;
  u.mode = pic_mode_name(f.mode);
  u.segments_hit = cs.segments_hit;
  u.segments_missed = cs.segments_missed;
  u.reused_tokens = cs.reused_tokens;
  u.recomputed_tokens = cs.recomputed_tokens;
  u.seam_tokens = cs.seam_tokens;
  u.cached_new_tokens = cs.cached_new_tokens;
  u.ttft_ms = f.ttft_ms;
  if (f.build)
    u.scatter = ScatterUsage{f.build->built_remote, f.build->built_local, f.build->rescheduled, f.build->corrupt};
  return u;
}

}  // namespace hypic::server
