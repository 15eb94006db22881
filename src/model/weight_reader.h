// Reads a checkpoint's tensors by name with shape checks, in the types the engine keeps
// (model-internal; used by the architectures' loaders, model/arch/).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "core/quant.h"
#include "core/status.h"
#include "core/tensor.h"

namespace hypic {

// Rows of `parts` stacked into one [Σrows, cols] matrix of type t.
Tensor concat_rows(const std::vector<Tensor>& parts, DType t);

class WeightReader {
 public:
  // `matrices` (optional): collects the checkpoint names of every tensor that ends up in a
  // matrix (mat, or raw parts passed to stack / convert): what `hypic quantize` quantizes.
  WeightReader(const Checkpoint& ck, DType compute, std::set<std::string>* matrices = nullptr)
      : ck_(ck), compute_(compute), matrices_(matrices) {}

  // As stored (a view of the mapping).
  Result<Tensor> raw(const std::string& name, const Shape& shape) const {
    HYPIC_ASSIGN_OR_RETURN(Tensor t, ck_.get(name, shape));
    if (matrices_) seen_.push_back({static_cast<const char*>(t.raw()), t.nbytes(), name});
    return t;
  }
  // Matrix in the compute type's matrix_dtype (zero-copy when the checkpoint already stores
  // it that way; quantized at load for the packed types, whose row format must fit:
  // core/quant.h).
  Result<Tensor> mat(const std::string& name, const Shape& shape) const {
    HYPIC_ASSIGN_OR_RETURN(Tensor t, raw(name, shape));
    return convert(t, name);
  }
  // `t` in the compute type; `what` names it in errors.
  // ggml's blocks (a GGUF file's) stay as stored unless the compute type is F32.
  Result<Tensor> convert(const Tensor& t, const std::string& what) const {
    note_matrix(t);
    if (t.dtype() == matrix_dtype(compute_) || keeps(t.dtype())) return t;
    if (Status s = check_quantizable(compute_, t.dim(-1)); !s.is_ok())
      return s.with_context(what);
    Tensor c = t.to(matrix_dtype(compute_));
    ck_.release_pages(t.raw(), t.nbytes());  // the source, when a view of the mapping
    return c;
  }
  // Rows of `parts` stacked into one matrix of the compute type (concat_rows, checked).
  // Parts of one ggml type kept as stored are stacked as they are; mixed ones are converted.
  Result<Tensor> stack(const std::vector<Tensor>& parts, const std::string& what) const {
    const DType first = parts.at(0).dtype();
    bool same = keeps(first);
    for (const Tensor& p : parts) same = same && p.dtype() == first;
    const DType to = same ? first : matrix_dtype(compute_);
    if (Status s = check_quantizable(to, parts.at(0).dim(-1)); !s.is_ok())
      return s.with_context(what);
    for (const Tensor& p : parts) note_matrix(p);
    Tensor c = concat_rows(parts, to);
    for (const Tensor& p : parts) ck_.release_pages(p.raw(), p.nbytes());
    return c;
  }
  // Vector (or router, gate) in F32, owned.
  Result<Tensor> vec(const std::string& name, const Shape& shape) const {
    HYPIC_ASSIGN_OR_RETURN(Tensor t, ck_.get(name, shape));
    return t.dtype() == DType::kF32 ? t.clone() : t.to(DType::kF32);
  }
  bool has(const std::string& name) const { return ck_.has(name); }
  bool keeps(DType t) const { return dtype_ggml(t) && compute_ != DType::kF32; }
  DType compute() const { return compute_; }

 private:
  struct Seen {
    const char* data;
    size_t bytes;
    std::string name;
  };
  // Records the checkpoint tensor `t` is (a slice of), when collecting.
  void note_matrix(const Tensor& t) const {
    if (!matrices_) return;
    const char* p = static_cast<const char*>(t.raw());
    for (const Seen& s : seen_)
      if (p >= s.data && p < s.data + s.bytes) matrices_->insert(s.name);
  }

  const Checkpoint& ck_;
  DType compute_;
  std::set<std::string>* matrices_;
  mutable std::vector<Seen> seen_;
};

}  // namespace hypic
