#include "api/outcome_pb.h"

namespace hypic::api {

namespace pb = cluster::pb;

pb::Usage usage_to_pb(const Usage& u) {
  pb::Usage p;
  p.set_prompt_tokens(u.prompt_tokens);
  p.set_completion_tokens(u.completion_tokens);
  p.set_cached_tokens(u.reused_tokens);
  p.set_mode(u.mode);
  p.set_segments_hit(u.segments_hit);
  p.set_segments_missed(u.segments_missed);
  p.set_reused_tokens(u.reused_tokens);
  p.set_recomputed_tokens(u.recomputed_tokens);
  p.set_seam_tokens(u.seam_tokens);
  p.set_ttft_ms(u.ttft_ms);
  p.set_auto_segments(u.auto_segments);
  p.set_cached_new_tokens(u.cached_new_tokens);
  if (u.scatter) {
    pb::ScatterUsage* ps = p.mutable_scatter();
    ps->set_built_remote(u.scatter->built_remote);
    ps->set_built_local(u.scatter->built_local);
    ps->set_rescheduled(u.scatter->rescheduled);
    ps->set_corrupt(u.scatter->corrupt);
  }
  return p;
}

Usage usage_from_pb(const pb::Usage& p) {
  Usage u;
  u.prompt_tokens = p.prompt_tokens();
  u.completion_tokens = p.completion_tokens();
  u.mode = p.mode();
  u.segments_hit = p.segments_hit();
  u.segments_missed = p.segments_missed();
  u.reused_tokens = p.reused_tokens();
  u.recomputed_tokens = p.recomputed_tokens();
  u.seam_tokens = p.seam_tokens();
  u.cached_new_tokens = p.cached_new_tokens();
  u.ttft_ms = p.ttft_ms();
  u.auto_segments = p.auto_segments();
  if (p.has_scatter())
    u.scatter = ScatterUsage{p.scatter().built_remote(), p.scatter().built_local(), p.scatter().rescheduled(),
                             p.scatter().corrupt()};
  return u;
}

pb::ApiError error_to_pb(const ApiError& e) {
  pb::ApiError p;
  p.set_http_status(e.http_status);
  p.set_message(e.message);
  p.set_type(e.type);
  p.set_param(e.param);
  p.set_code(e.code);
  return p;
}

ApiError error_from_pb(const pb::ApiError& p) {
  ApiError e;
  e.http_status = p.http_status();
  e.message = p.message();
  e.type = p.type();
  e.param = p.param();
  e.code = p.code();
  return e;
}

}  // namespace hypic::api
