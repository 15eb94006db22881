// Register-blocked fp32 GEMM for the small per-head products of the linear-attention and
// attention kernels (called from inside parallel regions; single-threaded per call).
// Implementation: gated_delta.cpp (gdn_detail::small_gemm), shared here by name.
#pragma once

#include "kernels/gated_delta.h"

namespace hypic::kernels {

using gdn_detail::small_gemm;
using gdn_detail::Tri;

}  // namespace hypic::kernels
