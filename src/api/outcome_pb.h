// A response's pieces as protobuf messages (proto/hypic_cluster.proto) and back: Usage <->
// pb::Usage, ApiError <-> pb::ApiError. The Combine service (server/) sends them; the router
// rebuilds the same HTTP response from them.
#pragma once

#include "api/request.h"
#include "api/result.h"
#include "hypic_cluster.pb.h"

namespace hypic::api {

cluster::pb::Usage usage_to_pb(const Usage& u);
Usage usage_from_pb(const cluster::pb::Usage& u);
cluster::pb::ApiError error_to_pb(const ApiError& e);
ApiError error_from_pb(const cluster::pb::ApiError& e);

}  // namespace hypic::api
