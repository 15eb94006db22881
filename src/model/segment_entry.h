// A cached segment (SPEC §3–§4): what a standalone prefill of a segment's tokens (zero
// state, canonical positions 0 … L−1) leaves for reuse at any position of any prompt. The
// first `seam` tokens (the seam window) are excluded: they are recomputed in context.
//
// Per linear layer (in layer order):
//   T      transition of the composed body, structural form (kernels/transition.h)
//   s0     [nv, dk, dv] fp32, the body's zero-start end state S(body | 0)
//   conv_tail  [K−1, conv_dim] fp32, the segment's last K−1 pre-conv inputs (the next
//          part's conv history)
//   warm_*  conv warm-up (only when seam < K−1): the first P = K−1−seam body tokens see the
//          tokens before the segment through the conv, so they are recomputed on reuse and
//          T, s0 cover only the tokens after them. warm_mixed [P, conv_dim] pre-conv inputs,
//          warm_g [P, nv] log decays, warm_beta [P, nv].
// Per full-attention layer: k [Lb, nkv, hd] (normed, NOT rotated: RoPE is applied at the
// true positions on reuse) and v [Lb, nkv, hd], Lb = L − seam.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "kernels/transition.h"

namespace hypic {

struct SegmentEntry {
  struct Linear {
    kernels::Transition T;
    Tensor s0, conv_tail;
    Tensor warm_mixed, warm_g, warm_beta;  // empty unless seam < K−1
  };
  struct Attn {
    Tensor k, v;
  };

  std::string key;              // hex digest (see segment_key())
  int64_t length = 0;           // L, tokens in the segment
  int seam = 0;                 // w; the body is tokens [seam, L)
  std::vector<int32_t> tokens;  // the segment's L token ids
  std::vector<Linear> linear;
  std::vector<Attn> attn;

  int64_t body_tokens() const { return length - seam; }
  // Bytes of tensor data held (what the store budgets); exact, excluding small metadata.
  size_t bytes() const;
};

// Strong hash (SHA-256, hex) of (model fingerprint, compute dtype, seam width, tenant salt,
// token ids): the segment's identity in every cache tier.
std::string segment_key(const std::string& model_fingerprint, DType dtype, int seam,
                        const std::string& salt, const std::vector<int32_t>& tokens);

// Serialisation (the disk tier): one safetensors file with the entry's tensors and its
// metadata (key, length, seam, tokens, transition forms, a checksum over all tensor bytes).
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
