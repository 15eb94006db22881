#include "cluster/heartbeat.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>

#include "core/log.h"
#include "hypic_cluster.grpc.pb.h"

namespace hypic::cluster {

namespace {

pb::Member member(Heartbeat::Role role, const std::string& self) {
  pb::Member m;
  m.set_role(role == Heartbeat::Role::kInstance ? pb::Member::INSTANCE : pb::Member::WORKER);
  m.set_address(self);
  return m;
}

}  // namespace

Heartbeat::Heartbeat(std::string router, Role role, std::string self, rpc::CredentialsPtr creds)
    : router_(std::move(router)), self_(std::move(self)), role_(role), creds_(std::move(creds)) {
  thread_ = std::thread([this] { loop(); });
}

Heartbeat::~Heartbeat() { stop(); }

bool Heartbeat::joined() const {
  std::lock_guard<std::mutex> l(mu_);
  return joined_;
}

void Heartbeat::loop() {
  auto channel = grpc::CreateChannel(router_, creds_->channel());
  auto stub = pb::Router::NewStub(channel);
  bool reported = false;  // an outage has been logged
  std::unique_lock<std::mutex> l(mu_);
  while (!stopping_) {
    l.unlock();
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    creds_->authorize(&ctx);
    pb::JoinReply reply;
    const grpc::Status st = stub->Join(&ctx, member(role_, self_), &reply);
    uint32_t period_ms = 1000;  // retry period while the router is unreachable
    if (st.ok()) {
      if (reported) HYPIC_LOG_INFO("heartbeat: joined router %s again", router_.c_str());
      reported = false;
      period_ms = std::clamp<uint32_t>(reply.heartbeat_ms(), 100, 60000);
    } else if (!reported) {
      HYPIC_LOG_WARN("heartbeat: router %s: %s (retrying every second)", router_.c_str(), st.error_message().c_str());
      reported = true;
    }
    l.lock();
    if (st.ok()) joined_ = true;
    cv_.wait_for(l, std::chrono::milliseconds(period_ms), [this] { return stopping_; });
  }
}

void Heartbeat::stop(int timeout_ms) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  auto stub = pb::Router::NewStub(grpc::CreateChannel(router_, creds_->channel()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
  creds_->authorize(&ctx);
  pb::JoinReply reply;
  stub->Leave(&ctx, member(role_, self_), &reply);  // best effort: the router's TTL covers a miss
}

}  // namespace hypic::cluster
