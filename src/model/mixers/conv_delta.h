// The recurrence half of a delta-rule token mixer whose q|k|v pass a short causal conv
// (model-internal; Gated DeltaNet, KDA): the conv over each computed piece from the layer's
// conv state, the delta rule from its recurrent state, cached bodies composed (conv warm-up
// when seam < K−1, then S ← T·S + S_body, conv state ← the entry's tail), the batched decode
// step, and the capture of what a segment body leaves. The mixer computes its projections
// before and its gated output after.
//
// Layer state (LayerState::fixed): "conv" [K−1, conv_dim] (the last K−1 pre-conv inputs) and
// "ssm" [nv, dk, dv]. Entry layer: T (dense, over the body after the warm-up tokens), s0
// [nv, dk, dv], conv_tail [K−1, conv_dim], and when seam < K−1 the warm-up of P = K−1−seam
// tokens: warm_mixed [P, conv_dim], warm_g [P, g_width], warm_beta [P, nv].
#pragma once

#include <functional>
#include <vector>

#include "core/status.h"
#include "kernels/linear_attn.h"
#include "model/mixer.h"

namespace hypic {

struct ConvDeltaShape {
  int nk = 0, nv = 0, dk = 0, dv = 0, K = 0;
  int64_t g_width = 0;  // log-decay values per row: nv (per head) or nv·dk (per channel)
  int64_t conv_dim() const { return 2 * int64_t(nk) * dk + int64_t(nv) * dv; }
};

// The pass's rows, [R, …] each (buffers the mixer owns).
struct ConvDeltaRows {
  const float* mixed = nullptr;  // [R, conv_dim] pre-conv q|k|v
  float* conv = nullptr;         // [R, conv_dim] post-conv (SiLU), written here
  float *q = nullptr, *k = nullptr, *v = nullptr;  // [R, nk·dk], [R, nk·dk], [R, nv·dv]
  float *g = nullptr, *beta = nullptr;             // [R, g_width], [R, nv]
  float* out = nullptr;          // [R, nv·dv] the rule's outputs, written here
};

// prep(r0, n) fills q, k, v, g, beta of rows [r0, r0 + n) from the post-conv rows: q and k
// L2-normalised (q also scaled), as the kernel expects them (kernels/linear_attn.h).
using ConvDeltaPrep = std::function<void(int64_t r0, int64_t n)>;

// Runs the pass's pieces over its R rows (pass.layer is the layer): see the file comment.
Status conv_delta_forward(const ConvDeltaShape& s, const float* conv_w,
                          const kernels::LinearAttention& la, const ConvDeltaRows& rows,
                          int64_t R, const ConvDeltaPrep& prep, Model::Pass& pass);

// The layer's fresh state, and the entry tensors check_entry wants for a seam.
LayerState conv_delta_state(const ConvDeltaShape& s);
std::vector<EntryTensor> conv_delta_entry_tensors(const ConvDeltaShape& s, int seam);
// check_entry: the tensors above and a transition of the kernel's form for (nv, dk).
Status conv_delta_check_entry(const ConvDeltaShape& s, const kernels::LinearAttention& la,
                              const TokenMixerType& type, const SegmentEntry& e,
                              const SegmentEntry::Layer& l);

}  // namespace hypic
