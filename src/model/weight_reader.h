// Reads a checkpoint's tensors by name with shape checks, in the types the engine keeps
// (model-internal; used by the architectures' loaders, model/arch/).
#pragma once

#include <string>
#include <vector>

#include "core/quant.h"
#include "core/status.h"
#include "core/tensor.h"
#include "model/checkpoint.h"

namespace hypic {

// Rows of `parts` stacked into one [Σrows, cols] matrix of type t.
Tensor concat_rows(const std::vector<Tensor>& parts, DType t);

class WeightReader {
 public:
  WeightReader(const Checkpoint& ck, DType compute) : ck_(ck), compute_(compute) {}

  // As stored (a view of the mapping).
  Result<Tensor> raw(const std::string& name, const Shape& shape) const {
    return ck_.get(name, shape);
  }
  // Matrix in the compute type (zero-copy when the checkpoint already stores it that way;
  // quantized at load for the packed types, whose row format must fit: core/quant.h).
  Result<Tensor> mat(const std::string& name, const Shape& shape) const {
    HYPIC_ASSIGN_OR_RETURN(Tensor t, ck_.get(name, shape));
    return convert(t, name);
  }
  // `t` in the compute type; `what` names it in errors.
  Result<Tensor> convert(const Tensor& t, const std::string& what) const {
    if (t.dtype() == compute_) return t;
    if (Status s = check_quantizable(compute_, t.dim(-1)); !s.is_ok())
      return s.with_context(what);
    return t.to(compute_);
  }
  // Rows of `parts` stacked into one matrix of the compute type (concat_rows, checked).
  Result<Tensor> stack(const std::vector<Tensor>& parts, const std::string& what) const {
    if (Status s = check_quantizable(compute_, parts.at(0).dim(-1)); !s.is_ok())
      return s.with_context(what);
    return concat_rows(parts, compute_);
  }
  // Vector (or router, gate) in F32, owned.
  Result<Tensor> vec(const std::string& name, const Shape& shape) const {
    HYPIC_ASSIGN_OR_RETURN(Tensor t, ck_.get(name, shape));
    return t.dtype() == DType::kF32 ? t.clone() : t.to(DType::kF32);
  }
  bool has(const std::string& name) const { return ck_.has(name); }
  DType compute() const { return compute_; }

 private:
  const Checkpoint& ck_;
  DType compute_;
};

}  // namespace hypic
