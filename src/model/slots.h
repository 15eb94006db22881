// Workspace slots of the forward pass (model-internal). Each names one activation buffer;
// buffers live in the calling thread's Workspace and are reused across layers and calls.
#pragma once

namespace hypic::slot {

enum : int {
  kHidden, kNormed,                                        // residual stream, normed input
  kGdnMixed, kGdnConv, kGdnZ, kGdnBa, kGdnQ, kGdnK, kGdnV, kGdnG, kGdnBeta, kGdnOut,
  kAttnProj, kAttnQ, kAttnGate, kAttnK, kAttnV, kAttnOut,
  kMlpGateUp, kMlpAct,
  kMoeProbs, kMoeOut, kMoeX, kMoeY, kMoeExpertOut, kMoeShared, kMoeGate,
};

}  // namespace hypic::slot
