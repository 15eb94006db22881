// A server on an ephemeral loopback port for a test, stopped and joined when it goes out of
// scope; client() talks to it with httplib.
#pragma once

#include <gtest/gtest.h>

#include <httplib.h>

#include <memory>
#include <thread>

#include "server/http_server.h"

namespace hypic::server::test {

class Running {
 public:
  Running(const Model& m, const Tokenizer& t, ServerOptions o) {
    o.port = 0;
    o.log_requests = false;
    auto s = HttpServer::create(m, t, std::move(o));
    if (!s) ADD_FAILURE() << s.status().to_string();
    srv_ = std::move(s).value();
    Status b = srv_->bind();
    if (!b) ADD_FAILURE() << b.to_string();
    th_ = std::thread([this] { srv_->run(); });
  }
  ~Running() {
    srv_->stop();
    th_.join();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", srv_->port());
    c.set_read_timeout(60, 0);
    return c;
  }

 private:
  std::unique_ptr<HttpServer> srv_;
  std::thread th_;
};

}  // namespace hypic::server::test
