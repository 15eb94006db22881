// `hypic quantize` on a model: checkpoint/quantize.h's writer, told which tensors are
// matrices by this model's loader.
#pragma once

#include <set>
#include <string>

#include "checkpoint/quantize.h"
#include "core/dtype.h"
#include "core/status.h"

namespace hypic {

// The names of the checkpoint tensors `dir`'s model loads as matrices, loading it in type t
// (so a matrix t cannot hold is an error here, naming it).
Result<std::set<std::string>> loaded_matrix_names(const std::string& dir, DType t, bool progress);

// quantize_checkpoint(dir, out, o) on the tensors loaded_matrix_names(dir, o.dtype) names.
Status quantize_model(const std::string& dir, const std::string& out, const QuantizeOptions& o);

}  // namespace hypic
