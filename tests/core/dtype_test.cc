#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace crucible {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t bf16_bits(uint32_t f32_bits) { return to_bf16(from_bits(f32_bits)).bits; }

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::f32), 4u);
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_name(DType::f32), "f32");
  EXPECT_EQ(dtype_name(DType::bf16), "bf16");
  static_assert(sizeof(bf16) == 2);
}

TEST(Bf16, ExactValuesConvertExactly) {
  EXPECT_EQ(to_bf16(1.0f).bits, 0x3f80);
  EXPECT_EQ(to_bf16(-2.0f).bits, 0xc000);
  EXPECT_EQ(to_bf16(0.0f).bits, 0x0000);
  EXPECT_EQ(to_bf16(-0.0f).bits, 0x8000);
  EXPECT_EQ(to_f32(bf16{0x3f80}), 1.0f);
  EXPECT_EQ(to_f32(bf16{0x4049}), 3.140625f);
}

TEST(Bf16, RoundsToNearestEven) {
  // Below, above and exactly at the halfway point between two bf16 values.
  EXPECT_EQ(bf16_bits(0x3f807fff), 0x3f80);
  EXPECT_EQ(bf16_bits(0x3f808001), 0x3f81);
  EXPECT_EQ(bf16_bits(0x3f808000), 0x3f80);  // tie, 0x3f80 is even: down
  EXPECT_EQ(bf16_bits(0x3f818000), 0x3f82);  // tie, 0x3f81 is odd: up
  EXPECT_EQ(bf16_bits(0xbf808000), 0xbf80);  // sign does not matter
  EXPECT_EQ(bf16_bits(0xbf818000), 0xbf82);
  // The carry ripples into the exponent: 1.99999 -> 2.
  EXPECT_EQ(bf16_bits(0x3fffffff), 0x4000);
  // Subnormals round the same way.
  EXPECT_EQ(bf16_bits(0x00008000), 0x0000);
  EXPECT_EQ(bf16_bits(0x00018000), 0x0002);
  EXPECT_EQ(bf16_bits(0x00008001), 0x0001);
  // pi = 0x40490fdb -> 0x4049 (the dropped half 0x0fdb is below the tie)
  EXPECT_EQ(to_bf16(3.14159265f).bits, 0x4049);
}

TEST(Bf16, OverflowRoundsToInfinity) {
  EXPECT_EQ(bf16_bits(0x7f7fffff), 0x7f80);  // FLT_MAX rounds up to +inf
  EXPECT_EQ(bf16_bits(0xff7fffff), 0xff80);
  EXPECT_EQ(bf16_bits(0x7f7f7fff), 0x7f7f);  // largest finite bf16 stays
}

TEST(Bf16, InfinityStaysInfinity) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(to_bf16(inf).bits, 0x7f80);
  EXPECT_EQ(to_bf16(-inf).bits, 0xff80);
  EXPECT_EQ(to_f32(bf16{0x7f80}), inf);
  EXPECT_EQ(to_f32(bf16{0xff80}), -inf);
}

TEST(Bf16, NanStaysNan) {
  EXPECT_TRUE(std::isnan(to_f32(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(bf16_bits(0x7fc00000), 0x7fc0);
  EXPECT_EQ(bf16_bits(0xffc00000), 0xffc0);
  // NaNs whose payload sits only in the dropped low bits (and the largest
  // payloads, which plain rounding would carry into the sign) must not become
  // inf or change sign.
  for (uint32_t u : {0x7f800001u, 0x7f80ffffu, 0x7fffffffu, 0xff800001u, 0xffffffffu}) {
    uint16_t h = bf16_bits(u);
    EXPECT_TRUE(std::isnan(to_f32(bf16{h}))) << std::hex << u;
    EXPECT_EQ(h & 0x8000, (u >> 16) & 0x8000) << std::hex << u;
  }
}

TEST(Bf16, EveryBf16ValueRoundTrips) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    float f = to_f32(bf16{uint16_t(b)});
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(to_f32(to_bf16(f)))) << std::hex << b;
    } else {
      ASSERT_EQ(to_bf16(f).bits, b) << std::hex << b;
    }
  }
}

TEST(Bf16, RoundingErrorIsAtMostHalfAnUlp) {
  for (uint32_t u = 0x3f800000; u < 0x40000000; u += 0x1357) {  // [1, 2): ulp 2^-7
    float f = from_bits(u);
    EXPECT_LE(std::fabs(to_f32(to_bf16(f)) - f), 0x1p-8f) << f;
  }
}

}  // namespace
}  // namespace crucible
