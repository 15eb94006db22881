#include "checkpoint/stored_quant.h"

#include <cmath>
#include <cstring>

#include "checkpoint/checkpoint.h"
#include "core/parallel.h"
#include "core/quant.h"

namespace hypic {
namespace {

Shape with_last(Shape s, int64_t last) {
  s.back() = last;
  return s;
}

Shape drop_last(Shape s) {
  s.pop_back();
  return s;
}

Status mis_shaped(const std::string& what, const Shape& got, const Shape& want) {
  return invalid_argument("tensor '" + what + "' has shape " + shape_str(got) + ", expected " +
                          shape_str(want) + "; the quantized checkpoint is damaged: quantize "
                          "the original again (hypic quantize)");
}

// hypic's int8 / q4 pair → a packed tensor of logical shape S.
Result<Tensor> read_hypic(const Checkpoint& ck, const std::string& name, const SafetensorsEntry& e,
                          const Shape* expected) {
  const std::string sname = name + ".scale";
  const SafetensorsEntry* s = ck.entry(sname);
  if (s == nullptr)
    return not_found("tensor '" + name + "' is stored as " + e.dtype + " codes but its scales '" +
                     sname + "' are missing; the quantized checkpoint is incomplete: quantize "
                     "the original again (hypic quantize)");
  if (e.shape.empty()) return mis_shaped(name, e.shape, expected ? *expected : Shape{1});
  const bool q8 = e.dtype == "I8";
  if (s->dtype != (q8 ? "F32" : "F16"))
    return invalid_argument("scales '" + sname + "' are " + s->dtype + ", an " + e.dtype +
                            " matrix needs " + (q8 ? "F32" : "F16") + " scales");
  const int64_t K = q8 ? e.shape.back() : 2 * e.shape.back();
  const Shape logical = with_last(e.shape, K);
  if (expected && *expected != logical)
    return invalid_argument("tensor '" + name + "' holds a quantized matrix of shape " +
                            shape_str(logical) + ", config implies " + shape_str(*expected) +
                            "; config.json does not describe these weights");
  const Shape want_s = q8 ? drop_last(logical) : with_last(logical, K / kQ4Group);
  if (!q8 && K % kQ4Group != 0) return mis_shaped(name, e.shape, with_last(e.shape, K / 2 + 16));
  if (s->shape != want_s) return mis_shaped(sname, s->shape, want_s);
  HYPIC_ASSIGN_OR_RETURN(RawTensor codes, ck.get_raw(name));
  HYPIC_ASSIGN_OR_RETURN(RawTensor scales, ck.get_raw(sname));
  const DType t = q8 ? DType::kQ8 : DType::kQ4;
  Tensor out = Tensor::zeros(t, logical);
  const int64_t rows = shape_numel(logical) / K;
  const size_t rb = dtype_row_bytes(t, K), cb = size_t(q8 ? K : K / 2), sb = rb - cb;
  auto* dst = static_cast<uint8_t*>(out.raw());
  parallel_for((rows + 255) / 256, [&](int64_t task) {
    for (int64_t r = task * 256; r < std::min(rows, (task + 1) * 256); ++r) {
      uint8_t* row = dst + size_t(r) * rb;
      const uint8_t* c = codes.bytes.data() + size_t(r) * cb;
      if (q8) {
        for (size_t k = 0; k < cb; ++k) row[k] = uint8_t(int(int8_t(c[k])) + 128);
      } else {
        std::memcpy(row, c, cb);
      }
      std::memcpy(row + cb, scales.bytes.data() + size_t(r) * sb, sb);
    }
  });
  ck.release_pages(codes.bytes.data(), codes.bytes.size());
  ck.release_pages(scales.bytes.data(), scales.bytes.size());
  return out;
}

Result<Tensor> read_fp8(const Checkpoint& ck, const std::string& name, const SafetensorsEntry& e,
                        const Shape* expected) {
  const std::string sname = name + "_scale_inv";
  const SafetensorsEntry* s = ck.entry(sname);
  if (s == nullptr)
    return not_found("tensor '" + name + "' is FP8 (F8_E4M3) but its block scales '" + sname +
                     "' are missing; the FP8 checkpoint is incomplete");
  if (expected && e.shape != *expected)
    return invalid_argument("tensor '" + name + "' has shape " + shape_str(e.shape) +
                            ", config implies " + shape_str(*expected));
  if (e.shape.size() != 2)
    return unsupported("FP8 tensor '" + name + "' is " + std::to_string(e.shape.size()) +
                       "-D; hypic reads block-scaled FP8 matrices [N, K] only");
  const int64_t N = e.shape[0], K = e.shape[1], B = 128;
  const Shape want_s{(N + B - 1) / B, (K + B - 1) / B};
  if (s->dtype != "F32" && s->dtype != "BF16")
    return invalid_argument("block scales '" + sname + "' are " + s->dtype + "; F32 expected");
  if (s->shape != want_s)
    return invalid_argument("block scales '" + sname + "' have shape " + shape_str(s->shape) +
                            ", 128 × 128 blocks of " + shape_str(e.shape) + " need " +
                            shape_str(want_s));
  HYPIC_ASSIGN_OR_RETURN(RawTensor codes, ck.get_raw(name));
  HYPIC_ASSIGN_OR_RETURN(Tensor sc, ck.get_unchecked(sname));
  const Tensor scale = sc.to(DType::kF32);
  Tensor out = Tensor::zeros(DType::kBF16, e.shape);
  uint16_t* dst = out.u16();
  parallel_for(N, [&](int64_t n) {
    const uint8_t* c = codes.bytes.data() + n * K;
    const float* srow = scale.f32() + (n / B) * want_s[1];
    for (int64_t k = 0; k < K; ++k) dst[n * K + k] = f32_to_bf16(fp8_e4m3_to_f32(c[k]) * srow[k / B]);
  });
  ck.release_pages(codes.bytes.data(), codes.bytes.size());
  return out;
}

}  // namespace

float fp8_e4m3_to_f32(uint8_t v) {
  const int sign = v >> 7, exp = (v >> 3) & 15, man = v & 7;
  if (exp == 15 && man == 7) return std::nanf("");
  const float mag = exp == 0 ? std::ldexp(float(man), -9)                 // subnormal: m/8 · 2^-6
                             : std::ldexp(1.0f + float(man) / 8.0f, exp - 7);
  return sign ? -mag : mag;
}

Result<Tensor> read_stored_quantized(const Checkpoint& ck, const std::string& name,
                                     const SafetensorsEntry& e, const Shape* expected) {
  if (e.dtype == "I8" || e.dtype == "U8") return read_hypic(ck, name, e, expected);
  if (e.dtype == "F8_E4M3") return read_fp8(ck, name, e, expected);
  return unsupported("tensor '" + name + "' has dtype " + e.dtype + ", which hypic does not "
                     "read (F32, BF16, F16; F8_E4M3 with block scales; hypic's I8 / U8 "
                     "quantized matrices with scales)");
}

bool stored_quant_dtype(const std::string& dtype) {
  return dtype == "I8" || dtype == "U8" || dtype == "F8_E4M3";
}

bool is_quant_companion(const Checkpoint& ck, const std::string& name) {
  auto ends = [&](const char* suf) {
    const size_t n = std::strlen(suf);
    return name.size() > n && name.compare(name.size() - n, n, suf) == 0 &&
           ck.has(name.substr(0, name.size() - n));
  };
  return ends(".scale") || ends("_scale_inv");
}

}  // namespace hypic
