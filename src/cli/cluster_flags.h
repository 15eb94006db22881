// The cluster's security flags, shared by `hypic serve`, `hypic worker` and `hypic router`.
#pragma once

#include "cli/args.h"
#include "rpc/credentials.h"

namespace hypic::cli {

// --cluster-token, --tls-cert, --tls-key, --tls-ca.
void add_cluster_flags(Args& a);
// The credentials they name ($HYPIC_CLUSTER_TOKEN when --cluster-token is not given); the PEM
// files are read here, so a bad path fails at start.
Result<rpc::CredentialsPtr> read_cluster_flags(const Args& a);

}  // namespace hypic::cli
