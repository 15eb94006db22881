#include "cli/cluster_flags.h"

#include <cstdlib>

namespace hypic::cli {

void add_cluster_flags(Args& a) {
  a.opt("cluster-token", "T", "shared secret every gRPC call between cluster members carries and every member requires "
                              "(also $HYPIC_CLUSTER_TOKEN); without it the gRPC ports take any caller")
      .opt("tls-cert", "FILE", "mutual TLS on the cluster's gRPC: this member's certificate (PEM)")
      .opt("tls-key", "FILE", "mutual TLS: this member's private key (PEM)")
      .opt("tls-ca", "FILE", "mutual TLS: the CA that signed every member's certificate (PEM)");
}

Result<rpc::CredentialsPtr> read_cluster_flags(const Args& a) {
  rpc::Security s;
  s.token = a.str("cluster-token");
  if (s.token.empty())
    if (const char* t = std::getenv("HYPIC_CLUSTER_TOKEN")) s.token = t;
  s.tls_cert = a.str("tls-cert");
  s.tls_key = a.str("tls-key");
  s.tls_ca = a.str("tls-ca");
  return rpc::Credentials::load(s);
}

}  // namespace hypic::cli
