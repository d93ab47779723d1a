// The K-quant encoders of QuantizeRow, with DequantizeRow (ggml_type.cc,
// ggml's layouts) as the oracle: decoded rows are close to the input by a
// bound derived from each type's bits, blocks already on a type's grid come
// back byte for byte, and zeros, constants, NaN and huge inputs behave as
// quantize.h documents.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "engine/gguf/ggml_type.h"
#include "engine/gguf/quantize.h"
#include "gtest/gtest.h"

namespace paceline::engine {
namespace {

constexpr int64_t kQK = 256;

// Relative RMS error bounds on normal(0, 1) data. Rounding to a uniform grid
// of step D leaves an RMS error of D / sqrt(12). Each group's step comes from
// its spread: the expected range of n standard normals is 3.53 (n = 16) and
// 4.12 (n = 32), the expected largest magnitude of 16 is 2.0. Hence
//   Q2_K: 16-element groups, range / 3 levels:   3.53 / 3 / 3.46 = 0.34
//   Q3_K: 16, largest magnitude / 4:             2.0 / 4 / 3.46  = 0.145
//   Q4_K: 32, range / 15:                        4.12 / 15 / 3.46 = 0.079
//   Q5_K: 32, range / 31:                        4.12 / 31 / 3.46 = 0.038
//   Q6_K: 16, largest magnitude / 32:            2.0 / 32 / 3.46 = 0.018
// and the bound allows 25% on top for the rounding of each group's scale to
// its 4/6/8-bit field and for clamped levels.
struct KCase {
  GgmlType type;
  double expected_rel_rms;
};

constexpr KCase kCases[] = {
    {GgmlType::kQ2_K, 0.34},  {GgmlType::kQ3_K, 0.145},
    {GgmlType::kQ4_K, 0.079}, {GgmlType::kQ5_K, 0.038},
    {GgmlType::kQ6_K, 0.018},
};

void PrintTo(const KCase& c, std::ostream* os) {
  *os << GetGgmlTypeTraits(c.type).name;
}

std::vector<float> NormalRow(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> row(n);
  for (float& x : row) x = normal(rng);
  return row;
}

std::vector<uint8_t> Encode(GgmlType type, const std::vector<float>& src) {
  const int64_t n = static_cast<int64_t>(src.size());
  std::vector<uint8_t> bytes(*GgmlRowBytes(type, n));
  EXPECT_TRUE(QuantizeRow(type, src.data(), n, bytes.data()).ok());
  return bytes;
}

std::vector<float> Decode(GgmlType type, const std::vector<uint8_t>& bytes,
                          int64_t n) {
  std::vector<float> out(n);
  EXPECT_TRUE(DequantizeRow(type, bytes.data(), out.data(), n).ok());
  return out;
}

std::vector<float> RoundTrip(GgmlType type, const std::vector<float>& src) {
  return Decode(type, Encode(type, src), static_cast<int64_t>(src.size()));
}

double RelativeRmsError(const std::vector<float>& x,
                        const std::vector<float>& y) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (static_cast<double>(y[i]) - x[i]) * (y[i] - x[i]);
    ref += static_cast<double>(x[i]) * x[i];
  }
  return std::sqrt(err / ref);
}

class KQuantTest : public testing::TestWithParam<KCase> {};

TEST_P(KQuantTest, NormalDataWithinTheBoundOfItsBits) {
  const GgmlType type = GetParam().type;
  const std::vector<float> x = NormalRow(kQK * 64, 11);
  const double rel = RelativeRmsError(x, RoundTrip(type, x));
  EXPECT_LE(rel, 1.25 * GetParam().expected_rel_rms);
  // Not far below either: the encoder uses its levels, it does not cheat by
  // luck of the data (a much smaller error would mean a wrong derivation).
  EXPECT_GE(rel, 0.5 * GetParam().expected_rel_rms);
  // Scaled data: the error scales with it (the scales are relative).
  std::vector<float> scaled = x;
  for (float& v : scaled) v *= 1e-3f;
  EXPECT_LE(RelativeRmsError(scaled, RoundTrip(type, scaled)),
            1.25 * GetParam().expected_rel_rms);
}

TEST_P(KQuantTest, ZerosStayExactZeros) {
  const GgmlType type = GetParam().type;
  std::vector<float> x = NormalRow(kQK * 2, 3);
  std::fill(x.begin(), x.begin() + kQK, 0.0f);  // one all-zero super-block
  const std::vector<float> y = RoundTrip(type, x);
  for (int64_t i = 0; i < kQK; ++i) ASSERT_EQ(y[i], 0.0f) << i;
  // A zero group inside a non-zero block (Q3_K / Q6_K groups are 16 wide,
  // the others at most 32): decodes to zero when the type has no minimum
  // or the group's offset is 0, which it is for a non-negative block.
  std::vector<float> z(kQK);
  for (int64_t i = 32; i < kQK; ++i) z[i] = 1.0f + static_cast<float>(i % 7);
  const std::vector<float> back = RoundTrip(type, z);
  for (int64_t i = 0; i < 32; ++i) EXPECT_EQ(back[i], 0.0f) << i;
}

TEST_P(KQuantTest, ConstantBlocksWithinHalfPrecision) {
  const GgmlType type = GetParam().type;
  // Values whose super-block scale is a normal f16 (above 2^-14).
  for (float c : {1.0f, -1.0f, 0.37f, -1234.5f, 20000.0f}) {
    const std::vector<float> y = RoundTrip(type, std::vector<float>(kQK, c));
    for (int64_t i = 0; i < kQK; ++i) {
      ASSERT_NEAR(y[i], c, std::fabs(c) * 0x1p-10f) << c << " at " << i;
    }
  }
}

TEST_P(KQuantTest, NanEncodesAsZeroAndTheRestIsUntouched) {
  const GgmlType type = GetParam().type;
  std::vector<float> x = NormalRow(kQK * 4, 5);
  std::vector<float> zeroed = x;
  for (int64_t i : {3, 300, 301, 777}) {
    x[i] = std::numeric_limits<float>::quiet_NaN();
    zeroed[i] = 0.0f;
  }
  // Bit for bit what the same row with zeros encodes to.
  EXPECT_EQ(Encode(type, x), Encode(type, zeroed));
}

TEST_P(KQuantTest, HugeAndInfiniteInputsSaturateFinite) {
  const GgmlType type = GetParam().type;
  const float inf = std::numeric_limits<float>::infinity();
  // Beyond what f16 scales reach: decodes to the grid's largest magnitude,
  // finite and of the input's sign.
  for (float v : {1e30f, -1e30f, inf, -inf, 3e38f}) {
    const std::vector<float> y = RoundTrip(type, std::vector<float>(kQK, v));
    for (int64_t i = 0; i < kQK; ++i) {
      ASSERT_TRUE(std::isfinite(y[i])) << v;
      ASSERT_GT(y[i] * std::copysign(1.0f, v), 1e5f) << v;
    }
  }
  // Mixed with ordinary values: still finite, the infinities keep sign.
  std::vector<float> x = NormalRow(kQK, 9);
  x[10] = inf;
  x[11] = -inf;
  const std::vector<float> y = RoundTrip(type, x);
  for (float v : y) ASSERT_TRUE(std::isfinite(v));
  EXPECT_GT(y[10], 0.0f);
  EXPECT_LT(y[11], 0.0f);
}

INSTANTIATE_TEST_SUITE_P(Types, KQuantTest, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<KCase>& info) {
                           return std::string(
                               GetGgmlTypeTraits(info.param.type).name);
                         });

TEST(KQuantOrderTest, MoreBitsLessError) {
  const std::vector<float> x = NormalRow(kQK * 64, 21);
  double prev = 0;
  // kCases runs from Q2_K to Q6_K: the error must fall at every step.
  for (const KCase& c : kCases) {
    const double rel = RelativeRmsError(x, RoundTrip(c.type, x));
    if (prev != 0) {
      EXPECT_LT(rel, prev) << GetGgmlTypeTraits(c.type).name;
    }
    prev = rel;
  }
}

TEST(KQuantOrderTest, RejectsPartialSuperBlocks) {
  std::vector<float> x(kQK + 32);
  std::vector<uint8_t> out(1024);
  for (const KCase& c : kCases) {
    EXPECT_TRUE(CanQuantize(c.type));
    EXPECT_FALSE(QuantizeRow(c.type, x.data(), kQK + 32, out.data()).ok());
    EXPECT_TRUE(QuantizeRow(c.type, x.data(), kQK, out.data()).ok());
  }
}

// ---- Blocks already on a type's grid come back byte for byte. ----
//
// A random block of a type's bytes is on the grid this encoder picks when
// (asymmetric types) every group's scale is >= 1, the largest scale and the
// largest min fill their field, and each group holds level 0 and the top
// level; (symmetric types) no scale is 0, the largest |scale| is the field's
// maximum, no scale is beyond it, and each group holds the lowest level.
// Fields are read back through DequantizeRow, not by unpacking them here.

struct GridLayout {
  GgmlType type;
  int bytes;
  int d_at;
  int dmin_at;  // -1: no dmin (symmetric)
  int scales_at, scales_len;
  int fmax;  // largest |field| the encoder writes
  void (*levels_to_one)(uint8_t* b);
  void (*force_extremes)(uint8_t* b);
};

void PrintTo(const GridLayout& g, std::ostream* os) {
  *os << GetGgmlTypeTraits(g.type).name;
}

void Fill(uint8_t* b, int from, int to, uint8_t v) {
  std::memset(b + from, v, to - from);
}

constexpr GridLayout kGrids[] = {
    {GgmlType::kQ2_K, 84, 80, 82, 0, 16, 15,
     [](uint8_t* b) { Fill(b, 16, 80, 0x55); },
     [](uint8_t* b) {
       for (int h = 0; h < 2; ++h) {
         for (int lane : {0, 16}) {
           b[16 + 32 * h + lane] = 0x00;      // level 0 in all four groups
           b[16 + 32 * h + lane + 1] = 0xFF;  // level 3
         }
       }
     }},
    {GgmlType::kQ3_K, 110, 108, -1, 96, 12, 31,
     [](uint8_t* b) {
       Fill(b, 0, 32, 0xFF);
       Fill(b, 32, 96, 0x55);
     },
     [](uint8_t* b) {
       for (int lane : {0, 16}) {  // level -4: low bits 0, hmask bit clear
         b[lane] = 0;
         b[32 + lane] = 0;
         b[64 + lane] = 0;
       }
     }},
    {GgmlType::kQ4_K, 144, 0, 2, 4, 12, 63,
     [](uint8_t* b) { Fill(b, 16, 144, 0x11); },
     [](uint8_t* b) {
       for (int c = 0; c < 4; ++c) {
         b[16 + 32 * c] = 0xF0;  // even sub-block level 0, odd 15
         b[16 + 32 * c + 1] = 0x0F;
       }
     }},
    {GgmlType::kQ5_K, 176, 0, 2, 4, 12, 63,
     [](uint8_t* b) {
       Fill(b, 16, 48, 0x00);
       Fill(b, 48, 176, 0x11);
     },
     [](uint8_t* b) {
       for (int c = 0; c < 4; ++c) {
         b[48 + 32 * c] = 0xF0;
         b[48 + 32 * c + 1] = 0x0F;
       }
       b[16] = 0xAA;  // lane 0: odd sub-blocks 31, even 0
       b[17] = 0x55;  // lane 1: even 31, odd 0
     }},
    {GgmlType::kQ6_K, 210, 208, -1, 192, 16, 127,
     [](uint8_t* b) {
       Fill(b, 0, 128, 0x11);
       Fill(b, 128, 192, 0xAA);  // q = 1 | 2 << 4 = 33, level 1
     },
     [](uint8_t* b) {
       for (int h = 0; h < 2; ++h) {  // level -32 (q = 0) at lanes 0, 16
         for (int i : {0, 16, 32, 48}) b[64 * h + i] = 0;
         b[128 + 32 * h] = 0;
         b[128 + 32 * h + 16] = 0;
       }
     }},
};

void StoreHalfAt(uint8_t* b, int at, float v) {
  const uint16_t h = FloatToHalf(v);
  std::memcpy(b + at, &h, 2);
}

// Each 16-element group's scale (element 16g with every level 1, d = 1,
// dmin = 0) or, with `mins`, its min (d = 0, dmin = 1: element = -min).
std::vector<int> Fields(const GridLayout& g, std::vector<uint8_t> b,
                        bool mins) {
  g.levels_to_one(b.data());
  StoreHalfAt(b.data(), g.d_at, mins ? 0.0f : 1.0f);
  if (g.dmin_at >= 0) StoreHalfAt(b.data(), g.dmin_at, mins ? 1.0f : 0.0f);
  const std::vector<float> y = Decode(g.type, b, kQK);
  std::vector<int> fields;
  for (int i = 0; i < kQK; i += 16) {
    fields.push_back(static_cast<int>(mins ? -y[i] : y[i]));
  }
  return fields;
}

bool OnTheEncodersGrid(const GridLayout& g, const std::vector<uint8_t>& b) {
  const std::vector<int> sc = Fields(g, b, false);
  int max_abs = 0;
  for (int f : sc) {
    if (f == 0 || std::abs(f) > g.fmax) return false;
    max_abs = std::max(max_abs, std::abs(f));
  }
  if (max_abs != g.fmax) return false;
  if (g.dmin_at < 0) return true;
  const std::vector<int> m = Fields(g, b, true);
  return *std::max_element(m.begin(), m.end()) == g.fmax;
}

std::vector<uint8_t> RandomGridBlock(const GridLayout& g, std::mt19937& rng) {
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-6, 2);
  std::vector<uint8_t> b(g.bytes);
  for (uint8_t& v : b) v = static_cast<uint8_t>(byte(rng));
  g.force_extremes(b.data());
  StoreHalfAt(b.data(), g.d_at, std::ldexp(mantissa(rng), exponent(rng)));
  if (g.dmin_at >= 0) {
    StoreHalfAt(b.data(), g.dmin_at, std::ldexp(mantissa(rng), exponent(rng)));
  }
  for (int tries = 0; tries < 100000; ++tries) {
    if (OnTheEncodersGrid(g, b)) return b;
    for (int i = g.scales_at; i < g.scales_at + g.scales_len; ++i) {
      b[i] = static_cast<uint8_t>(byte(rng));
    }
  }
  ADD_FAILURE() << "no grid block found";
  return b;
}

class KQuantGridTest : public testing::TestWithParam<GridLayout> {};

TEST_P(KQuantGridTest, DecodedGridBlocksEncodeToTheSameBytes) {
  const GridLayout& g = GetParam();
  std::mt19937 rng(static_cast<uint32_t>(g.type));
  for (int trial = 0; trial < 50; ++trial) {
    const std::vector<uint8_t> block = RandomGridBlock(g, rng);
    const std::vector<float> values = Decode(g.type, block, kQK);
    ASSERT_EQ(Encode(g.type, values), block) << "trial " << trial;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, KQuantGridTest, testing::ValuesIn(kGrids),
                         [](const testing::TestParamInfo<GridLayout>& info) {
                           return std::string(
                               GetGgmlTypeTraits(info.param.type).name);
                         });

}  // namespace
}  // namespace paceline::engine
