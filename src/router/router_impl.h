// Router internals (router-internal): the state shared by the HTTP routes (router_http.cpp),
// the membership service and prober (router_members.cpp) and the forwarding (router.cpp).
#pragma once

#include "router/router.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "core/hash.h"
#include "core/timer.h"
#include "core/address.h"
#include "core/log.h"
#include "kv/redis.h"
#include "kv/segment_records.h"
#include "hypic_cluster.grpc.pb.h"
#include "api/anthropic.h"
#include "api/outcome_pb.h"
#include "api/http_front.h"
#include "api/http_util.h"
#include "api/respond.h"

namespace hypic::router {

using nlohmann::json;
namespace pb = cluster::pb;
using api::ApiError;
using api::dump;
using api::make_error;
using api::error_reply;
using api::HttpRequest;
using api::json_reply;
using api::Reply;

namespace detail {

inline std::chrono::system_clock::time_point after_ms(int ms) {
  return std::chrono::system_clock::now() + std::chrono::milliseconds(ms);
}

}  // namespace detail

// One forwarded request: its gRPC call in flight, for the reaper and stop().
struct Forward {
  using Clock = std::chrono::steady_clock;
  std::shared_ptr<api::Ticket> ticket;
  std::function<bool()> client_gone;  // the client's connection has closed
  bool stream = false;                // the client reads pieces as they come
  std::mutex mu;
  grpc::ClientContext* ctx = nullptr;  // the current attempt's call (guarded by mu)
  bool cancel = false;                 // guarded by mu
  // The current attempt's next event is due by `due` (first byte, then idle deadline); the
  // reaper cancels the call when it is late and sets `late` (guarded by mu).
  Clock::time_point due = Clock::time_point::max();
  bool late = false;
  void try_cancel() {
    std::lock_guard<std::mutex> l(mu);
    cancel = true;
    if (ctx) ctx->TryCancel();
  }
  // Starts an attempt's call (false: cancelled already) and its first-byte deadline.
  bool begin_attempt(grpc::ClientContext* c, int first_byte_ms) {
    std::lock_guard<std::mutex> l(mu);
    if (cancel) return false;
    ctx = c;
    late = false;
    due = Clock::now() + std::chrono::milliseconds(first_byte_ms);
    return true;
  }
  void event_arrived(int idle_ms) {
    std::lock_guard<std::mutex> l(mu);
    due = Clock::now() + std::chrono::milliseconds(idle_ms);
  }
  // Ends the attempt's call; whether it was cut for being late.
  bool end_attempt() {
    std::lock_guard<std::mutex> l(mu);
    ctx = nullptr;
    due = Clock::time_point::max();
    return late;
  }
  void cancel_if_late(Clock::time_point now) {
    std::lock_guard<std::mutex> l(mu);
    if (ctx && !late && now > due) {
      late = true;
      ctx->TryCancel();
    }
  }
};

struct Router::Impl {
  RouterOptions opt;
  Cluster cluster;
  std::unique_ptr<api::HttpFront> http;
  std::unique_ptr<grpc::Server> grpc_server;
  int grpc_port = -1;
  struct Service;  // pb::Router (Join / Leave), router_members.cpp
  std::unique_ptr<grpc::Service> service;
  static std::unique_ptr<grpc::Service> make_service(Impl* impl);

  std::mutex mu_;  // stubs, active, stopping
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<pb::Combine::Stub>> combine_stubs;
  std::map<std::string, std::shared_ptr<pb::SegmentWorker::Stub>> worker_stubs;
  std::set<std::shared_ptr<Forward>> active;
  int forwarding = 0;  // forward threads running (stop() waits for 0)
  bool stopping = false;
  std::thread prober, reaper;
  std::once_flag stop_once;

  std::unique_ptr<SegmentRecords> records;  // the shared registry (--segment-store), or null
  // The token bytes of the request's registered segments (for affinity weights); an error
  // when one is unknown to the shared registry or the request names ids without one.
  std::optional<ApiError> resolve_ids(const api::ApiRequest& r, std::map<std::string, int64_t>* bytes);

  std::atomic<uint64_t> next_id{1}, retries{0}, affinity_hits{0}, affinity_bytes{0};
  std::mutex count_mu;
  std::map<int, uint64_t> by_status;  // guarded by count_mu

  explicit Impl(RouterOptions o) : opt(std::move(o)), cluster(opt.cluster) {}

  std::shared_ptr<pb::Combine::Stub> combine_stub(const std::string& a);
  std::shared_ptr<pb::SegmentWorker::Stub> worker_stub(const std::string& a);
  void probe_all();
  void probe_loop();
  void reap_loop();
  void run_forward(std::shared_ptr<Forward> f, std::string body, api::Endpoint ep,
                   std::vector<SegKey> keys, std::string id);
  // messages_body: the chat body of a POST /v1/messages (forwarded as chat, answered in
  // Anthropic's shapes).
  void handle_completion(const HttpRequest& req, Reply reply, api::Endpoint ep,
                         const std::string* messages_body = nullptr);
  std::string served_model() const {
    return opt.model_name.empty() ? cluster.model_name() : opt.model_name;
  }
  void log_line(const json& j) {
    if (opt.log_requests) log_json_line(dump(j));
  }
  void count(int status) {
    std::lock_guard<std::mutex> l(count_mu);
    by_status[status] += 1;
  }
  // POST /tokenize, /detokenize, GET /props: forwarded to an instance (Combine.Query).
  void handle_query(const HttpRequest& req, Reply reply);
  std::string metrics_text();
  json cluster_json();
  // The error of a forward that was cancelled: cut at the drain deadline (503), or its
  // client left (499).
  ApiError cut_or_cancelled() {
    std::lock_guard<std::mutex> l(mu_);
    if (!stopping) return api::cancelled_error();
    return make_error(503, "the router is shutting down: this reply was cut at the drain deadline (--drain-timeout); retry the request",
                      "server_error", "shutting_down");
  }
  void setup_routes();
};

}  // namespace hypic::router
