// A request's prompt as the engine runs it: parts tokenised on their own (PromptParts), and
// the same parts with each segment's cache key computed once (TokenizedRequest), so the
// composition, segment parallelism and the store all use that one key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model.h"

namespace hypic {

// Token ids of each part, each tokenised on its own.
struct PromptParts {
  std::vector<int32_t> prefix;
  // Offsets in `prefix` (increasing, each in (0, prefix.size())) where a chat message ends:
  // prefix mode checkpoints the state there, so a conversation that grows by turns restores
  // its earlier messages (empty: the prefix is one part).
  std::vector<size_t> prefix_breaks;
  std::vector<std::vector<int32_t>> segments;
  std::vector<int32_t> suffix;
  // Offsets in `suffix` where a message ends (the last: where the generation prompt starts):
  // checkpointed too, so the next turn restores everything before the reply it appends.
  std::vector<size_t> suffix_breaks;
  int64_t total_tokens() const;
  std::vector<int32_t> concatenated() const;
};

// A segment and its key: segment_key(model fingerprint, compute dtype, seam, salt, tokens)
// when it is long enough to have a body under the seam (Model::min_segment_tokens), else
// empty (such a segment is recomputed wherever it is used, never cached).
struct SegmentRef {
  std::string key;
  std::vector<int32_t> tokens;
};

// The parts with their segments keyed under `seam` and `salt` (the ComposeOptions it runs
// with must name the same two: Composer::prefill checks).
struct TokenizedRequest {
  std::vector<int32_t> prefix;
  std::vector<size_t> prefix_breaks;  // as PromptParts'
  std::vector<SegmentRef> segments;
  std::vector<int32_t> suffix;
  std::vector<size_t> suffix_breaks;  // as PromptParts'
  int seam = 0;
  std::string salt;
  int64_t total_tokens() const;
};

// One SHA-256 per segment that has a body; a negative seam keys nothing (it is refused
// where the request runs).
SegmentRef segment_ref(const Model& model, std::vector<int32_t> tokens, int seam,
                       const std::string& salt);
TokenizedRequest make_request(const Model& model, PromptParts parts, int seam, std::string salt);

}  // namespace hypic
