// hypic serve: the OpenAI-compatible HTTP server (src/server/). SIGTERM / SIGINT stop it
// gracefully: new requests get 503, running ones finish within --drain-timeout (then are
// cut), exit 0.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "cli/args.h"
#include "cli/cluster_flags.h"
#include "cli/commands.h"
#include "core/log.h"
#include "cli/http_flags.h"
#include "cli/stop_signal.h"
#include "cluster/heartbeat.h"
#include "engine/model_tokenizer.h"
#include "model/model.h"
#include "server/http_server.h"
#include "tokenizer/tokenizer.h"

namespace hypic::cli {

int cmd_serve(int argc, char** argv) {
  Args a("hypic serve --model DIR [--host H] [--port P] [--api-key KEY] ...",
         "Serves the model over HTTP: POST /v1/chat/completions, POST /v1/completions,\n"
         "GET /v1/models, GET /health (OpenAI-compatible, SSE streaming), POST /v1/messages\n"
         "(Anthropic's Messages API), /v1/segments (register / get / list / delete cached\n"
         "segments), GET /metrics (Prometheus), POST /tokenize and /detokenize (llama-server's\n"
         "and vLLM's shapes), GET /version, GET /props (the settings in effect).\n"
         "Binds to loopback unless --host says otherwise. One JSON line per request on stderr.");
  a.opt("model", "DIR|FILE.gguf", "model directory (Hugging Face), or a GGUF file (llama.cpp's; a split: its first part)")
      .opt("host", "H", "address to bind", "127.0.0.1")
      .opt("port", "P", "port (0: any free port, printed at start)", "8080")
      .opt("api-key", "KEY", "require 'Authorization: Bearer KEY' (also $HYPIC_API_KEY)")
      .opt("served-model-name", "NAME", "model id clients send (default: the directory name)")
      .opt("cache-mem", "MiB", "segment / prefix cache memory budget", "1024")
      .opt("cache-dir", "DIR", "disk tier for segment entries, and the registry of /v1/segments: a restart with the same "
                               "DIR answers every unexpired segment id and starts warm")
      .opt("segment-store", "URL", "shared segment tier and registry on Redis, redis://[[USER]:PASSWORD@]HOST:PORT[/DB] "
                                   "(password also $HYPIC_REDIS_PASSWORD; rediss://...?ssl_ca_certs=F[&ssl_certfile=F&"
                                   "ssl_keyfile=F] for TLS): entries built by any instance are fetched, not rebuilt; every "
                                   "instance (and a router given the same URL) answers every segment id")
      .opt("auto-segments", "MODES", "segments for clients that do not mark them, a comma-separated list: separator (texts "
                                     "cut at --segment-separator), parts (each text part of the last user message but the "
                                     "last; trailing tool results), tools (each tool description); or off; a request's "
                                     "hypic.auto_segments overrides it", "off")
      .opt("segment-separator", "S", "the separator of --auto-segments separator", "<<PIC_SEP>>")
      .opt("reasoning", "auto|on|off", "replies that reason (Qwen3.5's <think> block): on, off, or auto (on when the "
                                       "checkpoint's own chat template thinks); a request turns it off with "
                                       "chat_template_kwargs.enable_thinking false; the reasoning is returned as "
                                       "reasoning_content", "auto")
      .opt("flush-timeout", "S", "on SIGTERM, after the drain: seconds to write the memory tier's entries to --cache-dir", "30")
      .opt("max-concurrency", "N", "requests in flight at once (decoded together: continuous batching)", "16")
      .opt("prefill-threads", "N", "threads prefilling new requests while the batch decodes", "1")
      .opt("max-queue", "N", "requests waiting for a worker before 429", "16")
      .opt("max-tokens-limit", "N", "largest max_tokens a request may ask for", "4096")
      .opt("max-body", "MiB", "largest request body", "8")
      .opt("max-segments", "N", "most segments in one request", "64")
      .opt("registered-mem", "MiB", "cache memory registered segments may pin (default: half of --cache-mem)")
      .opt("max-registered-segments", "N", "most registered segments at once", "1024")
      .opt("dtype", kDtypeValues, kDtypeHelp, "bf16")
      .opt("scatter-workers", "LIST", "segment parallelism: host:port,... of `hypic worker`s that build cold segments")
      .opt("local-lanes", "N", "segment parallelism: in-process lanes building cold segments in parallel", "1")
      .opt("scatter-policy", "P", "lane assignment: lpt | round-robin | contiguous", "lpt")
      .opt("grpc-port", "P", "serve the Combine gRPC service a router forwards to (0: any free port)")
      .opt("join", "HOST:PORT", "join a router (its --grpc-port): heartbeats while running, leaves on exit")
      .opt("advertise", "HOST:PORT", "the gRPC address the router reaches this instance at (default: --host:--grpc-port)")
      .opt("debug-piece-delay-ms", "N", "testing: sleep after each generated piece of text", "0");
  add_http_flags(a);
  add_cluster_flags(a);
  if (auto done = parse_command(a, argc, argv, "serve", {"model"})) return *done;
  auto dt = parse_dtype(a.str("dtype"));
  if (!dt) return report_error("serve", dt.status());
  auto port = a.integer("port");
  auto mem = a.integer("cache-mem");
  auto conc = a.integer("max-concurrency");
  auto prefill_threads = a.integer("prefill-threads");
  auto queue = a.integer("max-queue");
  auto maxtok = a.integer("max-tokens-limit");
  auto body = a.integer("max-body");
  auto segs = a.integer("max-segments");
  auto regmem = a.has("registered-mem") ? a.integer("registered-mem") : Result<int64_t>(int64_t(-1));
  auto regs = a.integer("max-registered-segments");
  auto flush_s = a.integer("flush-timeout");
  if (!flush_s) return report_error("serve", flush_s.status());
  if (*flush_s < 0 || *flush_s > 86400) return report_error("serve", invalid_argument("need 0 <= --flush-timeout <= 86400"));
  auto piece_delay = a.integer("debug-piece-delay-ms");
  if (!piece_delay) return report_error("serve", piece_delay.status());
  if (*piece_delay < 0 || *piece_delay > 60000)
    return report_error("serve", invalid_argument("need 0 <= --debug-piece-delay-ms <= 60000"));
  for (const Status* s : {&port.status(), &mem.status(), &conc.status(), &queue.status(),
                          &maxtok.status(), &body.status(), &segs.status(), &regmem.status(),
                          &regs.status()})
    if (!s->is_ok()) return report_error("serve", *s);
  if (*port < 0 || *port > 65535 || *mem < 0 || *conc < 1 || *conc > 256 || *prefill_threads < 1 || *prefill_threads > 16 || *queue < 0 ||
      *maxtok < 1 || *body < 1 || *segs < 0 || (a.has("registered-mem") && *regmem < 1) ||
      *regs < 0)
    return report_error("serve", invalid_argument(
        "need 0 <= --port <= 65535, --cache-mem >= 0, 1 <= --max-concurrency <= 256, 1 <= --prefill-threads <= 16, "
        "--max-queue >= 0, --max-tokens-limit >= 1, --max-body >= 1, --max-segments >= 0, "
        "--registered-mem >= 1, --max-registered-segments >= 0"));

  server::ServerOptions so;
  so.host = a.str("host");
  so.port = int(*port);
  so.api_key = a.str("api-key");
  if (so.api_key.empty())
    if (const char* k = std::getenv("HYPIC_API_KEY")) so.api_key = k;
  const std::string dir = a.str("model");
  so.model_name = a.has("served-model-name")
                      ? a.str("served-model-name")
                      : std::filesystem::path(dir).lexically_normal().filename().string();
  if (so.model_name.empty()) so.model_name = std::filesystem::path(dir).parent_path().filename().string();
  so.cache_mem_bytes = size_t(*mem) << 20;
  so.cache_dir = a.str("cache-dir");
  so.segment_store = a.str("segment-store");
  {
    std::string why;
    if (!api::parse_auto_segments(a.str("auto-segments"), &so.auto_segments, &why))
      return report_error("serve", invalid_argument("--auto-segments: " + why));
    so.auto_segments.sep = a.str("segment-separator");
    if (so.auto_segments.sep.empty()) return report_error("serve", invalid_argument("--segment-separator must not be empty"));
  }
  so.flush_timeout_ms = int(*flush_s) * 1000;
  so.debug_piece_delay_ms = int(*piece_delay);
  so.scheduler.max_batch = int(*conc);
  so.scheduler.workers = int(*prefill_threads);
  so.scheduler.max_queue = int(*queue);
  so.limits.max_tokens = int(*maxtok);
  so.limits.default_max_tokens = std::min(so.limits.default_max_tokens, so.limits.max_tokens);
  so.limits.max_body_bytes = size_t(*body) << 20;
  so.limits.max_segments = int(*segs);
  if (a.has("registered-mem")) so.registered_mem_bytes = size_t(std::min<int64_t>(*regmem, int64_t(1) << 30)) << 20;
  so.max_registered_segments = int(std::min<int64_t>(*regs, 1 << 30));
  if (Status s = read_http_flags(a, &so.http, &so.drain_timeout_ms); !s) return report_error("serve", s);

  auto lanes = a.integer("local-lanes");
  if (!lanes) return report_error("serve", lanes.status());
  if (*lanes < 1 || *lanes > 64) return report_error("serve", invalid_argument("need 1 <= --local-lanes <= 64"));
  so.scatter.local_lanes = int(*lanes);
  if (!cluster::parse_policy(a.str("scatter-policy"), &so.scatter.policy))
    return report_error("serve", invalid_argument("--scatter-policy must be lpt, round-robin or contiguous"));
  auto workers = host_port_list(a.str("scatter-workers"), "scatter-workers");
  if (!workers) return report_error("serve", workers.status());
  so.scatter.workers = std::move(workers).value();
  auto grpc_port = a.has("grpc-port") ? a.integer("grpc-port") : Result<int64_t>(int64_t(-1));
  if (!grpc_port) return report_error("serve", grpc_port.status());
  if (a.has("grpc-port") && (*grpc_port < 0 || *grpc_port > 65535))
    return report_error("serve", invalid_argument("need 0 <= --grpc-port <= 65535"));
  if (a.has("join") && !a.has("grpc-port"))
    return report_error("serve", invalid_argument("--join needs --grpc-port (the router forwards requests there)"));
  so.grpc_port = int(*grpc_port);
  auto creds = read_cluster_flags(a);
  if (!creds) return report_error("serve", creds.status());
  so.creds = *creds;

  install_stop_signals();
  LoadOptions lo;
  lo.compute = *dt;
  log_system_info("serve");
  auto model = load_checked_model(dir, lo);
  if (!model) return report_error("serve", model.status());
  log_chat_format(dir, (*model)->config());
  auto reasoning = model_reasoning(dir, (*model)->config(), a.str("reasoning"));
  if (!reasoning) return report_error("serve", reasoning.status());
  so.reasoning = *reasoning;
  auto tok = load_model_tokenizer(dir);  // GGUF vocabulary, tokenizer.json or tiktoken.model
  if (!tok) return report_error("serve", tok.status());
  auto srv = server::HttpServer::create(*model.value(), tok.value(), so);
  if (!srv) return report_error("serve", srv.status());
  if (Status s = (*srv)->bind(); !s) return report_error("serve", s);
  log_status("hypic serve: model '%s' on %s://%s:%d%s", so.model_name.c_str(), so.http.tls_cert.empty() ? "http" : "https",
               so.host.c_str(), (*srv)->port(), so.api_key.empty() ? "" : " (API key required)");
  if ((*srv)->grpc_port() >= 0)
    log_status("hypic serve: Combine gRPC on %s:%d%s%s", so.host.c_str(), (*srv)->grpc_port(),
                 so.creds->tls() ? " (TLS)" : "", so.creds->has_token() ? " (cluster token required)" : "");
  std::fflush(stderr);
  std::unique_ptr<cluster::Heartbeat> heartbeat;
  if (a.has("join")) {
    auto self = advertised_address(a, so.host, (*srv)->grpc_port());
    if (!self) return report_error("serve", self.status());
    heartbeat = std::make_unique<cluster::Heartbeat>(a.str("join"), cluster::Heartbeat::Role::kInstance, *self, so.creds);
  }

  server::HttpServer* s = srv->get();
  run_until_stopped([&] { s->run(); }, [&] {
    if (heartbeat) heartbeat->stop();  // the router stops sending requests first
    s->stop();
  });
  log_status("hypic serve: stopped");
  return 0;
}

}  // namespace hypic::cli
