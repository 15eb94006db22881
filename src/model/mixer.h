// The two halves of a decoder layer, behind one interface each (model-internal).
//
// A layer is h += token_mixer(norm(h)); h += channel_mixer(norm(h)). A token mixer mixes
// along the sequence and keeps per-sequence memory: a linear-attention mixer a fixed-size
// recurrent state (one LinearState slot of SeqState, one SegmentEntry::Linear slot of an
// entry), an attention mixer a growing KV cache (one KvCache slot, one SegmentEntry::Attn
// slot). A channel mixer works on each token alone (dense SwiGLU, MoE).
//
// Each mixer object owns its layer's weights (loaded by the architecture, model/arch.h) and
// knows its slot index among the layers of its state family. Adding a token mixer: one file
// in model/mixers/ with its TokenMixerType (config.h) and its TokenMixer, and an
// architecture that loads it (model/arch.h).
#pragma once

#include <cstdint>
#include <memory>

#include "core/status.h"
#include "model/model.h"

namespace hypic {

class TokenMixer {
 public:
  virtual ~TokenMixer() = default;
  virtual const TokenMixerType& type() const = 0;

  // Appends this layer's fresh state to `s` (layers add theirs in layer order).
  virtual void add_state(SeqState& s, int64_t kv_capacity) const = 0;
  // h [R, H] += the mixer's output for x [R, H] over the pieces of `pass` (pass.layer is this
  // layer): computed pieces extend their sequence's state; cached pieces compose the entry's
  // body; pass.batch runs one row per sequence; pass.capture records what the body leaves.
  // Errors only from an arriving entry's gate.
  virtual Status forward(const float* x, int64_t R, float* h, Model::Pass& pass) const = 0;
  // Floating-point operations of forward() over L new tokens after `past` tokens.
  virtual double flops(int64_t L, int64_t past) const = 0;
  // Tokens of history a body token needs besides the seam (the conv window − 1): an entry's
  // body must be longer than this (Model::min_segment_tokens).
  virtual int64_t history_tokens() const = 0;

  // Segment entries, this layer's slot: add an empty one, copy it into a one-layer part, and
  // move a received part's slot in after checking it has this model's shapes (errors leave
  // `e` unchanged).
  virtual void add_entry_slot(SegmentEntry& e) const = 0;
  virtual void copy_entry_slot(const SegmentEntry& e, SegmentEntry* part) const = 0;
  virtual Status take_entry_slot(SegmentEntry&& part, SegmentEntry* e) const = 0;
};

class ChannelMixer {
 public:
  virtual ~ChannelMixer() = default;
  virtual ChannelMixerKind kind() const = 0;
  // h [L, H] += mixer(x [L, H]).
  virtual void forward(const float* x, int64_t L, float* h) const = 0;
  virtual double flops(int64_t L) const = 0;
};

}  // namespace hypic
