// Small pieces shared by the HTTP front ends (HttpServer, router::Router): error objects,
// JSON output, the API-key comparison. Pure functions; thread-safe.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "api/request.h"

namespace hypic::api {

struct HttpResponse;

ApiError make_error(int status, std::string msg, std::string type, std::string code,
                    std::string param = "");
// 404 model_not_found naming the served model.
ApiError model_not_found(const std::string& asked, const std::string& served);
// kInvalidArgument / kOutOfRange → 400, anything else → 500.
ApiError status_error(const Status& s);
ApiError cancelled_error();  // 499
ApiError overloaded_error();  // 429
ApiError shutting_down_error();  // 503

// Serialises without throwing (invalid UTF-8 is replaced).
std::string dump(const nlohmann::json& j);
// The error object as the body, with Retry-After on 429 / 503.
HttpResponse error_reply(const ApiError& e);
// A JSON body (200 unless told otherwise).
HttpResponse json_reply(const nlohmann::json& j, int status = 200);
// GET /version of the server and the router: {"version", "commit"}.
nlohmann::json version_json();

// Equal strings, in time that depends on the lengths only (API keys).
bool constant_time_equal(const std::string& a, const std::string& b);

}  // namespace hypic::api
