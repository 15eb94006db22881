// Reusable activation buffers. A forward pass asks for named slots sized for the current
// batch; storage grows to the largest request and is kept, so steady-state forwards neither
// allocate nor page-fault. Contents are NOT zeroed: callers write before they read.
// One Workspace per thread (Workspace::local()); buffers of distinct slots never alias.
#pragma once

#include <memory>
#include <vector>

#include "core/tensor.h"

namespace hypic {

class Workspace {
 public:
  static Workspace& local();
  // A tensor of `shape` over slot `slot`'s storage (valid until the slot is requested again).
  Tensor get(int slot, DType t, const Shape& shape);
  Tensor f32(int slot, const Shape& shape) { return get(slot, DType::kF32, shape); }
  size_t bytes() const;
  void release();  // frees everything (e.g. after an unusually long prompt)

 private:
  struct Buf {
    std::shared_ptr<void> mem;
    size_t cap = 0;
  };
  std::vector<Buf> bufs_;
};

}  // namespace hypic
