#include "api/http_util.h"

#include "api/http_front.h"
#include "core/version.h"

namespace hypic::api {

using nlohmann::json;

bool constant_time_equal(const std::string& a, const std::string& b) {
  unsigned char d = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) d |= uint8_t(a[i]) ^ uint8_t(i < b.size() ? b[i] : 0);
  return d == 0;
}

ApiError make_error(int status, std::string msg, std::string type, std::string code,
                    std::string param) {
  ApiError e;
  e.http_status = status;
  e.message = std::move(msg);
  e.type = std::move(type);
  e.code = std::move(code);
  e.param = std::move(param);
  return e;
}

ApiError model_not_found(const std::string& asked, const std::string& served) {
  return make_error(404, "the model '" + asked + "' does not exist; this server serves '" + served + "'",
                    "invalid_request_error", "model_not_found", "model");
}

ApiError status_error(const Status& s) {
  return s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kOutOfRange
             ? bad_request(s.message())
             : make_error(500, s.message(), "server_error", "internal_error");
}

ApiError cancelled_error() {
  return make_error(499, "cancelled by the client", "invalid_request_error", "cancelled");
}

ApiError overloaded_error() {
  return make_error(429, "the server is busy (request queue full); retry later", "rate_limit_error", "overloaded");
}

ApiError shutting_down_error() {
  return make_error(503, "the server is shutting down", "server_error", "shutting_down");
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

HttpResponse error_reply(const ApiError& e) {
  HttpResponse r;
  r.status = e.http_status;
  if (e.http_status == 429 || e.http_status == 503) r.set("Retry-After", "1");
  r.body = dump(e.to_json());
  return r;
}

json version_json() { return json{{"version", version()}, {"commit", build_commit()}}; }

HttpResponse json_reply(const json& j, int status) {
  HttpResponse r;
  r.status = status;
  r.body = dump(j);
  return r;
}

}  // namespace hypic::api
