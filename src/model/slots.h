// Workspace slots of the forward pass (model-internal). Each names one activation buffer;
// buffers live in the calling thread's Workspace and are reused across layers and calls.
#pragma once

namespace hypic::slot {

enum : int {
  kHidden, kNormed, kResidual,  // residual stream, normed input, a mixer's scaled output
  kGdnMixed, kGdnConv, kGdnZ, kGdnBa, kGdnQ, kGdnK, kGdnV, kGdnG, kGdnBeta, kGdnOut,
  kAttnProj, kAttnQ, kAttnGate, kAttnK, kAttnV, kAttnOut,
  kMlpGateUp, kMlpAct,
  kMoeProbs, kMoeOut, kMoeX, kMoeY, kMoeExpertOut, kMoeShared, kMoeGate,
  kLaProj, kLaGate, kLaQ, kLaK, kLaV, kLaOut,
  kKdaProj, kKdaMixed, kKdaConv, kKdaF, kKdaGate, kKdaLowRank, kKdaQ, kKdaK, kKdaV, kKdaG,
  kKdaBeta, kKdaOut,
  kMlaProj, kMlaQ, kMlaLatent, kMlaCkv, kMlaOut, kMlaQa, kMlaOutLat, kMlaKv, kMlaK, kMlaV,
};

}  // namespace hypic::slot
