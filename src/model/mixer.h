// The two halves of a decoder layer, behind one interface each (model-internal).
//
// A layer is h += token_mixer(norm(h)); h += channel_mixer(norm(h)). A token mixer mixes
// along the sequence and keeps per-sequence memory in its layer's LayerState (model/state.h:
// fixed-size tensors such as a recurrent state, per-position rows such as K/V) and what a
// segment's body leaves in its layer's SegmentEntry::Layer (named tensors, optionally a
// transition). Both are indexed by the decoder layer (Model::Pass::layer); their tensors'
// names and meaning are the mixer's alone. A channel mixer works on each token alone (dense
// SwiGLU, MoE).
//
// Each mixer object owns its layer's weights (loaded by the architecture, model/arch.h).
// Adding a token mixer: one file in model/mixers/ with its TokenMixerType (config.h) and its
// TokenMixer, and an architecture that loads it (model/arch.h).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "model/model.h"

namespace hypic {

class TokenMixer {
 public:
  virtual ~TokenMixer() = default;
  virtual const TokenMixerType& type() const = 0;

  // This layer's fresh state: zeros, `capacity` rows in each per-position tensor.
  virtual LayerState new_state(int64_t capacity) const = 0;
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

  // Whether `l`, this layer's part of entry `e` (its seam and body length), is what forward()
  // would capture for this model: the mixer id, the tensors and the shapes it reads when
  // composing. Entries from files or the wire pass here before any use; the error says
  // what differs.
  virtual Status check_entry(const SegmentEntry& e, const SegmentEntry::Layer& l) const = 0;
};

// For check_entry: `l` was made by a mixer of type `t` and holds exactly these F32 tensors
// with these shapes (in any order); the error names the first difference.
struct EntryTensor {
  const char* name;
  Shape shape;
};
Status check_entry_tensors(const SegmentEntry::Layer& l, const TokenMixerType& t,
                           const std::vector<EntryTensor>& want);

class ChannelMixer {
 public:
  virtual ~ChannelMixer() = default;
  virtual ChannelMixerKind kind() const = 0;
  // h [L, H] += mixer(x [L, H]).
  virtual void forward(const float* x, int64_t L, float* h) const = 0;
  virtual double flops(int64_t L) const = 0;
};

}  // namespace hypic
