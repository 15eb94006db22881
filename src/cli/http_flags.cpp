#include "cli/http_flags.h"

namespace hypic::cli {

void add_http_flags(Args& a) {
  a.opt("max-connections", "N", "open HTTP connections at most (more are answered 503 and closed)", "4096")
      .opt("max-connections-per-peer", "N", "open HTTP connections from one client address at most", "256")
      .opt("header-timeout", "S", "seconds a request's whole header block may take (then 408, closed)", "10")
      .opt("body-timeout", "S", "seconds a request's whole body may take (then 408, closed)", "30")
      .opt("keep-alive-timeout", "S", "seconds an idle kept-alive connection stays open", "5")
      .opt("write-timeout", "S", "seconds one write to a client that does not read may take (then closed)", "30")
      .opt("http-threads", "N", "threads running route handlers (parsing, tokenising; connections need none)", "2")
      .opt("drain-timeout", "S", "on SIGTERM: seconds requests in flight may still run; then they are cut "
                                 "(a stream ends with an error event, code shutting_down); new requests get 503", "30")
      .opt("cors-origin", "ORIGIN", "let browser pages from ORIGIN (scheme://host[:port], or * for any) call this "
                                    "server: CORS headers and preflight answers; repeatable; off by default (no "
                                    "credentials are ever allowed: pages send the API key as a header)")
      .opt("https-cert", "FILE", "serve HTTPS: this certificate chain (PEM), with --https-key; plain HTTP to the "
                                 "port is answered 400 and closed (the cluster's gRPC TLS is --tls-cert / --tls-key)")
      .opt("https-key", "FILE", "the private key (PEM) of --https-cert")
      .opt("https-client-ca", "FILE", "with --https-cert: clients must present a certificate signed by this CA (PEM)");
}

Status read_http_flags(const Args& a, api::HttpFrontOptions* o, int* drain_timeout_ms) {
  struct Flag {
    const char* name;
    int64_t lo, hi, scale;
    int* out;
  };
  const Flag flags[] = {
      {"max-connections", 1, 1 << 20, 1, &o->max_connections},
      {"max-connections-per-peer", 1, 1 << 20, 1, &o->max_connections_per_peer},
      {"header-timeout", 1, 3600, 1000, &o->header_timeout_ms},
      {"body-timeout", 1, 3600, 1000, &o->body_timeout_ms},
      {"keep-alive-timeout", 1, 3600, 1000, &o->keep_alive_timeout_ms},
      {"write-timeout", 1, 3600, 1000, &o->write_timeout_ms},
      {"http-threads", 1, 64, 1, &o->handler_threads},
      {"drain-timeout", 0, 86400, 1000, drain_timeout_ms},
  };
  for (const std::string& origin : a.all("cors-origin")) {
    const size_t scheme = origin.find("://");
    const bool ok = origin == "*" || ((origin.rfind("http://", 0) == 0 || origin.rfind("https://", 0) == 0) &&
                                      origin.size() > scheme + 3 && origin.find('/', scheme + 3) == std::string::npos);
    if (!ok)
      return invalid_argument("--cors-origin '" + origin + "' is not an origin: give scheme://host[:port] as the "
                              "browser sends it (no path, no trailing slash), or * for any");
    o->cors_origins.push_back(origin);
  }
  o->tls_cert = a.str("https-cert");
  o->tls_key = a.str("https-key");
  o->tls_client_ca = a.str("https-client-ca");
  for (const Flag& f : flags) {
    auto v = a.integer(f.name);
    if (!v) return v.status();
    if (*v < f.lo || *v > f.hi)
      return invalid_argument("--" + std::string(f.name) + " must be in [" + std::to_string(f.lo) + ", " + std::to_string(f.hi) + "]");
    *f.out = int(*v * f.scale);
  }
  return Status::ok();
}

}  // namespace hypic::cli
