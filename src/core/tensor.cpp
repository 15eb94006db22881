#include "core/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <malloc.h>
#include <sys/mman.h>
#include <vector>

#include "core/parallel.h"
#include "core/quant.h"

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

namespace {

size_t bytes_of(DType t, const Shape& s) {
  if (!dtype_packed(t)) return size_t(shape_numel(s)) * dtype_size(t);
  HYPIC_CHECK(!s.empty() && s.back() > 0, std::string(dtype_name(t)) + " tensor needs a last dim");
  return size_t(shape_numel(s) / s.back()) * dtype_row_bytes(t, s.back());
}

}  // namespace

size_t Tensor::nbytes() const { return empty() ? 0 : bytes_of(dtype_, shape_); }

namespace {
constexpr size_t kHugeBytes = size_t(1) << 20;
thread_local int g_huge_scopes = 0;

// The size of a transparent huge page: 2 MiB on x86-64 and on aarch64 kernels with 4 KiB
// pages, 32 MiB with 16 KiB pages; 0 (not used) where it is larger (512 MiB with 64 KiB pages,
// whose base pages already cover what a huge page would) or unknown.
size_t huge_page_bytes() {
  static const size_t bytes = [] {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size");
    size_t b = 0;
    if (!(f >> b)) b = size_t(2) << 20;
    return b <= (size_t(32) << 20) ? b : 0;
  }();
  return bytes;
}
}  // namespace

HugePageScope::HugePageScope() { ++g_huge_scopes; }
HugePageScope::~HugePageScope() { --g_huge_scopes; }

// Weights on huge pages: a decode step streams all of them, and 4 KiB pages cost a page walk
// every 4 KiB of that stream (hypic bench decode, h1024 8 layers in q4, alternate runs:
// 4 KiB pages 80.5 / 91.0 tok/s, huge pages from 4 MiB on 89.0 / 94.9, from 1 MiB on
// 96.4 / 101.9). Only inside a HugePageScope: other tensors of 1 MiB (a segment's recurrent
// states) would pay up to twice their size for the rounding.
Tensor Tensor::zeros(DType t, Shape shape) {
  // glibc raises its mmap threshold to the size of each large block freed (up to 32 MiB), after
  // which blocks of that size come from the heap and freed holes stay resident: loading a
  // model through temporaries (quantizing, stacking q / k / v) then kept ~60 % more than the
  // weights (Ring-mini in q4: 13.9 GiB instead of 8.5). A fixed threshold keeps every block
  // of 128 KiB or more in its own mapping, returned to the system when freed.
  static const bool fixed_threshold = (mallopt(M_MMAP_THRESHOLD, 128 << 10), true);
  (void)fixed_threshold;
  Tensor r;
  r.dtype_ = t;
  r.shape_ = std::move(shape);
  size_t bytes = (bytes_of(t, r.shape_) + 63) / 64 * 64;
  if (bytes == 0) bytes = 64;
  const size_t page = huge_page_bytes();
  const bool huge = g_huge_scopes > 0 && bytes >= kHugeBytes && page > 0;
  if (huge) bytes = (bytes + page - 1) / page * page;
  void* p = std::aligned_alloc(huge ? page : 64, bytes);
  HYPIC_CHECK(p != nullptr, "out of memory allocating " + std::to_string(bytes) + " bytes");
  if (huge) madvise(p, bytes, MADV_HUGEPAGE);
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

namespace {

// Rows of the matrix (the last two dims) a packed tensor of shape s is made of.
int64_t matrix_rows(const Shape& s) { return s.size() >= 2 ? s[s.size() - 2] : 1; }

// kQ4 rows ↔ kQ4T, matrix by matrix (each [n, cols]); `tile` picks the direction.
void q4_regroup(const Tensor& from, const Tensor& to, bool tile) {
  const int64_t cols = from.dim(-1), n = matrix_rows(from.shape());
  const int64_t mats = from.numel() / (n * cols);
  const size_t rb = dtype_row_bytes(DType::kQ4, cols);
  constexpr int64_t kRows = 64 * kQ4TRows;  // rows per task: whole groups
  const int64_t per_mat = (n + kRows - 1) / kRows;
  parallel_for(mats * per_mat, [&](int64_t task) {
    const int64_t r0 = task % per_mat * kRows, r1 = std::min(n, r0 + kRows);
    const size_t off = size_t(task / per_mat * n + r0) * rb;
    const auto* src = static_cast<const uint8_t*>(from.raw()) + off;
    auto* dst = static_cast<uint8_t*>(to.raw()) + off;
    if (tile) q4_tile(src, r1 - r0, cols, dst);
    else q4_untile(src, r1 - r0, cols, dst);
  });
}

}  // namespace

Tensor Tensor::reshape(Shape s) const {
  HYPIC_CHECK(shape_numel(s) == numel(), shape_str(shape_) + " -> " + shape_str(s));
  // kQ4T groups rows per matrix: the matrices' rows may change only between multiples of 16.
  if (dtype_ == DType::kQ4T) {
    const int64_t a = matrix_rows(shape_), b = matrix_rows(s);
    HYPIC_CHECK(s.back() == shape_.back() && (a == b || (a % kQ4TRows == 0 && b % kQ4TRows == 0)),
                "a Q4T tensor's row groups do not survive " + shape_str(shape_) + " -> " + shape_str(s));
  }
  Tensor r = *this;
  r.shape_ = std::move(s);
  return r;
}

Tensor Tensor::to(DType t) const {
  if (t == DType::kQ4T && dtype_ != t) {
    const Tensor q = dtype_ == DType::kQ4 ? *this : to(DType::kQ4);
    Tensor r = zeros(t, shape_);
    q4_regroup(q, r, true);
    return r;
  }
  if (dtype_ == DType::kQ4T && t != dtype_) {
    Tensor q = zeros(DType::kQ4, shape_);
    q4_regroup(*this, q, false);
    return t == DType::kQ4 ? q : q.to(t);
  }
  Tensor r = zeros(t, shape_);
  if (t != dtype_ && (dtype_packed(t) || dtype_packed(dtype_))) {
    // Row by row through one fp32 row: no fp32 copy of the whole matrix.
    const int64_t cols = shape_.back(), n = numel() / cols;
    if (dtype_packed(t)) {
      const Status q = check_quantizable(t, cols);
      HYPIC_CHECK(q.is_ok(), q.message());
    }
    const size_t in_row = dtype_row_bytes(dtype_, cols), out_row = dtype_row_bytes(t, cols);
    constexpr int64_t kRows = 256;  // rows per task
    parallel_for((n + kRows - 1) / kRows, [&](int64_t task) {
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t i = task * kRows; i < std::min(n, (task + 1) * kRows); ++i) {
        const char* src = static_cast<const char*>(data_) + size_t(i) * in_row;
        char* dst = static_cast<char*>(r.data_) + size_t(i) * out_row;
        if (dtype_packed(dtype_)) dequantize_row(dtype_, src, cols, row.data());
        else to_f32(dtype_, src, row.data(), size_t(cols));
        if (dtype_packed(t)) quantize_row(t, row.data(), cols, dst);
        else from_f32(t, row.data(), dst, size_t(cols));
      }
    });
  } else if (t == dtype_) {
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
  // A Q4T matrix is sliced by whole groups of 16 rows (the last group may be short).
  if (dtype_ == DType::kQ4T && ndim() == 2)
    HYPIC_CHECK(r0 % kQ4TRows == 0 && (r1 % kQ4TRows == 0 || r1 == shape_[0]),
                "Q4T rows " + std::to_string(r0) + ".." + std::to_string(r1) + " split a group of 16");
  Tensor r = *this;
  r.shape_[0] = r1 - r0;
  const size_t row_bytes = shape_[0] ? nbytes() / size_t(shape_[0]) : 0;
  r.data_ = static_cast<char*>(data_) + size_t(r0) * row_bytes;
  return r;
}

}  // namespace hypic
