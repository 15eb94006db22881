#include "server/combine_service.h"

#include "api/respond.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>

#include "api/http_util.h"
#include "api/outcome_pb.h"
#include "api/respond.h"
#include "core/address.h"
#include "hypic_cluster.grpc.pb.h"

namespace hypic::server {

using namespace api;  // the server speaks the API's types

using nlohmann::json;
namespace pb = cluster::pb;

// How long a request may go without an event to the router before a `working` one is sent.
constexpr std::chrono::milliseconds kWorkingEvery{1000};

struct CombineServer::Service final : pb::Combine::Service {
  Service(const Admission& a, rpc::CredentialsPtr c) : admission(a), creds(std::move(c)) {}

  grpc::Status GetLoad(grpc::ServerContext* ctx, const pb::LoadRequest*, pb::InstanceLoad* out) override {
    if (auto st = creds->check(ctx, "Combine.GetLoad"); !st.ok()) return st;
    *out = admission.load();
    return grpc::Status::OK;
  }

  grpc::Status Query(grpc::ServerContext* ctx, const pb::QueryRequest* req, pb::QueryReply* out) override {
    if (auto st = creds->check(ctx, "Combine.Query"); !st.ok()) return st;
    auto r = admission.query(req->path(), req->body());
    if (auto* e = std::get_if<ApiError>(&r)) *out->mutable_error() = error_to_pb(*e);
    else out->set_json(dump(std::get<json>(r)));
    return grpc::Status::OK;
  }

  grpc::Status Generate(grpc::ServerContext* ctx, const pb::GenerateRequest* req,
                        grpc::ServerWriter<pb::GenerateEvent>* w) override {
    if (auto st = creds->check(ctx, "Combine.Generate"); !st.ok()) return st;
    const Timer arrival;
    const Endpoint ep = req->endpoint() == pb::GenerateRequest::COMPLETIONS ? Endpoint::kCompletions : Endpoint::kChat;
    json log{{"id", req->request_id()}, {"path", ep == Endpoint::kChat ? "/v1/chat/completions" : "/v1/completions"},
             {"via", "router"}};
    auto end = [&](int status, const json& usage, const std::string& code) {
      log["status"] = status;
      log["ms"] = arrival.ms();
      if (!code.empty()) log["error"] = code;
      if (!usage.is_null()) log["usage"] = usage;
      admission.finished(status, log);
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
    if (auto e = admission.prepare(req->openai_body(), ep, &r, &parts)) return send_error(*e);
    log["stream"] = r.stream;
    log["mode"] = pic_mode_name(r.mode);
    CompletionJob job{std::move(r), std::move(parts), [ctx] { return ctx->IsCancelled(); },
                      {req->scatter_workers().begin(), req->scatter_workers().end()}};
    auto admitted = admission.submit(std::move(job), arrival);
    if (auto* e = std::get_if<ApiError>(&admitted)) return send_error(*e);
    std::shared_ptr<Ticket> ticket = std::get<std::shared_ptr<Ticket>>(std::move(admitted));
    Ticket::Piece piece;
    Outcome o;
    pb::GenerateEvent working;
    working.set_working(true);
    bool writing = w->Write(working);  // admitted: the router's first-byte deadline is met
    if (!writing) ticket->cancel();
    for (Ticket::Next n; (n = ticket->next_for(&piece, &o, kWorkingEvery)) != Ticket::Next::kOutcome;) {
      if (!writing) continue;
      pb::GenerateEvent ev;
      if (n == Ticket::Next::kPending) {
        ev.set_working(true);  // a second without output: still here
      } else {
        if (piece.tool_call) ev.set_tool_call_json(dump(tool_call_json(*piece.tool_call, piece.call_index)));
        else if (piece.reasoning) ev.set_reasoning(std::move(piece.text));
        else ev.set_text(std::move(piece.text));
        if (!piece.logprobs.is_null()) ev.set_piece_logprobs_json(dump(piece.logprobs));
        ev.set_choice(piece.choice);
      }
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
    const CompletionResult& result = *o.completion;  // a job without an error has one
    const std::vector<ChoiceResult>& choices = result.choices;
    ev.mutable_final()->set_finish_reason(choices[0].finish_reason);
    *ev.mutable_final()->mutable_usage() = usage_to_pb(result.usage);
    if (!choices[0].logprobs.is_null()) ev.mutable_final()->set_logprobs_json(dump(choices[0].logprobs));
    if (choices.size() > 1)
      for (const ChoiceResult& c : choices) {
        pb::FinalChoice* fc = ev.mutable_final()->add_choices();
        fc->set_finish_reason(c.finish_reason);
        if (!c.logprobs.is_null()) fc->set_logprobs_json(dump(c.logprobs));
      }
    w->Write(ev);
    end(200, usage_json(result.usage), "");
    return grpc::Status::OK;
  }

  const Admission& admission;
  const rpc::CredentialsPtr creds;
};

Result<std::unique_ptr<CombineServer>> CombineServer::start(const std::string& host, int port,
                                                            size_t max_body_bytes, const Admission& admission,
                                                            rpc::CredentialsPtr creds) {
  if (port < 0 || port > 65535) return invalid_argument("gRPC port must be in [0, 65535]");
  std::unique_ptr<CombineServer> cs(new CombineServer);
  cs->service_ = std::make_unique<Service>(admission, creds);
  grpc::ServerBuilder b;
  b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // a taken port is an error, not shared
  b.SetMaxReceiveMessageSize(int(std::min<size_t>(max_body_bytes + (size_t(1) << 20), size_t(1) << 30)));
  b.AddListeningPort(host_port(host, port), creds->server(), &cs->port_);
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
