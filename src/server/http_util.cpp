#include "server/http_util.h"

#include <httplib.h>

namespace hypic::server {

using nlohmann::json;

namespace {

bool constant_time_equal(const std::string& a, const std::string& b) {
  unsigned char d = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) d |= uint8_t(a[i]) ^ uint8_t(i < b.size() ? b[i] : 0);
  return d == 0;
}

}  // namespace

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

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.http_status;
  if (e.http_status == 429 || e.http_status == 503) res.set_header("Retry-After", "1");
  res.set_content(dump(e.to_json()), "application/json");
}

bool authorized(const httplib::Request& req, const std::string& api_key) {
  return api_key.empty() || req.path == "/health" ||
         constant_time_equal(req.get_header_value("Authorization"), "Bearer " + api_key);
}

bool has_body(const httplib::Request& req) {
  return req.has_header("Transfer-Encoding") ||
         (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0");
}

void send_unauthorized(httplib::Response& res) {
  send_error(res, make_error(401, "missing or invalid API key (send 'Authorization: Bearer KEY')",
                             "invalid_request_error", "invalid_api_key"));
}

void install_common_handlers(httplib::Server& http, const std::string& api_key) {
  // A 401 from the pre-routing hook for a request with a body would leave the body unread on
  // a kept-alive connection, where its bytes would be parsed as the next request (seen with
  // httpx, which sends the body in its own segment).
  http.set_pre_routing_handler([&api_key](const httplib::Request& req, httplib::Response& res) {
    if (authorized(req, api_key) || has_body(req)) return httplib::Server::HandlerResponse::Unhandled;
    send_unauthorized(res);
    return httplib::Server::HandlerResponse::Handled;
  });
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404)
      send_error(res, make_error(404, "unknown route " + req.method + " " + req.path, "invalid_request_error", "unknown_url"));
    else if (res.status == 413)
      send_error(res, make_error(413, "request body too large", "invalid_request_error", "request_too_large"));
    else
      send_error(res, make_error(res.status, "HTTP error " + std::to_string(res.status), "invalid_request_error", ""));
  });
}

Status bind_http(httplib::Server& http, const std::string& host, int* port) {
  const bool ok = *port == 0 ? (*port = http.bind_to_any_port(host)) > 0 : http.bind_to_port(host, *port);
  if (!ok)
    return io_error("cannot listen on " + host + ":" + std::to_string(*port) +
                    " (in use, or not an address of this machine); pick another --port or --host");
  return Status::ok();
}

}  // namespace hypic::server
