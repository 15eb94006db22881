// Limits shared by both ends of the SegmentWorker RPC (proto/hypic_cluster.proto).
#pragma once

#include <cstddef>

namespace hypic::cluster {

// gRPC message size limits (send and receive, set explicitly on both ends).
constexpr size_t kMinMessageBytes = size_t(128) << 10;
constexpr size_t kMaxMessageBytes = size_t(1) << 30;
// Room left in a message for the EntryChunk fields around its data.
constexpr size_t kChunkOverhead = size_t(64) << 10;

// Payload bytes per EntryChunk for a message limit.
inline size_t chunk_bytes(size_t max_message_bytes) { return max_message_bytes - kChunkOverhead; }

}  // namespace hypic::cluster
