// hypic router: the cluster's HTTP entry point (src/router/router.h). SIGTERM / SIGINT stop
// it gracefully: new requests get 503, forwarded ones get --drain-timeout to finish (then are
// cancelled), exit 0.
#include <algorithm>
#include <cstdlib>
#include <cstdio>

#include "cli/args.h"
#include "cli/cluster_flags.h"
#include "cli/commands.h"
#include "core/log.h"
#include "cli/http_flags.h"
#include "cli/stop_signal.h"
#include "router/router.h"

namespace hypic::cli {

int cmd_router(int argc, char** argv) {
  Args a("hypic router [--instances LIST] [--workers LIST] [--grpc-port P] [--port P] ...",
         "Routes OpenAI-compatible requests across `hypic serve --grpc-port` instances: each\n"
         "request goes to the instance that most likely caches its segments (cache affinity),\n"
         "unless the load is imbalanced, with the live `hypic worker`s for its cold segments.\n"
         "Members are listed here (--instances, --workers) and/or join at run time\n"
         "(`hypic serve --join` / `hypic worker --join` this router's --grpc-port). No model\n"
         "is loaded here. Binds to loopback unless --host says otherwise. Serves the\n"
         "instances' endpoints (/v1/chat/completions, /v1/completions, /v1/messages, /tokenize,\n"
         "/detokenize, /props, /v1/models) and its own: /health, /metrics, /version, /v1/cluster.");
  a.opt("host", "H", "address to bind (HTTP and gRPC)", "127.0.0.1")
      .opt("port", "P", "HTTP port (0: any free port, printed at start)", "8000")
      .opt("grpc-port", "P", "port of the Router service members join (0: any free port; default: none)")
      .opt("instances", "LIST", "host:port,... of instances' --grpc-port")
      .opt("workers", "LIST", "host:port,... of scatter workers")
      .opt("api-key", "KEY", "require 'Authorization: Bearer KEY' (also $HYPIC_API_KEY)")
      .opt("served-model-name", "NAME", "model id clients send (default: what the instances serve)")
      .opt("routing", "P", "instance choice: affinity | least-loaded | round-robin (the last two for comparison)", "affinity")
      .opt("probe-interval-ms", "MS", "health / load check period", "1000")
      .opt("max-attempts", "N", "instances tried for one request", "3")
      .opt("first-byte-timeout", "S", "seconds an instance may take to acknowledge a forwarded request (instances "
                                      "acknowledge on admission); then it is tried elsewhere, or the client gets 504", "15")
      .opt("idle-timeout", "S", "seconds an instance may go silent mid-request (instances send a keep-alive every "
                                "second); then as above, or a stream ends with a 504 error event", "30")
      .opt("max-body", "MiB", "largest request body", "8")
      .opt("segment-store", "URL", "the instances' shared registry (their --segment-store redis://...): requests naming "
                                   "registered segments (segment_id) are then accepted and routed to the segment's home");
  add_http_flags(a);
  add_cluster_flags(a);
  if (auto done = parse_command(a, argc, argv, "router")) return *done;
  router::RouterOptions ro;
  ro.host = a.str("host");
  auto port = a.integer("port");
  auto grpc_port = a.has("grpc-port") ? a.integer("grpc-port") : Result<int64_t>(int64_t(-1));
  auto probe = a.integer("probe-interval-ms");
  auto attempts = a.integer("max-attempts");
  auto body = a.integer("max-body");
  for (const Status* s : {&port.status(), &grpc_port.status(), &probe.status(), &attempts.status(), &body.status()})
    if (!s->is_ok()) return report_error("router", *s);
  if (*port < 0 || *port > 65535 || (a.has("grpc-port") && (*grpc_port < 0 || *grpc_port > 65535)) ||
      *probe < 50 || *probe > 600000 || *attempts < 1 || *attempts > 16 || *body < 1 || *body > 1024)
    return report_error("router", invalid_argument(
        "need 0 <= --port, --grpc-port <= 65535, 50 <= --probe-interval-ms <= 600000, 1 <= --max-attempts <= 16, "
        "1 <= --max-body <= 1024"));
  ro.port = int(*port);
  auto creds = read_cluster_flags(a);
  if (!creds) return report_error("router", creds.status());
  ro.creds = *creds;
  ro.grpc_port = int(*grpc_port);
  ro.probe_interval_ms = int(*probe);
  ro.probe_timeout_ms = std::min(500, int(*probe));
  ro.max_attempts = int(*attempts);
  for (const auto& [flag, ms] : {std::pair{"first-byte-timeout", &ro.first_byte_timeout_ms},
                                 std::pair{"idle-timeout", &ro.idle_timeout_ms}}) {
    auto v = a.number(flag);
    if (!v) return report_error("router", v.status());
    if (!(*v >= 0.1 && *v <= 86400))
      return report_error("router", invalid_argument(std::string("--") + flag + " must be in [0.1, 86400] seconds"));
    *ms = int(*v * 1000);
  }
  ro.limits.max_body_bytes = size_t(*body) << 20;
  int drain_ms = 0;
  if (Status s = read_http_flags(a, &ro.http, &drain_ms); !s) return report_error("router", s);
  ro.api_key = a.str("api-key");
  ro.segment_store = a.str("segment-store");
  if (ro.api_key.empty())
    if (const char* k = std::getenv("HYPIC_API_KEY")) ro.api_key = k;
  ro.model_name = a.str("served-model-name");
  if (!router::parse_routing(a.str("routing"), &ro.cluster.routing))
    return report_error("router", invalid_argument("--routing must be affinity, least-loaded or round-robin"));
  auto inst = host_port_list(a.str("instances"), "instances");
  if (!inst) return report_error("router", inst.status());
  auto workers = host_port_list(a.str("workers"), "workers");
  if (!workers) return report_error("router", workers.status());
  ro.instances = std::move(inst).value();
  ro.workers = std::move(workers).value();

  install_stop_signals();
  auto r = router::Router::create(ro);
  if (!r) return report_error("router", r.status());
  if (Status s = (*r)->bind(); !s) return report_error("router", s);
  const std::string join = (*r)->grpc_port() >= 0
                               ? ", members join at " + ro.host + ":" + std::to_string((*r)->grpc_port()) : "";
  log_status("hypic router: %s://%s:%d%s (%zu static instances, %zu static workers)%s%s",
             ro.http.tls_cert.empty() ? "http" : "https", ro.host.c_str(),
             (*r)->port(), join.c_str(), ro.instances.size(), ro.workers.size(), ro.creds->tls() ? " (TLS)" : "",
             ro.creds->has_token() ? " (cluster token required)" : "");
  std::fflush(stderr);
  router::Router* p = r->get();
  run_until_stopped([&] { p->run(); }, [&] { p->stop(drain_ms); });
  log_status("hypic router: stopped");
  return 0;
}

}  // namespace hypic::cli
