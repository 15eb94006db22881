// A response's pieces as protobuf messages (proto/hypic_cluster.proto) and back: the usage
// JSON (as server/usage.h builds it) <-> pb::Usage, ApiError <-> pb::ApiError. The Combine
// service (server/) sends them; the router rebuilds the same HTTP response from them.
#pragma once

#include <nlohmann/json.hpp>

#include "api/request.h"
#include "hypic_cluster.pb.h"

namespace hypic::server {

cluster::pb::Usage usage_to_pb(const nlohmann::json& usage);
nlohmann::json usage_from_pb(const cluster::pb::Usage& u);
cluster::pb::ApiError error_to_pb(const ApiError& e);
ApiError error_from_pb(const cluster::pb::ApiError& e);

}  // namespace hypic::server
