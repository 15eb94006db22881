#include "server/combine_service.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>

#include "core/address.h"
#include "hypic_cluster.grpc.pb.h"

namespace hypic::server {

using nlohmann::json;
namespace pb = cluster::pb;

pb::Usage usage_to_pb(const json& u) {
  pb::Usage p;
  auto i64 = [](const json& o, const char* k) { return o.contains(k) ? o[k].get<int64_t>() : int64_t(0); };
  p.set_prompt_tokens(i64(u, "prompt_tokens"));
  p.set_completion_tokens(i64(u, "completion_tokens"));
  if (u.contains("prompt_tokens_details"))
    p.set_cached_tokens(i64(u["prompt_tokens_details"], "cached_tokens"));
  if (!u.contains("hypic")) return p;
  const json& h = u["hypic"];
  p.set_mode(h.value("mode", ""));
  p.set_segments_hit(i64(h, "segments_hit"));
  p.set_segments_missed(i64(h, "segments_missed"));
  p.set_reused_tokens(i64(h, "reused_tokens"));
  p.set_recomputed_tokens(i64(h, "recomputed_tokens"));
  p.set_seam_tokens(i64(h, "seam_tokens"));
  p.set_ttft_ms(h.value("ttft_ms", 0.0));
  if (h.contains("scatter")) {
    const json& s = h["scatter"];
    pb::ScatterUsage* ps = p.mutable_scatter();
    ps->set_built_remote(int32_t(i64(s, "built_remote")));
    ps->set_built_local(int32_t(i64(s, "built_local")));
    ps->set_rescheduled(int32_t(i64(s, "rescheduled")));
    ps->set_corrupt(int32_t(i64(s, "corrupt")));
  }
  return p;
}

json usage_from_pb(const pb::Usage& p) {
  json h{{"mode", p.mode()},
         {"segments_hit", p.segments_hit()},
         {"segments_missed", p.segments_missed()},
         {"reused_tokens", p.reused_tokens()},
         {"recomputed_tokens", p.recomputed_tokens()},
         {"seam_tokens", p.seam_tokens()},
         {"ttft_ms", p.ttft_ms()}};
  if (p.has_scatter())
    h["scatter"] = {{"built_remote", p.scatter().built_remote()}, {"built_local", p.scatter().built_local()},
                    {"rescheduled", p.scatter().rescheduled()}, {"corrupt", p.scatter().corrupt()}};
  return json{{"prompt_tokens", p.prompt_tokens()},
              {"completion_tokens", p.completion_tokens()},
              {"total_tokens", p.prompt_tokens() + p.completion_tokens()},
              {"prompt_tokens_details", {{"cached_tokens", p.cached_tokens()}}},
              {"hypic", h}};
}

pb::ApiError error_to_pb(const ApiError& e) {
  pb::ApiError p;
  p.set_http_status(e.http_status);
  p.set_message(e.message);
  p.set_type(e.type);
  p.set_param(e.param);
  p.set_code(e.code);
  return p;
}

ApiError error_from_pb(const pb::ApiError& p) {
  ApiError e;
  e.http_status = p.http_status();
  e.message = p.message();
  e.type = p.type();
  e.param = p.param();
  e.code = p.code();
  return e;
}

struct CombineServer::Service final : pb::Combine::Service {
  explicit Service(CombineHooks h) : hooks(std::move(h)) {}

  grpc::Status GetLoad(grpc::ServerContext*, const pb::LoadRequest*, pb::InstanceLoad* out) override {
    *out = hooks.load();
    return grpc::Status::OK;
  }

  grpc::Status Generate(grpc::ServerContext* ctx, const pb::GenerateRequest* req,
                        grpc::ServerWriter<pb::GenerateEvent>* w) override {
    const Timer arrival;
    const Endpoint ep = req->endpoint() == pb::GenerateRequest::COMPLETIONS ? Endpoint::kCompletions : Endpoint::kChat;
    json log{{"id", req->request_id()}, {"path", ep == Endpoint::kChat ? "/v1/chat/completions" : "/v1/completions"},
             {"via", "router"}};
    auto end = [&](int status, const json& usage, const std::string& code) {
      log["status"] = status;
      log["ms"] = arrival.ms();
      if (!code.empty()) log["error"] = code;
      if (!usage.is_null()) log["usage"] = usage;
      hooks.done(status, log);
    };
    auto send_error = [&](const ApiError& e) {
      pb::GenerateEvent ev;
      *ev.mutable_error() = error_to_pb(e);
      w->Write(ev);
      end(e.http_status, nullptr, e.code);
      return grpc::Status::OK;
    };
    ApiRequest r;
    PromptParts parts;
    if (auto e = hooks.prepare(req->openai_body(), ep, &r, &parts)) return send_error(*e);
    log["stream"] = r.stream;
    log["mode"] = pic_mode_name(r.mode);
    r.client_gone = [ctx] { return ctx->IsCancelled(); };
    r.scatter_workers.assign(req->scatter_workers().begin(), req->scatter_workers().end());
    auto admitted = hooks.submit(std::move(r), std::move(parts), arrival);
    if (auto* e = std::get_if<ApiError>(&admitted)) return send_error(*e);
    std::shared_ptr<Ticket> ticket = std::get<std::shared_ptr<Ticket>>(std::move(admitted));
    std::string piece;
    Outcome o;
    bool writing = true;
    while (ticket->next(&piece, &o)) {
      if (!writing) continue;
      pb::GenerateEvent ev;
      ev.set_text(std::move(piece));
      if (!w->Write(ev) || ctx->IsCancelled()) {  // the router (or its client) went away
        writing = false;
        ticket->cancel();
      }
    }
    if (!writing || ctx->IsCancelled()) {
      end(499, nullptr, "cancelled");
      return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the router");
    }
    if (o.error) return send_error(*o.error);
    pb::GenerateEvent ev;
    ev.mutable_final()->set_finish_reason(o.result.value("finish_reason", ""));
    *ev.mutable_final()->mutable_usage() = usage_to_pb(o.result["usage"]);
    w->Write(ev);
    end(200, o.result["usage"], "");
    return grpc::Status::OK;
  }

  CombineHooks hooks;
};

Result<std::unique_ptr<CombineServer>> CombineServer::start(const std::string& host, int port,
                                                            size_t max_body_bytes, CombineHooks hooks) {
  if (port < 0 || port > 65535) return invalid_argument("gRPC port must be in [0, 65535]");
  std::unique_ptr<CombineServer> cs(new CombineServer);
  cs->service_ = std::make_unique<Service>(std::move(hooks));
  grpc::ServerBuilder b;
  b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // a taken port is an error, not shared
  b.SetMaxReceiveMessageSize(int(std::min<size_t>(max_body_bytes + (size_t(1) << 20), size_t(1) << 30)));
  b.AddListeningPort(host_port(host, port), grpc::InsecureServerCredentials(), &cs->port_);
  b.RegisterService(cs->service_.get());
  cs->server_ = b.BuildAndStart();
  if (!cs->server_ || cs->port_ == 0)
    return io_error("cannot listen for gRPC on " + host_port(host, port) +
                    ": is the port in use or the address not local? Pick another --grpc-port (0: any free port)");
  return cs;
}

CombineServer::~CombineServer() {
  if (!server_) return;
  shutdown(0);
  server_->Wait();
}

void CombineServer::shutdown(int grace_ms) {
  std::call_once(shutdown_once_, [&] {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(grace_ms));
  });
}

}  // namespace hypic::server
