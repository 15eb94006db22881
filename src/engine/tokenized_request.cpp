#include "engine/tokenized_request.h"

namespace hypic {

int64_t PromptParts::total_tokens() const {
  int64_t n = int64_t(prefix.size() + suffix.size());
  for (const auto& s : segments) n += int64_t(s.size());
  return n;
}

std::vector<int32_t> PromptParts::concatenated() const {
  std::vector<int32_t> all = prefix;
  for (const auto& s : segments) all.insert(all.end(), s.begin(), s.end());
  all.insert(all.end(), suffix.begin(), suffix.end());
  return all;
}

int64_t TokenizedRequest::total_tokens() const {
  int64_t n = int64_t(prefix.size() + suffix.size());
  for (const auto& s : segments) n += int64_t(s.tokens.size());
  return n;
}

SegmentRef segment_ref(const Model& model, std::vector<int32_t> tokens, int seam,
                       const std::string& salt) {
  SegmentRef r;
  r.tokens = std::move(tokens);
  if (seam >= 0 && int64_t(r.tokens.size()) >= model.min_segment_tokens(seam))
    r.key = segment_key(model.fingerprint(), model.compute_type(), seam, salt, r.tokens);
  return r;
}

TokenizedRequest make_request(const Model& model, PromptParts parts, int seam, std::string salt) {
  TokenizedRequest r;
  r.prefix = std::move(parts.prefix);
  r.prefix_breaks = std::move(parts.prefix_breaks);
  r.suffix = std::move(parts.suffix);
  r.suffix_breaks = std::move(parts.suffix_breaks);
  r.segments.reserve(parts.segments.size());
  for (auto& s : parts.segments) r.segments.push_back(segment_ref(model, std::move(s), seam, salt));
  r.seam = seam;
  r.salt = std::move(salt);
  return r;
}

}  // namespace hypic
