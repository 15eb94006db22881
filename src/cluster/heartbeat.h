// A cluster member's side of membership (proto Router.Join / Leave): `hypic serve
// --join` and `hypic worker --join` keep calling Join on the router every heartbeat period
// (the router's reply sets it), so a router that restarts learns its members again within a
// period; stop() sends Leave so the router stops routing here before the member shuts down.
// A router that cannot be reached is retried every period (one log line per outage).
//
// Threading: one background thread; start/stop from the owner's thread.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "rpc/credentials.h"

namespace hypic::cluster {

class Heartbeat {
 public:
  enum class Role { kInstance, kWorker };
  // Starts joining `router` ("host:port" of its gRPC server) as `self` ("host:port" the router
  // can reach this member's gRPC server at).
  Heartbeat(std::string router, Role role, std::string self,
            rpc::CredentialsPtr creds = rpc::Credentials::insecure());
  ~Heartbeat();  // stop()
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;
  // Sends Leave (waiting at most `timeout_ms`) and ends the thread. Idempotent.
  void stop(int timeout_ms = 1000);
  // True once a Join has succeeded (tests, logs).
  bool joined() const;

 private:
  void loop();
  const std::string router_, self_;
  const Role role_;
  const rpc::CredentialsPtr creds_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false, joined_ = false;
  std::thread thread_;
};

}  // namespace hypic::cluster
