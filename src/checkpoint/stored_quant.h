// Matrices a checkpoint stores quantized, read back as the engine's types (checkpoint-internal;
// Checkpoint::get calls it for tensors of a non-float dtype):
//
//   hypic's own (written by `hypic quantize`, quantize_checkpoint below), logical shape S
//   [..., K] of a matrix X:
//     int8: X  I8  S                  codes q ∈ [−127, 127]
//           X.scale  F32  S[:-1]      one scale per row (output channel)   w = scale·q
//     q4:   X  U8  S[:-1] + [K/2]     the nibbles of core/quant.h's kQ4 rows, group-packed
//           X.scale  F16  S[:-1] + [K/32]   one scale per group of 32
//   read as DType::kQ8 / kQ4 tensors (the same bytes the load-time quantizer makes, so a saved
//   model loads bit-identical to quantizing at load).
//
//   FP8 (the block-scaled e4m3 format Qwen and DeepSeek publish): X F8_E4M3 [N, K] with
//   X_scale_inv F32 [⌈N/128⌉, ⌈K/128⌉], w = e4m3(x)·scale_inv[n/128][k/128]; read as an
//   owned BF16 tensor (the loader then converts it to the requested type).
#pragma once

#include <set>
#include <string>

#include "checkpoint/safetensors.h"
#include "core/status.h"
#include "core/tensor.h"

namespace hypic {

class Checkpoint;

// `name` (entry `e`, a non-float dtype) as an engine tensor, shape checked against
// `expected` when given. Errors name the tensor and what is missing or mis-shaped.
Result<Tensor> read_stored_quantized(const Checkpoint& ck, const std::string& name,
                                     const SafetensorsEntry& e, const Shape* expected);

// Whether a tensor of this safetensors dtype may be a stored-quantized matrix (I8, U8, F8_E4M3).
bool stored_quant_dtype(const std::string& dtype);

// Whether `name` is the companion of a stored-quantized matrix (X.scale, X_scale_inv).
bool is_quant_companion(const Checkpoint& ck, const std::string& name);

// e4m3 (no infinities; 0x7f / 0xff NaN) to float.
float fp8_e4m3_to_f32(uint8_t v);

}  // namespace hypic
