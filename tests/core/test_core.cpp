#include <gtest/gtest.h>

#include <cmath>

#include "core/dtype.h"
#include "core/fp_env.h"
#include "core/status.h"
#include "core/tensor.h"

namespace hypic {

TEST(Dtype, Bf16RoundTripAndRounding) {
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f)), 1.0f);
  // 1 + 2^-8 lies exactly between two bf16 values: ties to even -> 1.0.
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

TEST(Dtype, F16RoundTrip) {
  for (float x : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.96e-08f, 0.333251953125f})
    EXPECT_EQ(f16_to_f32(f32_to_f16(x)), f16_to_f32(f32_to_f16(f16_to_f32(f32_to_f16(x)))));
  EXPECT_EQ(f16_to_f32(f32_to_f16(1.5f)), 1.5f);
  EXPECT_EQ(f16_to_f32(f32_to_f16(65504.0f)), 65504.0f);
  EXPECT_TRUE(std::isinf(f16_to_f32(f32_to_f16(1e6f))));
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
}

// Under the guard a product below FLT_MIN is 0 and a denormal operand reads as 0; after it
// the thread's mode is what it was (denormals kept).
TEST(FpEnv, FlushDenormalsWhileInScopeThenRestores) {
  volatile float tiny = 1e-20f, denormal = 1e-40f;
  ASSERT_GT(tiny * tiny, 0.0f);
  ASSERT_GT(denormal * 2.0f, 0.0f);
  {
    const FlushDenormals ftz;
    EXPECT_EQ(tiny * tiny, 0.0f);
    EXPECT_EQ(denormal * 2.0f + 0.0f, 0.0f);
    {
      const FlushDenormals nested;
      EXPECT_EQ(tiny * tiny, 0.0f);
    }
    EXPECT_EQ(tiny * tiny, 0.0f);  // the inner guard restored the outer mode, not the default
  }
  EXPECT_GT(tiny * tiny, 0.0f);
  EXPECT_GT(denormal * 2.0f, 0.0f);
}

TEST(Tensor, ZerosReshapeRowsConvert) {
  Tensor t = Tensor::zeros_f32({4, 3});
  for (int i = 0; i < 12; ++i) t.f32()[i] = float(i);
  EXPECT_EQ(t.rows(1, 3).f32()[0], 3.0f);
  EXPECT_EQ(t.reshape({2, 6}).dim(1), 6);
  Tensor b = t.to(DType::kBF16);
  Tensor back = b.to(DType::kF32);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(back.f32()[i], float(i));
}

Result<int> parse_positive(int x) {
  if (x <= 0) return invalid_argument("must be positive");
  return x;
}
Status use_it(int x, int* out) {
  HYPIC_ASSIGN_OR_RETURN(*out, parse_positive(x));
  return Status::ok();
}

// Inside a HugePageScope a tensor of 1 MiB or more starts on a 2 MiB page boundary (the
// kernel may then back it with huge pages) and reads as zeros like any other; scopes nest.
TEST(Tensor, HugePageScopeAlignsLargeTensors) {
  const HugePageScope outer;
  Tensor big;
  {
    const HugePageScope inner;
    big = Tensor::zeros_f32({3, 1 << 17});  // 1.5 MiB
  }
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.raw()) % (uintptr_t(2) << 20), 0u);
  EXPECT_EQ(big.nbytes(), size_t(3) << 19);
  for (int64_t i = 0; i < big.numel(); i += 4099) ASSERT_EQ(big.f32()[i], 0.0f);
  const Tensor also = Tensor::zeros(DType::kBF16, {1 << 19});  // 1 MiB, still in `outer`
  EXPECT_EQ(reinterpret_cast<uintptr_t>(also.raw()) % (uintptr_t(2) << 20), 0u);
}

TEST(Status, ResultPropagation) {
  int v = 0;
  EXPECT_TRUE(use_it(3, &v).is_ok());
  EXPECT_EQ(v, 3);
  Status s = use_it(-1, &v);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.with_context("arg").message(), "arg: must be positive");
}

}  // namespace hypic
