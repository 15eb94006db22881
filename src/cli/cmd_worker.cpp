// hypic worker: a scatter worker for segment parallelism (SPEC §5, src/cluster/worker.h). It
// builds the segment entries a combine worker sends over gRPC and streams them back.
// SIGTERM / SIGINT stop it gracefully: no new calls, running ones get 2 s, exit 0.
#include <cstdio>

#include "cli/args.h"
#include "cli/cluster_flags.h"
#include "cli/commands.h"
#include "core/log.h"
#include "cli/stop_signal.h"
#include "cluster/heartbeat.h"
#include "cluster/wire.h"
#include "cluster/worker.h"
#include "model/model.h"

namespace hypic::cli {

int cmd_worker(int argc, char** argv) {
  Args a("hypic worker --model DIR [--host H] [--port P] [--dtype bf16|f32|int8|q4] ...",
         "Scatter worker: builds the cached-segment entries a combine worker (hypic serve)\n"
         "sends it over gRPC (proto/hypic_cluster.proto) and streams each back as soon as it is\n"
         "built. It must load the same checkpoint with the same --dtype as the combine worker.\n"
         "Binds to loopback unless --host says otherwise; the port is printed on stderr.");
  a.opt("model", "DIR|FILE.gguf", "model directory (Hugging Face), or a GGUF file (llama.cpp's; a split: its first part)")
      .opt("host", "H", "address to bind", "127.0.0.1")
      .opt("port", "P", "port (0: any free port, printed at start)", "50051")
      .opt("dtype", kDtypeValues, kDtypeHelp, "bf16")
      .opt("max-message", "MiB", "largest gRPC message sent or received", "4")
      .opt("join", "HOST:PORT", "join a router (its --grpc-port): heartbeats while running, leaves on exit")
      .opt("advertise", "HOST:PORT", "the address the router reaches this worker at (default: --host:port)")
      .opt("debug-corrupt-every", "N", "testing: damage every Nth entry sent (0: never)", "0")
      .opt("debug-delay-ms", "N", "testing: sleep before building each segment", "0");
  add_cluster_flags(a);
  if (auto done = parse_command(a, argc, argv, "worker", {"model"})) return *done;
  auto dt = parse_dtype(a.str("dtype"));
  if (!dt) return report_error("worker", dt.status());
  auto port = a.integer("port");
  auto msg = a.integer("max-message");
  auto corrupt_every = a.integer("debug-corrupt-every");
  auto delay = a.integer("debug-delay-ms");
  for (const Status* s : {&port.status(), &msg.status(), &corrupt_every.status(), &delay.status()})
    if (!s->is_ok()) return report_error("worker", *s);
  if (*port < 0 || *port > 65535 || *msg < 1 || *msg > int64_t(cluster::kMaxMessageBytes >> 20) ||
      *corrupt_every < 0 || *delay < 0 || *delay > 3600000)
    return report_error("worker", invalid_argument(
        "need 0 <= --port <= 65535, 1 <= --max-message <= " +
        std::to_string(cluster::kMaxMessageBytes >> 20) +
        ", --debug-corrupt-every >= 0, 0 <= --debug-delay-ms <= 3600000"));
  cluster::WorkerOptions wo;
  wo.host = a.str("host");
  wo.port = int(*port);
  wo.max_message_bytes = size_t(*msg) << 20;
  wo.debug_corrupt_every = int(std::min<int64_t>(*corrupt_every, 1 << 30));
  wo.debug_delay_ms = int(*delay);
  auto creds = read_cluster_flags(a);
  if (!creds) return report_error("worker", creds.status());
  wo.creds = *creds;

  install_stop_signals();
  LoadOptions lo;
  lo.compute = *dt;
  log_system_info("worker");
  auto model = load_checked_model(a.str("model"), lo);
  if (!model) return report_error("worker", model.status());
  auto srv = cluster::WorkerServer::start(*model.value(), wo);
  if (!srv) return report_error("worker", srv.status());
  log_status("hypic worker: model '%s' (%s) on %s%s%s", a.str("model").c_str(),
               dtype_name(*dt), (*srv)->address().c_str(), wo.creds->tls() ? " (TLS)" : "",
               wo.creds->has_token() ? " (cluster token required)" : "");
  std::fflush(stderr);
  std::unique_ptr<cluster::Heartbeat> heartbeat;
  if (a.has("join")) {
    auto self = advertised_address(a, wo.host, (*srv)->port());
    if (!self) return report_error("worker", self.status());
    heartbeat = std::make_unique<cluster::Heartbeat>(a.str("join"), cluster::Heartbeat::Role::kWorker, *self, wo.creds);
  }

  cluster::WorkerServer* s = srv->get();
  run_until_stopped([&] { s->wait(); }, [&] {
    if (heartbeat) heartbeat->stop();  // the router stops sending work first
    s->shutdown(2000);
  });
  log_status("hypic worker: stopped");
  return 0;
}

}  // namespace hypic::cli
