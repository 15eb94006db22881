// `hypic router`: the cluster's entry point for clients (SPEC §5). It speaks the same
// OpenAI-compatible HTTP API as `hypic serve` and holds no model: for each completion it
// picks an instance (router/cluster.h: the home of most of the request's segment bytes by
// rendezvous hashing, unless the load is imbalanced), forwards the request over gRPC (proto Combine.Generate) together with the live
// scatter workers, and relays the streamed text as the same JSON / SSE response the instance
// would have written. Which segments hit is decided on the chosen instance, whose cache is
// the authority; its cluster::Scatter builds the misses on the workers (LPT, load-aware).
//
// Faults: an instance that cannot be reached or fails before sending anything is marked
// unhealthy and the request goes to another (at most max_attempts); one that fails after
// text was relayed ends the response with a 502 error event. Members join and leave while
// the router runs (proto Router.Join / Leave, heartbeats) and are probed every
// probe_interval (GetLoad / GetStatus); static ones come from the command line.
//
//   GET  /health              200 while at least one instance is healthy, else 503
//   GET  /metrics             router counters (Prometheus text)
//   GET  /v1/models[/{id}]    the model the instances serve
//   POST /v1/chat/completions, /v1/completions   forwarded
//   GET  /v1/cluster          members, health, load, in-flight
// /v1/segments is per instance (ids are an instance's): the router answers 400 and says so.
//
// Threading: the HTTP front (api/http_front.h: one I/O thread, handler threads) runs the
// handlers; one thread per forwarded request
// reads its gRPC stream into an api::Ticket (the handler writes the response from it); a
// prober thread; a reaper thread cancels forwards whose client left. State: Cluster (own
// lock), the stubs map and the active forwards (mu_), counters (atomics).
#pragma once

#include <memory>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "router/cluster.h"
#include "api/http_front.h"
#include "api/request.h"
#include "rpc/credentials.h"

namespace hypic::router {

struct RouterOptions {
  std::string host = "127.0.0.1";
  int port = 8000;        // HTTP (0: any free port)
  int grpc_port = -1;     // the Router service for Join / Leave (0: any free, −1: none)
  std::string api_key;    // non-empty: "Authorization: Bearer KEY" required
  std::string model_name; // "": whatever the instances serve
  std::vector<std::string> instances, workers;  // static members (host:port of their gRPC)
  api::RequestLimits limits;
  ClusterOptions cluster;
  int probe_interval_ms = 1000;
  int probe_timeout_ms = 500;
  int heartbeat_ms = 2000;  // what Join replies tell members
  int max_attempts = 3;     // instances tried for one request before 502
  // An instance that sends no event for first_byte_timeout_ms after a request was forwarded
  // (instances send one when they admit it), or for idle_timeout_ms between events (they send
  // one at least every second while working), is cut: the request is retried on another
  // instance if its client has received nothing yet, else it ends with a 504 error.
  int first_byte_timeout_ms = 15000;
  int idle_timeout_ms = 30000;
  api::HttpFrontOptions http;  // connection limits and deadlines of the HTTP front
  bool log_requests = true;  // one JSON line per request on stderr
  // The cluster's TLS and token: the Router service requires them, calls to members send them.
  rpc::CredentialsPtr creds = rpc::Credentials::insecure();
  // The instances' shared registry (their --segment-store): with it, requests that name
  // registered segments (segment_id) are accepted and routed by affinity to the segment;
  // without it they are refused (ids are then per instance).
  std::string segment_store;
};

class Router {
 public:
  static Result<std::unique_ptr<Router>> create(RouterOptions opt);
  ~Router();  // stop()

  Status bind();
  int port() const;
  int grpc_port() const;  // −1 without the Router service
  // Serves until stop().
  void run();
  // No new requests; forwards in flight get `grace_ms` to finish, then are cancelled.
  // Idempotent, any thread.
  void stop(int grace_ms = 5000);

  const Cluster& cluster() const;
  struct Impl;

 private:
  explicit Router(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The affinity keys of a parsed request: each inline segment of a hypic / naive chat request
// on its own (salt, seam, mode, text); all other prompt text (all of it in prefix mode) as one
// key of its first 4 KiB (salt, mode), weighted by its whole length, so requests that share a
// long prefix share a home (the prefix cache reuses only exact prefixes). Weights are bytes.
// A registered segment (segment_id) of such a request is a key of (salt, seam, mode, id),
// weighted by id_bytes[id] (4 bytes a token) or, when unknown, by kUnknownSegmentBytes.
inline constexpr int64_t kUnknownSegmentBytes = 4096;
std::vector<SegKey> affinity_keys(const api::ApiRequest& r, const std::map<std::string, int64_t>& id_bytes = {});

}  // namespace hypic::router
