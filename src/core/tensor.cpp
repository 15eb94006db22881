#include "core/tensor.h"

#include <cstdlib>
#include <cstring>

namespace hypic {

std::string shape_str(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Tensor Tensor::zeros(DType t, Shape shape) {
  Tensor r;
  r.dtype_ = t;
  r.shape_ = std::move(shape);
  size_t bytes = (size_t(shape_numel(r.shape_)) * dtype_size(t) + 63) / 64 * 64;
  if (bytes == 0) bytes = 64;
  void* p = std::aligned_alloc(64, bytes);
  HYPIC_CHECK(p != nullptr, "out of memory allocating " + std::to_string(bytes) + " bytes");
  std::memset(p, 0, bytes);
  r.data_ = p;
  r.owner_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  return r;
}

Tensor Tensor::view(DType t, Shape shape, void* data, std::shared_ptr<void> owner) {
  Tensor r;
  r.dtype_ = t;
  r.shape_ = std::move(shape);
  r.data_ = data;
  r.owner_ = std::move(owner);
  return r;
}

float* Tensor::f32() const {
  HYPIC_CHECK(dtype_ == DType::kF32, std::string("tensor is ") + dtype_name(dtype_));
  return static_cast<float*>(data_);
}

uint16_t* Tensor::u16() const {
  HYPIC_CHECK(dtype_ != DType::kF32, "tensor is F32");
  return static_cast<uint16_t*>(data_);
}

Tensor Tensor::reshape(Shape s) const {
  HYPIC_CHECK(shape_numel(s) == numel(), shape_str(shape_) + " -> " + shape_str(s));
  Tensor r = *this;
  r.shape_ = std::move(s);
  return r;
}

Tensor Tensor::to(DType t) const {
  Tensor r = zeros(t, shape_);
  if (t == dtype_) {
    std::memcpy(r.data_, data_, nbytes());
  } else if (dtype_ == DType::kF32) {
    from_f32(t, f32(), r.data_, numel());
  } else if (t == DType::kF32) {
    to_f32(dtype_, data_, r.f32(), numel());
  } else {
    Tensor tmp = to(DType::kF32);
    from_f32(t, tmp.f32(), r.data_, numel());
  }
  return r;
}

Tensor Tensor::rows(int64_t r0, int64_t r1) const {
  HYPIC_CHECK(ndim() >= 1 && 0 <= r0 && r0 <= r1 && r1 <= shape_[0]);
  Tensor r = *this;
  r.shape_[0] = r1 - r0;
  const size_t row_bytes = shape_[0] ? nbytes() / size_t(shape_[0]) : 0;
  r.data_ = static_cast<char*>(data_) + size_t(r0) * row_bytes;
  return r;
}

}  // namespace hypic
