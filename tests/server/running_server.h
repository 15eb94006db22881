// A server on an ephemeral loopback port for a test, stopped and joined when it goes out of
// scope; client() talks to it with httplib. ServerSuite: the model it serves in a suite.
#pragma once

#include <gtest/gtest.h>

#include <httplib.h>

#include <memory>
#include <string>
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

// A suite's model and tokenizer (tests/models/qwen3_5_dense, f32), loaded once, and the
// options of a server of it named "tiny".
class ServerSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = std::string(HYPIC_SOURCE_DIR) + "/tests/models/qwen3_5_dense";
    auto m = Model::load(dir, {DType::kF32, false});
    ASSERT_TRUE(m.is_ok()) << m.status().to_string();
    model_ = std::move(m).value().release();
    auto t = Tokenizer::load(dir + "/tokenizer.json");
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    tok_ = new Tokenizer(std::move(t).value());
  }
  static void TearDownTestSuite() {
    delete model_;
    delete tok_;
    model_ = nullptr;
    tok_ = nullptr;
  }
  static ServerOptions opts() {
    ServerOptions o;
    o.model_name = "tiny";
    o.cache_mem_bytes = 64 << 20;
    return o;
  }
  static inline Model* model_ = nullptr;
  static inline Tokenizer* tok_ = nullptr;
};

}  // namespace hypic::server::test
