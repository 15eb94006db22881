// A dense, row-major tensor: dtype + shape + a pointer into storage that is either owned
// (64-byte aligned heap buffer) or borrowed (e.g. a memory-mapped checkpoint kept alive by
// `owner`). Copies of a Tensor share storage; use clone() to copy the data.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace hypic {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);
int64_t shape_numel(const Shape& s);

// While one is alive on a thread, Tensor::zeros there puts tensors of 1 MiB and more on
// transparent huge pages (where the kernel allows them; rounded up to whole 2 MiB pages): for
// a model's weights (Model::load), which every decode step streams whole. Scopes nest.
class HugePageScope {
 public:
  HugePageScope();
  ~HugePageScope();
  HugePageScope(const HugePageScope&) = delete;
  HugePageScope& operator=(const HugePageScope&) = delete;
};

class Tensor {
 public:
  Tensor() = default;
  // Allocates zero-initialised storage.
  static Tensor zeros(DType t, Shape shape);
  static Tensor zeros_f32(Shape shape) { return zeros(DType::kF32, std::move(shape)); }
  // Wraps external memory; `owner` keeps it alive (may be null for caller-managed memory).
  static Tensor view(DType t, Shape shape, void* data, std::shared_ptr<void> owner);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_[i < 0 ? shape_.size() + i : i]; }
  int ndim() const { return int(shape_.size()); }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const;  // packed types (core/quant.h): rows × dtype_row_bytes(last dim)
  bool empty() const { return data_ == nullptr; }

  void* raw() const { return data_; }
  float* f32() const;           // checks dtype == F32
  uint16_t* u16() const;        // checks dtype is BF16 or F16

  // Same storage, new shape (numel must match).
  Tensor reshape(Shape s) const;
  // Deep copy, optionally converting the element type (to or from a packed type row by row;
  // quantizing checks check_quantizable).
  Tensor clone() const { return empty() ? Tensor() : to(dtype_); }
  Tensor to(DType t) const;
  // Rows [r0, r1) of the leading dimension, sharing storage.
  Tensor rows(int64_t r0, int64_t r1) const;

 private:
  DType dtype_ = DType::kF32;
  Shape shape_;
  void* data_ = nullptr;
  std::shared_ptr<void> owner_;
};

// A tensor under a name (a layer's state, a segment entry's data).
struct NamedTensor {
  std::string name;
  Tensor t;
};

}  // namespace hypic
