// Small pieces shared by the HTTP front ends (HttpServer, router::Router): error replies,
// API-key checks, JSON output. Pure functions; thread-safe.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "server/request.h"

namespace httplib {
struct Request;
struct Response;
class Server;
}  // namespace httplib

namespace hypic::server {

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
void send_error(httplib::Response& res, const ApiError& e);

// Authentication: "Authorization: Bearer KEY" compared in constant time; an empty key lets
// everything through, and /health never needs one.
bool authorized(const httplib::Request& req, const std::string& api_key);
// True when the request carries a body (it must be read before answering on a kept-alive
// connection, so such requests are authenticated in their handler).
bool has_body(const httplib::Request& req);
void send_unauthorized(httplib::Response& res);

// The routes' common setup: OpenAI error objects for httplib's own errors (404 unknown route,
// 413 body too large, ...), and the API-key check for requests without a body (those with one
// are checked in their handler, after the body is read). `api_key` must outlive `http`.
void install_common_handlers(httplib::Server& http, const std::string& api_key);
// Binds host:*port (0: any free port, written back to *port).
Status bind_http(httplib::Server& http, const std::string& host, int* port);

}  // namespace hypic::server
