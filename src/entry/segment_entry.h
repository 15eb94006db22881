// A cached segment (SPEC §3–§4): what a standalone prefill of a segment's tokens (zero
// state, canonical positions 0 … L−1) leaves for reuse at any position of any prompt. The
// first `seam` tokens (the seam window) are excluded: they are recomputed in context.
//
// One Layer per decoder layer, filled by that layer's token mixer (model/mixer.h) in its own
// vocabulary of named tensors; nothing outside the mixer interprets them. For example
//   Gated DeltaNet   T (the body's transition, kernels/transition.h), s0 [nv, dk, dv] (the
//                    body's zero-start end state), conv_tail [K−1, conv_dim], and with a
//                    conv warm-up (seam < K−1) warm_mixed / warm_g / warm_beta
//   gated attention  k, v [Lb, nkv, hd]: normed, NOT rotated (RoPE at the true positions on
//                    reuse), Lb = L − seam
// The serialised form, its structure checks and its checksum walk over these lists alone,
// so a new mixer needs no change here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "kernels/transition.h"

namespace hypic {

struct SegmentEntry {
  struct Layer {
    std::string mixer;  // TokenMixerType::id() of the layer that fills it
    std::optional<kernels::Transition> T;  // linear-attention mixers: the body's transition
    std::vector<NamedTensor> tensors;      // the mixer's; names unique, no tensor empty
    const Tensor* find(std::string_view name) const;  // null when absent
    void put(std::string name, Tensor t);              // adds, or replaces one of that name
    size_t bytes() const;
  };

  std::string key;              // hex digest (see segment_key())
  int64_t length = 0;           // L, tokens in the segment
  int seam = 0;                 // w; the body is tokens [seam, L)
  std::vector<int32_t> tokens;  // the segment's L token ids
  std::vector<Layer> layers;    // one per decoder layer

  int64_t body_tokens() const { return length - seam; }
  // Bytes of tensor data held (what the store budgets); exact, excluding small metadata.
  size_t bytes() const;
};

// Strong hash (SHA-256, hex) of (model fingerprint, compute dtype, seam width, tenant salt,
// token ids): the segment's identity in every cache tier.
std::string segment_key(const std::string& model_fingerprint, DType dtype, int seam,
                        const std::string& salt, const std::vector<int32_t>& tokens);

// Serialisation (the disk tier): one safetensors file with the entry's tensors and its
// metadata (key, length, seam, tokens, each layer's mixer, tensor names and transition form,
// a checksum over everything interpreted).
// load_entry verifies structure and checksum: a truncated or corrupted file is an error
// (kCorrupt), never a partially valid entry.
Status save_entry(const std::string& path, const SegmentEntry& e);
Result<SegmentEntry> load_entry(const std::string& path);

// The same bytes in memory (the wire form between instances, src/cluster/): serialize_entry
// returns exactly what save_entry writes to its file (errors only for an entry of
// inconsistent shapes); deserialize_entry verifies like load_entry (structure, checksum,
// no stray bytes) and copies the tensors out, so `bytes` may be dropped afterwards.
// Damage of any kind is kCorrupt. Neither checks the key against the tokens: a receiver
// that knows the expected key recomputes it (segment_key) and compares.
Result<std::string> serialize_entry(const SegmentEntry& e);
Result<SegmentEntry> deserialize_entry(std::string_view bytes);

}  // namespace hypic
