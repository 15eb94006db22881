// The authenticated cluster on an in-process SegmentWorker: a call without the cluster
// token or with another one is UNAUTHENTICATED (GetStatus and the Prefill stream alike); a
// Scatter with the token builds remotely, one with a wrong token falls back to its local
// lane; with mutual TLS a plaintext caller, and a caller whose certificate another CA
// signed, are refused while a member of the cluster's CA is served. Certificates are made
// at run time by tests/common/make_certs.sh (openssl).
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

#include "cluster/scatter.h"
#include "cluster/worker.h"
#include "cluster_util.h"
#include "core/log.h"
#include "hypic_cluster.grpc.pb.h"

namespace hypic::cluster {
namespace {

namespace fs = std::filesystem;

class AuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string tmpl = (fs::path(::testing::TempDir()) / "hypic_certs_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    const std::string cmd = "sh '" + std::string(HYPIC_SOURCE_DIR) + "/tests/common/make_certs.sh' '" + dir_ + "'";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << "openssl could not make the test certificates: " << cmd;
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  void SetUp() override { set_log_level(LogLevel::kError); }  // refusals are logged as warnings
  void TearDown() override { set_log_level(LogLevel::kInfo); }

  static rpc::CredentialsPtr creds(const std::string& token, const std::string& member = "",
                                   const std::string& ca = "ca") {
    rpc::Security s;
    s.token = token;
    if (!member.empty()) {
      s.tls_cert = dir_ + "/" + member + ".pem";
      s.tls_key = dir_ + "/" + member + ".key";
      s.tls_ca = dir_ + "/" + ca + ".pem";
    }
    auto c = rpc::Credentials::load(s);
    EXPECT_TRUE(c.is_ok()) << c.status().to_string();
    return std::move(c).value();
  }
  static std::unique_ptr<WorkerServer> worker(rpc::CredentialsPtr c) {
    WorkerOptions o;
    o.creds = std::move(c);
    auto w = WorkerServer::start(test::dist_model(), o);
    EXPECT_TRUE(w.is_ok()) << w.status().to_string();
    return std::move(w).value();
  }
  // GetStatus over a channel made with `channel`, with `token` in the metadata (none if empty).
  static grpc::Status get_status(const WorkerServer& w, const rpc::CredentialsPtr& channel, const std::string& token) {
    auto stub = pb::SegmentWorker::NewStub(grpc::CreateChannel(w.address(), channel->channel()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
    pb::WorkerStatus resp;
    return stub->GetStatus(&ctx, pb::StatusRequest(), &resp);
  }
  static std::string dir_;
};

std::string AuthTest::dir_;

TEST_F(AuthTest, TheTokenIsRequiredOnEveryCall) {
  auto w = worker(creds("s3cret"));
  const auto plain = rpc::Credentials::insecure();
  EXPECT_EQ(get_status(*w, plain, "").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(get_status(*w, plain, "wrong").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(get_status(*w, plain, "s3cre").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(get_status(*w, plain, "s3cret!").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(get_status(*w, plain, "s3cret").ok());

  // The Prefill stream too: refused before any work.
  auto stub = pb::SegmentWorker::NewStub(grpc::CreateChannel(w->address(), plain->channel()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  pb::PrefillRequest req;
  req.set_model_fingerprint(test::dist_model().fingerprint());
  req.set_dtype("F32");
  auto reader = stub->Prefill(&ctx, req);
  pb::EntryChunk ch;
  EXPECT_FALSE(reader->Read(&ch));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(AuthTest, AScatterWithTheTokenBuildsRemotelyAndOneWithoutFallsBackLocally) {
  auto w = worker(creds("s3cret"));
  const PromptParts p = test::dist_parts({40, 56, 72});
  const ComposeOptions o = test::dist_opts();
  const auto want = test::reference_logits(p, o);
  for (const char* token : {"s3cret", "wrong"}) {
    SCOPED_TRACE(token);
    ScatterOptions so;
    so.workers = {w->address()};
    so.local_lanes = 1;
    so.creds = creds(token);
    auto store = test::dist_store();
    Scatter s(test::dist_model(), store, so);
    ScatterStats st;
    auto pins = s.prefill_segments(test::keyed(p, o), o, nullptr, &st);
    ASSERT_TRUE(pins.is_ok()) << pins.status().to_string();
    if (std::string(token) == "s3cret") {
      EXPECT_GE(st.built_remote, 1);  // the plan shares the segments with the local lane
      EXPECT_EQ(st.built_remote + st.built_local, 3);
      EXPECT_EQ(st.worker_failures, 0);
    } else {  // the probe was refused: the worker gets no work
      EXPECT_EQ(st.built_remote, 0);
      EXPECT_EQ(st.built_local, 3);
    }
    EXPECT_EQ(test::compose_logits(store, p, o, nullptr), want);
  }
}

TEST_F(AuthTest, MutualTlsRefusesPlaintextAndStrangers) {
  auto w = worker(creds("s3cret", "member"));
  EXPECT_FALSE(get_status(*w, rpc::Credentials::insecure(), "s3cret").ok());
  EXPECT_FALSE(get_status(*w, creds("", "rogue", "rogue-ca"), "s3cret").ok());  // another CA's member
  EXPECT_FALSE(get_status(*w, creds("", "rogue", "ca"), "s3cret").ok());  // its certificate is not the CA's
  EXPECT_EQ(get_status(*w, creds("", "member"), "").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(get_status(*w, creds("", "member"), "s3cret").ok());
}

TEST_F(AuthTest, CredentialFlagsAreCheckedAtStart) {
  rpc::Security s;
  s.tls_cert = dir_ + "/member.pem";
  EXPECT_FALSE(rpc::Credentials::load(s).is_ok());  // the three go together
  s.tls_key = dir_ + "/member.key";
  s.tls_ca = dir_ + "/no-such.pem";
  auto r = rpc::Credentials::load(s);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("--tls-ca"), std::string::npos) << r.status().to_string();
  s.tls_ca = dir_ + "/ca.srl";  // exists, not PEM
  EXPECT_FALSE(rpc::Credentials::load(s).is_ok());
}

}  // namespace
}  // namespace hypic::cluster
