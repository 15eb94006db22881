// `hypic quantize`: a model directory rewritten with its matrices stored quantized, so that
// the conversion runs once (the stored format: checkpoint/stored_quant.h).
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "checkpoint/safetensors.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"

namespace hypic {

struct QuantizeOptions {
  DType dtype = DType::kQ4;             // kQ8 (int8) or kQ4
  uint64_t shard_bytes = uint64_t(2) << 30;  // output shard size (one tensor may exceed it)
  bool progress = true;                 // log each shard
};

// The checkpoint names of the tensors to quantize, asked for once the arguments are checked:
// those `dir`'s model loads as matrices (model/quantize_model.h: loaded_matrix_names).
using MatrixNames = std::function<Result<std::set<std::string>>()>;

// Writes `out` (which must not exist): the tensors `matrices` names quantized to o.dtype,
// every other tensor and file copied as is, config.json with a "quantization_config" naming
// hypic's format. Built in `out`.partial and renamed at the end: a failure leaves no `out`.
// Loading `out` with the same dtype gives the same matrices, byte for byte, as quantizing
// `dir` at load.
Status quantize_checkpoint(const std::string& dir, const std::string& out, const QuantizeOptions& o,
                           const MatrixNames& matrices);

// The stored form of a packed tensor q (kQ8 / kQ4): its codes, stored under the matrix's
// name, and its scales, stored under name + ".scale" (checkpoint/stored_quant.h).
std::pair<RawTensor, RawTensor> stored_quant_parts(const Tensor& q);

// config.json's "quantization_config" for matrices stored in type t (kQ8 / kQ4).
nlohmann::json stored_quant_config(DType t);

}  // namespace hypic
