// `hypic quantize`: a model directory rewritten with its matrices stored quantized, so that
// the conversion runs once (the stored format: model/stored_quant.h).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"
#include "model/safetensors.h"

namespace hypic {

struct QuantizeOptions {
  DType dtype = DType::kQ4;             // kQ8 (int8) or kQ4
  uint64_t shard_bytes = uint64_t(2) << 30;  // output shard size (one tensor may exceed it)
  bool progress = true;                 // log each shard
};

// Writes `out` (which must not exist): the tensors `dir`'s model loads as matrices (the
// loader says which: LoadOptions::matrix_names) quantized to o.dtype, every other tensor and
// file copied as is, config.json with a "quantization_config" naming hypic's format. Built in
// `out`.partial and renamed at the end: a failure leaves no `out`. Loading `out` with the same
// dtype gives the same matrices, byte for byte, as quantizing `dir` at load.
Status quantize_checkpoint(const std::string& dir, const std::string& out, const QuantizeOptions& o);

// The names of the checkpoint tensors `dir`'s model loads as matrices, loading it in type t
// (so a matrix t cannot hold is an error here, naming it).
Result<std::set<std::string>> loaded_matrix_names(const std::string& dir, DType t, bool progress);

// The stored form of a packed tensor q (kQ8 / kQ4): its codes, stored under the matrix's
// name, and its scales, stored under name + ".scale" (model/stored_quant.h).
std::pair<RawTensor, RawTensor> stored_quant_parts(const Tensor& q);

// config.json's "quantization_config" for matrices stored in type t (kQ8 / kQ4).
nlohmann::json stored_quant_config(DType t);

}  // namespace hypic
