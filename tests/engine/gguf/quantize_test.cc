#include "engine/gguf/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "engine/gguf/ggml_type.h"
#include "gtest/gtest.h"

namespace paceline::engine {
namespace {

TEST(FloatToHalfTest, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = HalfToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f)))) << h;
      continue;
    }
    EXPECT_EQ(FloatToHalf(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(FloatToHalfTest, RoundsToNearestEven) {
  // Between 1 and the next half (1 + 2^-10): the midpoint goes to even (1).
  EXPECT_EQ(FloatToHalf(1.0f + 0x1p-11f), 0x3C00);
  EXPECT_EQ(FloatToHalf(1.0f + 0x1p-11f + 0x1p-20f), 0x3C01);
  // Midpoint between 1 + 2^-10 (odd) and 1 + 2^-9: up to even.
  EXPECT_EQ(FloatToHalf(1.0f + 3 * 0x1p-11f), 0x3C02);
  // Overflow and the largest finite half.
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);
  EXPECT_EQ(FloatToHalf(-1e9f), 0xFC00);
  // Subnormals: 2^-24 is the smallest; half of it rounds to even (zero).
  EXPECT_EQ(FloatToHalf(0x1p-24f), 0x0001);
  EXPECT_EQ(FloatToHalf(0x1p-25f), 0x0000);
  EXPECT_EQ(FloatToHalf(0x1.8p-24f), 0x0002);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7C00);
}

TEST(FloatToBFloat16Test, RoundsToNearestEven) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBFloat16(1.0f + 0x1p-8f), 0x3F80);  // midpoint, even
  EXPECT_EQ(FloatToBFloat16(1.0f + 0x1p-7f + 0x1p-8f), 0x3F82);  // up to even
  EXPECT_EQ(FloatToBFloat16(-2.0f), 0xC000);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(
      FloatToBFloat16(std::numeric_limits<float>::quiet_NaN()))));
  for (uint32_t b = 0; b < 0x10000; b += 7) {
    const float f = BFloat16ToFloat(static_cast<uint16_t>(b));
    if (!std::isnan(f)) {
      EXPECT_EQ(FloatToBFloat16(f), b);
    }
  }
}

// Quantize random rows, dequantize them back, and bound the error by the
// type's step: half an ulp of the float types, half a quantization step of
// Q8_0 and one step of Q4_0 (plus the f16 rounding of the block scale).
class QuantizeRoundTripTest : public testing::TestWithParam<GgmlType> {};

TEST_P(QuantizeRoundTripTest, DequantizeGivesBackTheRow) {
  const GgmlType type = GetParam();
  constexpr int64_t kN = 32 * 64;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> src(kN);
  for (int64_t i = 0; i < kN; ++i) {
    // Blocks of very different magnitudes, one all-zero block.
    const float block_scale =
        std::ldexp(1.0f, static_cast<int>(i / 32 % 9) - 4);
    src[i] = i / 32 == 5 ? 0.0f : normal(rng) * block_scale;
  }
  std::vector<uint8_t> bytes(*GgmlRowBytes(type, kN));
  ASSERT_TRUE(QuantizeRow(type, src.data(), kN, bytes.data()).ok());
  std::vector<float> back(kN);
  ASSERT_TRUE(DequantizeRow(type, bytes.data(), back.data(), kN).ok());
  for (int64_t b = 0; b < kN / 32; ++b) {
    float amax = 0;
    for (int64_t i = 0; i < 32; ++i)
      amax = std::max(amax, std::fabs(src[b * 32 + i]));
    for (int64_t i = b * 32; i < b * 32 + 32; ++i) {
      float tol = 0;
      switch (type) {
        case GgmlType::kF32:
          tol = 0;
          break;
        case GgmlType::kF16:
          tol = std::fabs(src[i]) * 0x1p-11f + 0x1p-25f;
          break;
        case GgmlType::kBF16:
          tol = std::fabs(src[i]) * 0x1p-8f;
          break;
        case GgmlType::kQ8_0:
          tol = amax / 127 * 0.5f + amax * 0x1p-10f;
          break;
        // Q4_0's levels are -8..7 steps of max|x| / 8: an element near
        // the largest magnitude but of the other sign clamps at 7 steps.
        case GgmlType::kQ4_0:
          tol = amax / 8 + amax * 0x1p-10f;
          break;
        // MXFP4's grid step below the largest magnitude m is at most 2 of
        // the block's 2^(e - 127) <= m / 4 (between 4 and 6; (6, 8) clips
        // to 6): at most m / 4 from the grid.
        case GgmlType::kMXFP4:
          tol = amax / 4;
          break;
        default:
          FAIL();
      }
      EXPECT_LE(std::fabs(back[i] - src[i]), tol) << "element " << i;
    }
  }
  // The all-zero block stays exactly zero.
  for (int64_t i = 5 * 32; i < 6 * 32; ++i) EXPECT_EQ(back[i], 0.0f);
}

INSTANTIATE_TEST_SUITE_P(Types, QuantizeRoundTripTest,
                         testing::Values(GgmlType::kF32, GgmlType::kF16,
                                         GgmlType::kBF16, GgmlType::kQ8_0,
                                         GgmlType::kQ4_0, GgmlType::kMXFP4),
                         [](const testing::TestParamInfo<GgmlType>& info) {
                           return std::string(
                               GetGgmlTypeTraits(info.param).name);
                         });

TEST(QuantizeTest, Q4_0MapsTheLargestMagnitudeToLevelZero) {
  // d = m / -8 with m = -4: the -4 is q = 0 exactly, +3.5 is q = 15.
  // Element i < 16 is the low nibble of byte 2 + i, element i + 16 the high.
  float src[32] = {};
  src[0] = -4.0f;
  src[1] = 3.5f;
  src[17] = 1.0f;
  uint8_t bytes[18];
  ASSERT_TRUE(QuantizeRow(GgmlType::kQ4_0, src, 32, bytes).ok());
  EXPECT_EQ(HalfToFloat(static_cast<uint16_t>(bytes[0] | bytes[1] << 8)), 0.5f);
  EXPECT_EQ(bytes[2] & 0xF, 0);   // element 0
  EXPECT_EQ(bytes[3] & 0xF, 15);  // element 1: 3.5 * 2 + 8.5 -> 15
  EXPECT_EQ(bytes[3] >> 4, 10);   // element 17: 1.0 * 2 + 8.5 -> 10
}

// MXFP4 from its definition: the block's unit s is the power of two with
// max|x| in [4, 8) * s (E8M0 byte log2(s) + 127), the values are the E2M1
// numbers 0, 0.5, 1, 1.5, 2, 3, 4, 6 (and negatives) times s, and each
// element decodes to the one nearest it.
constexpr double kE2M1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};

double NearestE2M1Distance(double x, double s) {
  double best = INFINITY;
  for (double v : kE2M1) {
    best = std::min({best, std::fabs(v * s - x), std::fabs(-v * s - x)});
  }
  return best;
}

TEST(QuantizeTest, MXFP4EncodesTheNearestE2M1Value) {
  std::mt19937 rng(39);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  constexpr int kBlocks = 40;
  std::vector<float> src(32 * kBlocks);
  for (size_t i = 0; i < src.size(); ++i) {
    src[i] = normal(rng) * std::ldexp(1.0f, static_cast<int>(i / 32) - 20);
  }
  std::vector<uint8_t> bytes(17 * kBlocks);
  ASSERT_TRUE(
      QuantizeRow(GgmlType::kMXFP4, src.data(), src.size(), bytes.data()).ok());
  std::vector<float> back(src.size());
  ASSERT_TRUE(
      DequantizeRow(GgmlType::kMXFP4, bytes.data(), back.data(), src.size())
          .ok());
  for (int b = 0; b < kBlocks; ++b) {
    double amax = 0;
    for (int i = 0; i < 32; ++i) {
      amax = std::max<double>(amax, std::fabs(src[32 * b + i]));
    }
    double s = 1;  // the power of two with amax / s in [4, 8)
    while (amax / s >= 8) s *= 2;
    while (amax / s < 4) s /= 2;
    EXPECT_EQ(bytes[17 * b], std::log2(s) + 127) << "block " << b;
    for (int i = 32 * b; i < 32 * b + 32; ++i) {
      EXPECT_EQ(std::fabs(static_cast<double>(back[i]) - src[i]),
                NearestE2M1Distance(src[i], s))
          << "element " << i;
    }
  }
}

TEST(QuantizeTest, MXFP4BreaksTiesTowardTheFirstLevel) {
  // max|x| = 7 gives unit s = 1 (E8M0 127). Ties: 0.25 and -0.25 between 0
  // and +-0.5 go to 0 (nibble 0); 5 and -5 between 4 and 6 to 4 and -4
  // (nibbles 6 and 14); 7 clips to 6 (nibble 7). Element i < 16 is the low
  // nibble of byte 1 + i, element i + 16 the high one.
  float src[32] = {};
  src[0] = 4.0f;
  src[1] = 0.25f;
  src[2] = -0.25f;
  src[3] = 5.0f;
  src[19] = -5.0f;
  src[20] = 7.0f;
  uint8_t bytes[17];
  ASSERT_TRUE(QuantizeRow(GgmlType::kMXFP4, src, 32, bytes).ok());
  EXPECT_EQ(bytes[0], 127);
  EXPECT_EQ(bytes[1], 6);            // element 0: 4 = E2M1 index 6
  EXPECT_EQ(bytes[2], 0);            // 0.25 -> 0
  EXPECT_EQ(bytes[3], 0);            // -0.25 -> 0
  EXPECT_EQ(bytes[4], 14 << 4 | 6);  // 5 -> 4; element 19: -5 -> -4
  EXPECT_EQ(bytes[5], 7 << 4);       // element 20: 7 -> 6
}

TEST(QuantizeTest, RejectsOtherTypesAndPartialBlocks) {
  float src[64] = {};
  uint8_t out[256];
  EXPECT_FALSE(QuantizeRow(GgmlType::kQ5_0, src, 32, out).ok());
  EXPECT_FALSE(QuantizeRow(GgmlType::kQ4_K, src, 32, out).ok());
  EXPECT_FALSE(QuantizeRow(GgmlType::kQ8_0, src, 31, out).ok());
  EXPECT_FALSE(CanQuantize(GgmlType::kQ5_0));
  EXPECT_TRUE(CanQuantize(GgmlType::kBF16));
}

}  // namespace
}  // namespace paceline::engine
