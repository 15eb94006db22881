// The router's membership: the Router gRPC service (Join / Leave) and the prober (GetLoad /
// GetStatus of every member each interval).
#include "router/router_impl.h"

namespace hypic::router {
namespace {

Role role_of(pb::Member::Role r) { return r == pb::Member::WORKER ? Role::kWorker : Role::kInstance; }

}  // namespace

using detail::after_ms;

struct Router::Impl::Service final : pb::Router::Service {
  explicit Service(Impl* i) : impl(i) {}
  grpc::Status Join(grpc::ServerContext* ctx, const pb::Member* m, pb::JoinReply* out) override {
    if (auto st = impl->opt.creds->check(ctx, "Router.Join"); !st.ok()) return st;
    if (m->address().empty() || m->address().size() > 256 || m->address().find(':') == std::string::npos)
      return {grpc::StatusCode::INVALID_ARGUMENT, "member address must be host:port"};
    const bool fresh = [&] {
      for (const auto& [r, a] : impl->cluster.members())
        if (r == role_of(m->role()) && a == m->address()) return false;
      return true;
    }();
    impl->cluster.join(role_of(m->role()), m->address(), Cluster::Clock::now());
    if (fresh) {
      impl->log_line(json{{"event", "member.join"}, {"role", role_name(role_of(m->role()))}, {"address", m->address()}});
      impl->cv_.notify_all();  // probe it now rather than at the next interval
    }
    out->set_heartbeat_ms(uint32_t(impl->opt.heartbeat_ms));
    return grpc::Status::OK;
  }
  grpc::Status Leave(grpc::ServerContext* ctx, const pb::Member* m, pb::JoinReply* out) override {
    if (auto st = impl->opt.creds->check(ctx, "Router.Leave"); !st.ok()) return st;
    if (impl->cluster.leave(role_of(m->role()), m->address()))
      impl->log_line(json{{"event", "member.leave"}, {"role", role_name(role_of(m->role()))}, {"address", m->address()}});
    out->set_heartbeat_ms(uint32_t(impl->opt.heartbeat_ms));
    return grpc::Status::OK;
  }
  Impl* impl;
};

std::unique_ptr<grpc::Service> Router::Impl::make_service(Impl* impl) {
  return std::make_unique<Service>(impl);
}

std::shared_ptr<pb::Combine::Stub> Router::Impl::combine_stub(const std::string& a) {
  std::lock_guard<std::mutex> l(mu_);
  auto& s = combine_stubs[a];
  if (!s) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(64 << 20);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
    s = pb::Combine::NewStub(grpc::CreateCustomChannel(a, opt.creds->channel(), args));
  }
  return s;
}

std::shared_ptr<pb::SegmentWorker::Stub> Router::Impl::worker_stub(const std::string& a) {
  std::lock_guard<std::mutex> l(mu_);
  auto& s = worker_stubs[a];
  if (!s) s = pb::SegmentWorker::NewStub(grpc::CreateChannel(a, opt.creds->channel()));
  return s;
}

void Router::Impl::probe_all() {
  const auto now = Cluster::Clock::now();
  cluster.expire(now);
  for (const auto& [role, addr] : cluster.members()) {
    ProbeResult r;
    grpc::ClientContext ctx;
    ctx.set_deadline(after_ms(opt.probe_timeout_ms));
    opt.creds->authorize(&ctx);
    if (role == Role::kInstance) {
      pb::InstanceLoad l;
      r.ok = combine_stub(addr)->GetLoad(&ctx, pb::LoadRequest(), &l).ok();
      r.model_name = l.model_name();
      r.fingerprint = l.model_fingerprint();
      r.dtype = l.dtype();
      r.running = l.running();
      r.queued = l.queued();
      r.capacity = l.max_batch() + l.max_queue();
    } else {
      pb::WorkerStatus s;
      r.ok = worker_stub(addr)->GetStatus(&ctx, pb::StatusRequest(), &s).ok();
      r.fingerprint = s.model_fingerprint();
      r.dtype = s.dtype();
    }
    cluster.report(role, addr, r, Cluster::Clock::now());
  }
}

void Router::Impl::probe_loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stopping) {
    l.unlock();
    probe_all();
    l.lock();
    cv_.wait_for(l, std::chrono::milliseconds(opt.probe_interval_ms));
  }
}

}  // namespace hypic::router
