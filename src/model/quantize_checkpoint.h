// `hypic quantize`: a model directory rewritten with its matrices stored quantized, so that
// the conversion runs once (the stored format: model/stored_quant.h).
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/status.h"

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

}  // namespace hypic
