// Reads a checkpoint's tensors by name with shape checks, in the types the engine keeps
// (model-internal; used by the architectures' loaders, model/arch/).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "model/checkpoint.h"

namespace hypic {

class WeightReader {
 public:
  WeightReader(const Checkpoint& ck, DType compute) : ck_(ck), compute_(compute) {}

  // As stored (a view of the mapping).
  Result<Tensor> raw(const std::string& name, const Shape& shape) const {
    return ck_.get(name, shape);
  }
  // Matrix in the compute type (zero-copy when the checkpoint already stores it that way).
  Result<Tensor> mat(const std::string& name, const Shape& shape) const {
    HYPIC_ASSIGN_OR_RETURN(Tensor t, ck_.get(name, shape));
    return t.dtype() == compute_ ? t : t.to(compute_);
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

// Rows of `parts` stacked into one [Σrows, cols] matrix of type t.
Tensor concat_rows(const std::vector<Tensor>& parts, DType t);

}  // namespace hypic
