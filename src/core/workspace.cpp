#include "core/workspace.h"

#include <cstdlib>

namespace hypic {

Workspace& Workspace::local() {
  thread_local Workspace ws;
  return ws;
}

Tensor Workspace::get(int slot, DType t, const Shape& shape) {
  HYPIC_CHECK(slot >= 0);
  if (size_t(slot) >= bufs_.size()) bufs_.resize(size_t(slot) + 1);
  Buf& b = bufs_[size_t(slot)];
  const size_t need = std::max<size_t>(64, (size_t(shape_numel(shape)) * dtype_size(t) + 63) / 64 * 64);
  if (need > b.cap) {
    void* p = std::aligned_alloc(64, need);
    HYPIC_CHECK(p != nullptr, "out of memory allocating " + std::to_string(need) + " bytes");
    b.mem = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
    b.cap = need;
  }
  return Tensor::view(t, shape, b.mem.get(), b.mem);
}

size_t Workspace::bytes() const {
  size_t n = 0;
  for (const auto& b : bufs_) n += b.cap;
  return n;
}

void Workspace::release() { bufs_.clear(); }

}  // namespace hypic
