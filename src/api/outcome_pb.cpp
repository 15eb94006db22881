#include "api/outcome_pb.h"

namespace hypic::server {

using nlohmann::json;
namespace pb = cluster::pb;

pb::Usage usage_to_pb(const json& u) {
  pb::Usage p;
  auto i64 = [](const json& o, const char* k) { return o.contains(k) ? o[k].get<int64_t>() : int64_t(0); };
  p.set_prompt_tokens(i64(u, "prompt_tokens"));
  p.set_completion_tokens(i64(u, "completion_tokens"));
  if (u.contains("prompt_tokens_details"))
    p.set_cached_tokens(i64(u["prompt_tokens_details"], "cached_tokens"));
  if (!u.contains("hypic")) return p;
  const json& h = u["hypic"];
  p.set_mode(h.value("mode", ""));
  p.set_segments_hit(i64(h, "segments_hit"));
  p.set_segments_missed(i64(h, "segments_missed"));
  p.set_reused_tokens(i64(h, "reused_tokens"));
  p.set_recomputed_tokens(i64(h, "recomputed_tokens"));
  p.set_seam_tokens(i64(h, "seam_tokens"));
  p.set_ttft_ms(h.value("ttft_ms", 0.0));
  p.set_auto_segments(int32_t(i64(h, "auto_segments")));
  p.set_cached_new_tokens(i64(h, "cached_new_tokens"));
  if (h.contains("scatter")) {
    const json& s = h["scatter"];
    pb::ScatterUsage* ps = p.mutable_scatter();
    ps->set_built_remote(int32_t(i64(s, "built_remote")));
    ps->set_built_local(int32_t(i64(s, "built_local")));
    ps->set_rescheduled(int32_t(i64(s, "rescheduled")));
    ps->set_corrupt(int32_t(i64(s, "corrupt")));
  }
  return p;
}

json usage_from_pb(const pb::Usage& p) {
  json h{{"mode", p.mode()},
         {"segments_hit", p.segments_hit()},
         {"segments_missed", p.segments_missed()},
         {"reused_tokens", p.reused_tokens()},
         {"recomputed_tokens", p.recomputed_tokens()},
         {"seam_tokens", p.seam_tokens()},
         {"cached_new_tokens", p.cached_new_tokens()},
         {"ttft_ms", p.ttft_ms()}};
  if (p.auto_segments() > 0) h["auto_segments"] = p.auto_segments();
  if (p.has_scatter())
    h["scatter"] = {{"built_remote", p.scatter().built_remote()}, {"built_local", p.scatter().built_local()},
                    {"rescheduled", p.scatter().rescheduled()}, {"corrupt", p.scatter().corrupt()}};
  return json{{"prompt_tokens", p.prompt_tokens()},
              {"completion_tokens", p.completion_tokens()},
              {"total_tokens", p.prompt_tokens() + p.completion_tokens()},
              {"prompt_tokens_details", {{"cached_tokens", p.cached_tokens()}}},
              {"hypic", h}};
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

}  // namespace hypic::server
