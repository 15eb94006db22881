// ggml's tensor types as hypic's (core/ggml_quant.h decodes the blocks).
#include <cstring>

#include "checkpoint/gguf.h"
#include "core/dtype.h"
#include "core/ggml_quant.h"

namespace hypic {

std::optional<DType> ggml_dtype(uint32_t type) {
  switch (GgmlType(type)) {
    case GgmlType::kF32: return DType::kF32;
    case GgmlType::kF16: return DType::kF16;
    case GgmlType::kBF16: return DType::kBF16;
    case GgmlType::kQ8_0: return DType::kGQ8_0;
    case GgmlType::kQ4_0: return DType::kGQ4_0;
    case GgmlType::kQ4_K: return DType::kGQ4K;
    case GgmlType::kQ5_K: return DType::kGQ5K;
    case GgmlType::kQ6_K: return DType::kGQ6K;
    case GgmlType::kQ5_0: return DType::kGQ5_0;
    case GgmlType::kQ5_1: return DType::kGQ5_1;
    default: return std::nullopt;
  }
}

Status ggml_dequantize(uint32_t type, const uint8_t* src, float* dst, int64_t n) {
  const GgmlTypeInfo* ti = ggml_type_info(type);
  if (!ti || !ti->supported)
    return unsupported(std::string("ggml type ") + (ti ? ti->name : std::to_string(type).c_str()) +
                         " is not read by hypic (it reads F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)");
  if (n % ti->block_elems != 0)
    return invalid_argument(std::to_string(n) + " elements are not a whole number of " + ti->name + " blocks");
  const std::optional<DType> t = ggml_dtype(type);
  if (dtype_ggml(*t)) {
    ggml_dequantize_blocks(*t, src, dst, n / ti->block_elems);
  } else if (*t == DType::kF32) {
    std::memcpy(dst, src, size_t(n) * 4);
  } else {
    to_f32(*t, src, dst, size_t(n));
  }
  return Status::ok();
}

}  // namespace hypic
