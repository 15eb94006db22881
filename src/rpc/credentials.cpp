#include "rpc/credentials.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include <fstream>
#include <sstream>

#include "core/log.h"

namespace hypic::rpc {
namespace {

constexpr const char* kHeader = "authorization";
constexpr const char* kScheme = "Bearer ";

Result<std::string> read_pem(const std::string& path, const char* flag) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return io_error(std::string("cannot read ") + flag + " '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  if (s.find("-----BEGIN ") == std::string::npos)
    return invalid_argument(std::string(flag) + " '" + path + "' is not a PEM file");
  return s;
}

// Constant time in the longer of the two: how far a guess matches does not show.
bool same(std::string_view a, std::string_view b) {
  unsigned char d = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i)
    d |= (unsigned char)((i < a.size() ? a[i] : 0) ^ (i < b.size() ? b[i] : 0));
  return d == 0;
}

}  // namespace

Result<std::shared_ptr<const Credentials>> Credentials::load(const Security& s) {
  auto c = std::make_shared<Credentials>();
  c->token_ = s.token;
  const int n = int(!s.tls_cert.empty()) + int(!s.tls_key.empty()) + int(!s.tls_ca.empty());
  if (n != 0 && n != 3)
    return invalid_argument("--tls-cert, --tls-key and --tls-ca go together (mutual TLS: this process's "
                            "certificate and key, and the CA that signed every member's)");
  if (n == 3) {
    auto cert = read_pem(s.tls_cert, "--tls-cert");
    if (!cert) return cert.status();
    auto key = read_pem(s.tls_key, "--tls-key");
    if (!key) return key.status();
    auto ca = read_pem(s.tls_ca, "--tls-ca");
    if (!ca) return ca.status();
    c->cert_ = std::move(cert).value();
    c->key_ = std::move(key).value();
    c->ca_ = std::move(ca).value();
  }
  return std::shared_ptr<const Credentials>(std::move(c));
}

std::shared_ptr<const Credentials> Credentials::insecure() {
  static const auto none = std::make_shared<const Credentials>();
  return none;
}

std::shared_ptr<grpc::ServerCredentials> Credentials::server() const {
  if (!tls()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions o(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  o.pem_root_certs = ca_;
  o.pem_key_cert_pairs.push_back({key_, cert_});
  return grpc::SslServerCredentials(o);
}

std::shared_ptr<grpc::ChannelCredentials> Credentials::channel() const {
  if (!tls()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = ca_;
  o.pem_private_key = key_;
  o.pem_cert_chain = cert_;
  return grpc::SslCredentials(o);
}

void Credentials::authorize(grpc::ClientContext* ctx) const {
  if (has_token()) ctx->AddMetadata(kHeader, kScheme + token_);
}

grpc::Status Credentials::check(const grpc::ServerContext* ctx, const char* method) const {
  if (!has_token()) return grpc::Status::OK;
  const auto& md = ctx->client_metadata();
  const auto it = md.find(kHeader);
  const std::string_view got = it == md.end() ? std::string_view() : std::string_view(it->second.data(), it->second.size());
  if (same(got, kScheme + token_)) return grpc::Status::OK;
  HYPIC_LOG_WARN("cluster: refused %s from %s: %s", method, ctx->peer().c_str(),
                 it == md.end() ? "no cluster token" : "a wrong cluster token");
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "this cluster requires its token (--cluster-token or $HYPIC_CLUSTER_TOKEN on every member)");
}

}  // namespace hypic::rpc
