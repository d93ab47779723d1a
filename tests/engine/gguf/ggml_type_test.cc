#include "engine/gguf/ggml_type.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"

// Quantized blocks are built here by packing random quant values into the
// byte layouts of ggml-common.h field by field (the encoding direction), and
// the expected floats come from those values, not from decoding the bytes.
// Sizes and layouts below are ggml's published facts, written out again on
// purpose rather than taken from the implementation.

namespace paceline::engine {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// IEEE binary16 by its definition, computed in double.
double RefHalf(uint16_t h) {
  const int exponent = (h >> 10) & 0x1F;
  const int mantissa = h & 0x3FF;
  double magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(mantissa, -24);
  } else if (exponent == 31) {
    magnitude = mantissa == 0 ? std::numeric_limits<double>::infinity()
                              : std::numeric_limits<double>::quiet_NaN();
  } else {
    magnitude = std::ldexp(1024 + mantissa, exponent - 25);
  }
  return (h & 0x8000) ? -magnitude : magnitude;
}

float Half(uint16_t h) { return static_cast<float>(RefHalf(h)); }

// ---------------------------------------------------------------- traits

struct ExpectedTraits {
  uint32_t id;
  const char* name;
  int64_t block_size;
  int64_t type_size;
};

// From ggml.h (ids) and ggml-common.h (block structs and their
// static_asserts).
constexpr ExpectedTraits kGgmlTypes[] = {
    {0, "F32", 1, 4},         {1, "F16", 1, 2},
    {2, "Q4_0", 32, 18},      {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 36},
    {10, "Q2_K", 256, 84},    {11, "Q3_K", 256, 110},
    {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},
    {16, "IQ2_XXS", 256, 66}, {17, "IQ2_XS", 256, 74},
    {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
    {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},
    {22, "IQ2_S", 256, 82},   {23, "IQ4_XS", 256, 136},
    {24, "I8", 1, 1},         {25, "I16", 1, 2},
    {26, "I32", 1, 4},        {27, "I64", 1, 8},
    {28, "F64", 1, 8},        {29, "IQ1_M", 256, 56},
    {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},
    {35, "TQ2_0", 256, 66},   {39, "MXFP4", 32, 17},
};

TEST(GgmlTypeTest, EveryTypeHasGgmlsBlockLayout) {
  for (const ExpectedTraits& want : kGgmlTypes) {
    SCOPED_TRACE(want.name);
    const GgmlTypeTraits* traits = FindGgmlType(want.id);
    ASSERT_NE(traits, nullptr);
    EXPECT_EQ(static_cast<uint32_t>(traits->type), want.id);
    EXPECT_EQ(traits->name, want.name);
    EXPECT_EQ(traits->block_size, want.block_size);
    EXPECT_EQ(traits->type_size, want.type_size);
    EXPECT_EQ(&GetGgmlTypeTraits(static_cast<GgmlType>(want.id)), traits);
  }
}

TEST(GgmlTypeTest, UnknownAndRetiredIdsAreNull) {
  int known = 0;
  for (uint32_t id = 0; id < 64; ++id) {
    if (FindGgmlType(id) != nullptr) ++known;
  }
  EXPECT_EQ(known, static_cast<int>(std::size(kGgmlTypes)));
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 1000u,
                      std::numeric_limits<uint32_t>::max()}) {
    EXPECT_EQ(FindGgmlType(id), nullptr) << id;
  }
}

TEST(GgmlTypeTest, RowBytes) {
  EXPECT_EQ(*GgmlRowBytes(GgmlType::kF32, 3), 12u);
  EXPECT_EQ(*GgmlRowBytes(GgmlType::kBF16, 0), 0u);
  EXPECT_EQ(*GgmlRowBytes(GgmlType::kQ4_K, 4096), 16u * 144);
  EXPECT_EQ(*GgmlRowBytes(GgmlType::kQ8_0, 64), 68u);
  EXPECT_EQ(*GgmlRowBytes(GgmlType::kTQ1_0, 256), 54u);
  // 2^61 - 1 doubles take 2^64 - 8 bytes; 2^61 take 2^64.
  EXPECT_EQ(*GgmlRowBytes(GgmlType::kF64, (int64_t{1} << 61) - 1),
            std::numeric_limits<uint64_t>::max() - 7);
  EXPECT_EQ(GgmlRowBytes(GgmlType::kF64, int64_t{1} << 61).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(GgmlRowBytes(GgmlType::kF32, std::numeric_limits<int64_t>::max())
                .status()
                .code(),
            absl::StatusCode::kOutOfRange);
}

TEST(GgmlTypeTest, RowBytesRejectsBadCounts) {
  const absl::Status partial = GgmlRowBytes(GgmlType::kQ4_K, 100).status();
  EXPECT_EQ(partial.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(partial.message().find("Q4_K"), absl::string_view::npos);
  EXPECT_EQ(GgmlRowBytes(GgmlType::kQ8_0, 33).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GgmlRowBytes(GgmlType::kF32, -1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GgmlRowBytes(GgmlType::kQ4_K, -256).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GgmlRowBytes(static_cast<GgmlType>(31), 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// ------------------------------------------------------- half, bfloat16

TEST(GgmlTypeTest, HalfToFloatIsExactForAllBitPatterns) {
  for (uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    const float got = HalfToFloat(h);
    const double want = RefHalf(h);
    if (std::isnan(want)) {
      // A nan keeps its sign and payload in the top mantissa bits.
      const uint32_t want_bits =
          (bits & 0x8000u) << 16 | 0x7F800000u | (bits & 0x3FFu) << 13;
      ASSERT_EQ(std::bit_cast<uint32_t>(got), want_bits) << std::hex << bits;
    } else {
      ASSERT_EQ(got, static_cast<float>(want)) << std::hex << bits;
      ASSERT_EQ(std::signbit(got), (bits & 0x8000) != 0) << std::hex << bits;
    }
  }
}

TEST(GgmlTypeTest, HalfToFloatEdgeCases) {
  EXPECT_EQ(HalfToFloat(0x0000), 0.0f);
  EXPECT_TRUE(std::signbit(HalfToFloat(0x8000)));
  EXPECT_EQ(HalfToFloat(0x0001), 0x1p-24f);  // smallest subnormal
  EXPECT_EQ(HalfToFloat(0x8001), -0x1p-24f);
  EXPECT_EQ(HalfToFloat(0x03FF), 1023 * 0x1p-24f);  // largest subnormal
  EXPECT_EQ(HalfToFloat(0x0400), 0x1p-14f);         // smallest normal
  EXPECT_EQ(HalfToFloat(0x3C00), 1.0f);
  EXPECT_EQ(HalfToFloat(0x3C01), 1.0f + 0x1p-10f);
  EXPECT_EQ(HalfToFloat(0xC000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x3555), 0x1.554p-2f);
  EXPECT_EQ(HalfToFloat(0x7BFF), 65504.0f);  // largest finite
  EXPECT_EQ(HalfToFloat(0x7C00), kInf);
  EXPECT_EQ(HalfToFloat(0xFC00), -kInf);
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7E00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7C01)));  // signalling pattern
  EXPECT_TRUE(std::isnan(HalfToFloat(0xFFFF)));
}

TEST(GgmlTypeTest, BFloat16ToFloat) {
  EXPECT_EQ(BFloat16ToFloat(0x0000), 0.0f);
  EXPECT_TRUE(std::signbit(BFloat16ToFloat(0x8000)));
  EXPECT_EQ(BFloat16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(BFloat16ToFloat(0xC040), -3.0f);
  EXPECT_EQ(BFloat16ToFloat(0x3FC0), 1.5f);
  EXPECT_EQ(BFloat16ToFloat(0x0001), 0x1p-133f);  // subnormal
  EXPECT_EQ(BFloat16ToFloat(0x0080), 0x1p-126f);  // smallest normal
  EXPECT_EQ(BFloat16ToFloat(0x7F7F), 0x1.FEp127f);
  EXPECT_EQ(BFloat16ToFloat(0x7F80), kInf);
  EXPECT_EQ(BFloat16ToFloat(0xFF80), -kInf);
  EXPECT_EQ(std::bit_cast<uint32_t>(BFloat16ToFloat(0x7FC1)), 0x7FC10000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(BFloat16ToFloat(0xFF81)), 0xFF810000u);
}

// ------------------------------------------------- dequantization checks

// One expected element: a * q + b, computed by the implementation either
// as two rounded float operations or as one fused multiply-add (compilers
// may contract); both are accepted and nothing else is.
struct Want {
  float a;
  float q;
  float b;
};

struct Case {
  std::vector<uint8_t> bytes;
  std::vector<Want> want;
};

void ExpectDequantizes(GgmlType type, const Case& c) {
  const int64_t n = static_cast<int64_t>(c.want.size());
  ASSERT_EQ(*GgmlRowBytes(type, n), c.bytes.size());
  // Also from odd addresses: the contract needs no alignment.
  for (size_t offset : {0, 1, 3}) {
    SCOPED_TRACE(offset);
    std::vector<uint8_t> src(offset + c.bytes.size());
    std::memcpy(src.data() + offset, c.bytes.data(), c.bytes.size());
    std::vector<float> got(n, -12345.0f);
    ASSERT_TRUE(DequantizeRow(type, src.data() + offset, got.data(), n).ok());
    int mismatches = 0;
    for (int64_t i = 0; i < n && mismatches < 8; ++i) {
      const Want& w = c.want[i];
      const float product = w.a * w.q;
      const float separate = product + w.b;
      const float fused = std::fma(w.a, w.q, w.b);
      if (got[i] != separate && got[i] != fused) {
        ++mismatches;
        ADD_FAILURE() << "element " << i << ": got " << got[i] << ", want "
                      << separate << " (" << w.a << " * " << w.q << " + " << w.b
                      << ")";
      }
    }
  }
}

class Rng {
 public:
  explicit Rng(uint32_t seed) : gen_(seed) {}
  int Int(int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(gen_);
  }
  // A half scale: mostly normal numbers of either sign in [2^-8, 2^6),
  // sometimes a subnormal.
  uint16_t HalfScale() {
    const int sign = Int(0, 1) << 15;
    const int exponent = Int(0, 7) == 0 ? 0 : Int(7, 20);
    return static_cast<uint16_t>(sign | exponent << 10 | Int(1, 0x3FF));
  }

 private:
  std::mt19937 gen_;
};

void PutU16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}

constexpr int kBlocks = 3;  // the last block is checked like the others

// Q4_0, 18 bytes: d | qs[16]; element i < 16 in the low nibble of qs[i],
// element i + 16 in its high nibble; value (q - 8) * d.
// Q4_1, 20 bytes: d | m | qs[16]; value q * d + m.
// IQ4_NL, 18 bytes: d | qs[16]; value d * level[q].
constexpr int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113};

// MXFP4, 17 bytes: e | qs[16]; value 2^(e - 127) * fp4[q], where fp4 is
// E2M1: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives for q >= 8.
constexpr float kFp4Levels[16] = {0,  0.5,  1,  1.5,  2,  3,  4,  6,
                                  -0, -0.5, -1, -1.5, -2, -3, -4, -6};

enum class Nibbles { kQ4_0, kQ4_1, kIQ4_NL, kMXFP4 };

Case MakeNibbleBlocks(Nibbles kind, Rng& rng) {
  const int bytes = kind == Nibbles::kQ4_1    ? 20
                    : kind == Nibbles::kMXFP4 ? 17
                                              : 18;
  Case c{std::vector<uint8_t>(kBlocks * bytes), {}};
  for (int b = 0; b < kBlocks; ++b) {
    uint8_t* blk = c.bytes.data() + b * bytes;
    const uint16_t d = rng.HalfScale();
    const uint16_t m = rng.HalfScale();
    // Exponents across the whole range, the ends included.
    const int e = b == 0 ? 0 : b == 1 ? 255 : rng.Int(1, 254);
    if (kind == Nibbles::kMXFP4) {
      blk[0] = static_cast<uint8_t>(e);
    } else {
      PutU16(blk, d);
    }
    if (kind == Nibbles::kQ4_1) PutU16(blk + 2, m);
    uint8_t* qs = blk + bytes - 16;
    int q[32];
    for (int i = 0; i < 32; ++i) q[i] = rng.Int(0, 15);
    for (int i = 0; i < 16; ++i) qs[i] = q[i] | q[i + 16] << 4;
    for (int i = 0; i < 32; ++i) {
      switch (kind) {
        case Nibbles::kQ4_0:
          c.want.push_back({Half(d), static_cast<float>(q[i] - 8), 0});
          break;
        case Nibbles::kQ4_1:
          c.want.push_back({Half(d), static_cast<float>(q[i]), Half(m)});
          break;
        case Nibbles::kIQ4_NL:
          c.want.push_back({Half(d), static_cast<float>(kIq4Levels[q[i]]), 0});
          break;
        case Nibbles::kMXFP4:
          // Scaled as 2^(e - 128) * (2 * level): exact, and finite at e = 255
          // where 2^(e - 127) alone would overflow a float.
          c.want.push_back(
              {std::ldexp(1.0f, e - 128), 2 * kFp4Levels[q[i]], 0});
          break;
      }
    }
  }
  return c;
}

TEST(DequantizeTest, Q4_0) {
  Rng rng(40);
  ExpectDequantizes(GgmlType::kQ4_0, MakeNibbleBlocks(Nibbles::kQ4_0, rng));
}

TEST(DequantizeTest, MXFP4) {
  Rng rng(39);
  ExpectDequantizes(GgmlType::kMXFP4, MakeNibbleBlocks(Nibbles::kMXFP4, rng));
}

// E8M0 is a bare exponent: byte e is 2^(e - 127); the half ggml scales
// MXFP4's doubled levels by is 2^(e - 128), subnormal below e = 2.
TEST(DequantizeTest, E8M0HalfIsHalfOfTwoToTheExponent) {
  for (int e = 0; e < 256; ++e) {
    EXPECT_EQ(static_cast<double>(E8M0HalfToFloat(static_cast<uint8_t>(e))),
              std::pow(2.0, e - 127) / 2)
        << "e = " << e;
  }
}

TEST(DequantizeTest, Q4_1) {
  Rng rng(41);
  ExpectDequantizes(GgmlType::kQ4_1, MakeNibbleBlocks(Nibbles::kQ4_1, rng));
}

TEST(DequantizeTest, IQ4_NL) {
  Rng rng(42);
  ExpectDequantizes(GgmlType::kIQ4_NL, MakeNibbleBlocks(Nibbles::kIQ4_NL, rng));
}

// Q5_0, 22 bytes: d | qh (u32 LE) | qs[16]; bit 4 of element i is bit i of
// qh, the low 4 bits pack as in Q4_0; value (q - 16) * d.
// Q5_1, 24 bytes: d | m | qh | qs[16]; value q * d + m.
Case MakeQ5Blocks(bool with_min, Rng& rng) {
  const int bytes = with_min ? 24 : 22;
  Case c{std::vector<uint8_t>(kBlocks * bytes), {}};
  for (int b = 0; b < kBlocks; ++b) {
    uint8_t* blk = c.bytes.data() + b * bytes;
    const uint16_t d = rng.HalfScale();
    const uint16_t m = rng.HalfScale();
    PutU16(blk, d);
    if (with_min) PutU16(blk + 2, m);
    uint8_t* qh = blk + (with_min ? 4 : 2);
    uint8_t* qs = qh + 4;
    int q[32];
    for (int i = 0; i < 32; ++i) {
      q[i] = rng.Int(0, 31);
      qh[i / 8] |= (q[i] >> 4) << (i % 8);
    }
    for (int i = 0; i < 16; ++i) qs[i] = (q[i] & 15) | (q[i + 16] & 15) << 4;
    for (int i = 0; i < 32; ++i) {
      if (with_min) {
        c.want.push_back({Half(d), static_cast<float>(q[i]), Half(m)});
      } else {
        c.want.push_back({Half(d), static_cast<float>(q[i] - 16), 0});
      }
    }
  }
  return c;
}

TEST(DequantizeTest, Q5_0) {
  Rng rng(50);
  ExpectDequantizes(GgmlType::kQ5_0, MakeQ5Blocks(false, rng));
}

TEST(DequantizeTest, Q5_1) {
  Rng rng(51);
  ExpectDequantizes(GgmlType::kQ5_1, MakeQ5Blocks(true, rng));
}

// Q8_0, 34 bytes: d | int8 qs[32]. Q8_1, 36 bytes: d | s | int8 qs[32].
// Value q * d.
Case MakeQ8Blocks(bool with_sum, Rng& rng) {
  const int bytes = with_sum ? 36 : 34;
  Case c{std::vector<uint8_t>(kBlocks * bytes), {}};
  for (int b = 0; b < kBlocks; ++b) {
    uint8_t* blk = c.bytes.data() + b * bytes;
    const uint16_t d = rng.HalfScale();
    PutU16(blk, d);
    if (with_sum) PutU16(blk + 2, rng.HalfScale());
    for (int i = 0; i < 32; ++i) {
      const int q = i == 0 ? -128 : i == 1 ? 127 : rng.Int(-128, 127);
      blk[bytes - 32 + i] = static_cast<uint8_t>(static_cast<int8_t>(q));
      c.want.push_back({Half(d), static_cast<float>(q), 0});
    }
  }
  return c;
}

TEST(DequantizeTest, Q8_0) {
  Rng rng(80);
  ExpectDequantizes(GgmlType::kQ8_0, MakeQ8Blocks(false, rng));
}

TEST(DequantizeTest, Q8_1) {
  Rng rng(81);
  ExpectDequantizes(GgmlType::kQ8_1, MakeQ8Blocks(true, rng));
}

// Super-blocks order their 256 elements as e = 128h + 32k + l (h half,
// k quarter, l lane); 2-bit fields of element e sit in bits 2k of byte
// 32h + l of the 64-byte qs array.

// Q2_K, 84 bytes: scales[16] (scale low nibble, min high nibble, one byte
// per 16 elements) | qs[64] | d | dmin.
// Value (d * scale) * q - (dmin * min).
TEST(DequantizeTest, Q2_K) {
  Rng rng(2);
  Case c{std::vector<uint8_t>(kBlocks * 84), {}};
  for (int b = 0; b < kBlocks; ++b) {
    uint8_t* blk = c.bytes.data() + b * 84;
    const uint16_t d = rng.HalfScale();
    const uint16_t dmin = rng.HalfScale();
    PutU16(blk + 80, d);
    PutU16(blk + 82, dmin);
    int scale[16], min[16];
    for (int g = 0; g < 16; ++g) {
      scale[g] = rng.Int(0, 15);
      min[g] = rng.Int(0, 15);
      blk[g] = scale[g] | min[g] << 4;
    }
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, k = e % 128 / 32, l = e % 32;
      const int q = rng.Int(0, 3);
      blk[16 + 32 * h + l] |= q << (2 * k);
      c.want.push_back({Half(d) * scale[e / 16], static_cast<float>(q),
                        -(Half(dmin) * min[e / 16])});
    }
  }
  ExpectDequantizes(GgmlType::kQ2_K, c);
}

// Q3_K, 110 bytes: hmask[32] | qs[64] | scales[12] | d. A quant q in
// [-4, 3] is stored as u = q + 4: u's low 2 bits in qs, bit 2 as bit
// (4h + k) of hmask[l]. The 6-bit scale s of group j (16 elements) keeps its
// low nibble in scales[j % 8] (low nibble for j < 8, high for j >= 8) and
// its top 2 bits in bits 2 * (j / 4) of scales[8 + j % 4].
// Value (d * (s - 32)) * q.
TEST(DequantizeTest, Q3_K) {
  Rng rng(3);
  Case c{std::vector<uint8_t>(kBlocks * 110), {}};
  for (int b = 0; b < kBlocks; ++b) {
    uint8_t* blk = c.bytes.data() + b * 110;
    uint8_t* hmask = blk;
    uint8_t* qs = blk + 32;
    uint8_t* scales = blk + 96;
    const uint16_t d = rng.HalfScale();
    PutU16(blk + 108, d);
    int s[16];
    for (int j = 0; j < 16; ++j) {
      s[j] = j == 0 ? 0 : j == 1 ? 63 : rng.Int(0, 63);
      scales[j % 8] |= (s[j] & 15) << (j < 8 ? 0 : 4);
      scales[8 + j % 4] |= (s[j] >> 4) << (2 * (j / 4));
    }
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, k = e % 128 / 32, l = e % 32;
      const int q = rng.Int(-4, 3);
      const int u = q + 4;
      qs[32 * h + l] |= (u & 3) << (2 * k);
      hmask[l] |= (u >> 2) << (4 * h + k);
      c.want.push_back({Half(d) * static_cast<float>(s[e / 16] - 32),
                        static_cast<float>(q), 0});
    }
  }
  ExpectDequantizes(GgmlType::kQ3_K, c);
}

// The 12-byte scales of Q4_K and Q5_K: 6-bit scale sc[j] and min mn[j] for
// the 8 sub-blocks of 32. For j < 4: byte j = sc[j] | top2(sc[j + 4]) << 6,
// byte j + 4 = mn[j] | top2(mn[j + 4]) << 6, byte j + 8 = low4(sc[j + 4]) |
// low4(mn[j + 4]) << 4.
void PackK4Scales(const int* sc, const int* mn, uint8_t* out) {
  for (int j = 0; j < 4; ++j) {
    out[j] = sc[j] | (sc[j + 4] >> 4) << 6;
    out[j + 4] = mn[j] | (mn[j + 4] >> 4) << 6;
    out[j + 8] = (sc[j + 4] & 15) | (mn[j + 4] & 15) << 4;
  }
}

// Q4_K, 144 bytes: d | dmin | scales[12] | qs[128]. Element e of chunk
// c = e / 64: low nibble of qs[32c + e % 32] when e % 64 < 32, else the high
// nibble. Q5_K, 176 bytes: d | dmin | scales[12] | qh[32] | qs[128], the
// same nibbles plus bit 4 of element e as bit e / 32 of qh[e % 32].
// Value (d * sc) * q - (dmin * mn) for the element's sub-block e / 32.
Case MakeKBlocks(bool five_bit, Rng& rng) {
  const int bytes = five_bit ? 176 : 144;
  Case c{std::vector<uint8_t>(kBlocks * bytes), {}};
  for (int b = 0; b < kBlocks; ++b) {
    uint8_t* blk = c.bytes.data() + b * bytes;
    const uint16_t d = rng.HalfScale();
    const uint16_t dmin = rng.HalfScale();
    PutU16(blk, d);
    PutU16(blk + 2, dmin);
    int sc[8], mn[8];
    for (int j = 0; j < 8; ++j) {
      sc[j] = j == 7 ? 63 : rng.Int(0, 63);
      mn[j] = j == 6 ? 63 : rng.Int(0, 63);
    }
    PackK4Scales(sc, mn, blk + 4);
    uint8_t* qh = blk + 16;
    uint8_t* qs = blk + (five_bit ? 48 : 16);
    for (int e = 0; e < 256; ++e) {
      const int q = rng.Int(0, five_bit ? 31 : 15);
      qs[32 * (e / 64) + e % 32] |= (q & 15) << (e % 64 < 32 ? 0 : 4);
      if (five_bit) qh[e % 32] |= (q >> 4) << (e / 32);
      c.want.push_back({Half(d) * sc[e / 32], static_cast<float>(q),
                        -(Half(dmin) * mn[e / 32])});
    }
  }
  return c;
}

TEST(DequantizeTest, Q4_K) {
  Rng rng(4);
  ExpectDequantizes(GgmlType::kQ4_K, MakeKBlocks(false, rng));
}

TEST(DequantizeTest, Q5_K) {
  Rng rng(5);
  ExpectDequantizes(GgmlType::kQ5_K, MakeKBlocks(true, rng));
}

// Q6_K, 210 bytes: ql[128] | qh[64] | int8 scales[16] | d. A 6-bit q of
// element e = 128h + 32k + l: its low nibble in ql[64h + 32(k % 2) + l]
// (low nibble for k < 2, high for k >= 2), its top 2 bits in bits 2k of
// qh[32h + l]. Value (d * scales[e / 16]) * (q - 32).
TEST(DequantizeTest, Q6_K) {
  Rng rng(6);
  Case c{std::vector<uint8_t>(kBlocks * 210), {}};
  for (int b = 0; b < kBlocks; ++b) {
    uint8_t* blk = c.bytes.data() + b * 210;
    uint8_t* ql = blk;
    uint8_t* qh = blk + 128;
    const uint16_t d = rng.HalfScale();
    PutU16(blk + 208, d);
    int scale[16];
    for (int g = 0; g < 16; ++g) {
      scale[g] = g == 0 ? -128 : g == 1 ? 127 : rng.Int(-128, 127);
      blk[192 + g] = static_cast<uint8_t>(static_cast<int8_t>(scale[g]));
    }
    for (int e = 0; e < 256; ++e) {
      const int h = e / 128, k = e % 128 / 32, l = e % 32;
      const int q = e == 0 ? 0 : e == 1 ? 63 : rng.Int(0, 63);
      ql[64 * h + 32 * (k % 2) + l] |= (q & 15) << (k < 2 ? 0 : 4);
      qh[32 * h + l] |= (q >> 4) << (2 * k);
      c.want.push_back(
          {Half(d) * scale[e / 16], static_cast<float>(q - 32), 0});
    }
  }
  ExpectDequantizes(GgmlType::kQ6_K, c);
}

// Q8_K, 292 bytes: d (f32) | int8 qs[256] | int16 bsums[16]. Value d * q.
TEST(DequantizeTest, Q8_K) {
  Rng rng(8);
  Case c{std::vector<uint8_t>(kBlocks * 292), {}};
  for (int b = 0; b < kBlocks; ++b) {
    uint8_t* blk = c.bytes.data() + b * 292;
    const float d = static_cast<float>(rng.Int(-1000000, 1000000)) * 1e-7f;
    std::memcpy(blk, &d, 4);
    int sums[16] = {};
    for (int e = 0; e < 256; ++e) {
      const int q = rng.Int(-128, 127);
      blk[4 + e] = static_cast<uint8_t>(static_cast<int8_t>(q));
      sums[e / 16] += q;
      c.want.push_back({d, static_cast<float>(q), 0});
    }
    for (int g = 0; g < 16; ++g) {
      PutU16(blk + 260 + 2 * g, static_cast<uint16_t>(sums[g]));
    }
  }
  ExpectDequantizes(GgmlType::kQ8_K, c);
}

// IQ4_XS, 136 bytes: d | scales_h (u16) | scales_l[4] | qs[128]. Sub-block
// j's 6-bit scale s: low nibble in nibble j % 2 of scales_l[j / 2], top 2
// bits in bits 2j of scales_h; its 32 quants pack as an IQ4_NL block in
// qs[16j ...]. Value (d * (s - 32)) * level[q].
TEST(DequantizeTest, IQ4_XS) {
  Rng rng(23);
  Case c{std::vector<uint8_t>(kBlocks * 136), {}};
  for (int b = 0; b < kBlocks; ++b) {
    uint8_t* blk = c.bytes.data() + b * 136;
    const uint16_t d = rng.HalfScale();
    PutU16(blk, d);
    uint16_t scales_h = 0;
    for (int j = 0; j < 8; ++j) {
      const int s = rng.Int(0, 63);
      blk[4 + j / 2] |= (s & 15) << (4 * (j % 2));
      scales_h |= (s >> 4) << (2 * j);
      int q[32];
      for (int i = 0; i < 32; ++i) q[i] = rng.Int(0, 15);
      for (int i = 0; i < 16; ++i) blk[8 + 16 * j + i] = q[i] | q[i + 16] << 4;
      for (int i = 0; i < 32; ++i) {
        c.want.push_back({Half(d) * static_cast<float>(s - 32),
                          static_cast<float>(kIq4Levels[q[i]]), 0});
      }
    }
    PutU16(blk + 2, scales_h);
  }
  ExpectDequantizes(GgmlType::kIQ4_XS, c);
}

// TQ1_0, 54 bytes: qs[48] | qh[4] | d. Ternary t in {-1, 0, 1} stored as
// digit u = t + 1; a byte holds 5 digits u0..u4 (u0 most significant) as
// ceil(v * 256 / 243), v = sum(u_n * 3^(4 - n)). Digit n of qs[m] is element
// 32n + m for m < 32 and 160 + 16n + (m - 32) for m >= 32; digit n < 4 of
// qh[j] is element 240 + 4n + j (its fifth digit is 0). Value t * d.
TEST(DequantizeTest, TQ1_0) {
  Rng rng(34);
  Case c{std::vector<uint8_t>(kBlocks * 54), {}};
  for (int b = 0; b < kBlocks; ++b) {
    uint8_t* blk = c.bytes.data() + b * 54;
    const uint16_t d = rng.HalfScale();
    PutU16(blk + 52, d);
    int t[256];
    for (int e = 0; e < 256; ++e) t[e] = rng.Int(-1, 1);
    auto pack = [&](auto element_of_digit, int digits) {
      int v = 0;
      for (int n = 0; n < 5; ++n) {
        v = 3 * v + (n < digits ? t[element_of_digit(n)] + 1 : 0);
      }
      return static_cast<uint8_t>((v * 256 + 242) / 243);
    };
    for (int m = 0; m < 32; ++m) {
      blk[m] = pack([m](int n) { return 32 * n + m; }, 5);
    }
    for (int m = 32; m < 48; ++m) {
      blk[m] = pack([m](int n) { return 160 + 16 * n + (m - 32); }, 5);
    }
    for (int j = 0; j < 4; ++j) {
      blk[48 + j] = pack([j](int n) { return 240 + 4 * n + j; }, 4);
    }
    for (int e = 0; e < 256; ++e) {
      c.want.push_back({Half(d), static_cast<float>(t[e]), 0});
    }
  }
  ExpectDequantizes(GgmlType::kTQ1_0, c);
}

// TQ2_0, 66 bytes: qs[64] | d. Digit u = t + 1 of element e = 128c + 32k + m
// in bits 2k of qs[32c + m]. Value t * d.
TEST(DequantizeTest, TQ2_0) {
  Rng rng(35);
  Case c{std::vector<uint8_t>(kBlocks * 66), {}};
  for (int b = 0; b < kBlocks; ++b) {
    uint8_t* blk = c.bytes.data() + b * 66;
    const uint16_t d = rng.HalfScale();
    PutU16(blk + 64, d);
    for (int e = 0; e < 256; ++e) {
      const int t = rng.Int(-1, 1);
      blk[32 * (e / 128) + e % 32] |= (t + 1) << (2 * (e % 128 / 32));
      c.want.push_back({Half(d), static_cast<float>(t), 0});
    }
  }
  ExpectDequantizes(GgmlType::kTQ2_0, c);
}

// ------------------------------------------------------- plain types

template <typename T>
Case PlainCase(const std::vector<T>& values, const std::vector<float>& want) {
  Case c{std::vector<uint8_t>(values.size() * sizeof(T)), {}};
  std::memcpy(c.bytes.data(), values.data(), c.bytes.size());
  for (float w : want) c.want.push_back({w, 1.0f, 0});
  return c;
}

TEST(DequantizeTest, F32CopiesBits) {
  const std::vector<float> values = {1.5f, -0.0f, 0x1p-149f, -kInf, 3e38f};
  ExpectDequantizes(GgmlType::kF32, PlainCase(values, values));
  const float nan = std::bit_cast<float>(0x7FC12345u);
  float got = 0;
  ASSERT_TRUE(DequantizeRow(GgmlType::kF32, &nan, &got, 1).ok());
  EXPECT_EQ(std::bit_cast<uint32_t>(got), 0x7FC12345u);
}

TEST(DequantizeTest, F16) {
  const std::vector<uint16_t> values = {0x3C00, 0xC000, 0x0001, 0x83FF,
                                        0x7BFF, 0x7C00, 0xFC00, 0x0000};
  const std::vector<float> want = {1.0f,     -2.0f, 0x1p-24f, -1023 * 0x1p-24f,
                                   65504.0f, kInf,  -kInf,    0.0f};
  ExpectDequantizes(GgmlType::kF16, PlainCase(values, want));
  const uint16_t nan = 0x7E01;
  float got = 0;
  ASSERT_TRUE(DequantizeRow(GgmlType::kF16, &nan, &got, 1).ok());
  EXPECT_TRUE(std::isnan(got));
}

TEST(DequantizeTest, BF16) {
  const std::vector<uint16_t> values = {0x3F80, 0xC040, 0x0001, 0x7F80, 0x4049};
  const std::vector<float> want = {1.0f, -3.0f, 0x1p-133f, kInf, 0x1.92p1f};
  ExpectDequantizes(GgmlType::kBF16, PlainCase(values, want));
}

TEST(DequantizeTest, F64RoundsToNearestFloat) {
  const std::vector<double> values = {1.5,    -0.1,  1e300,
                                      -1e300, 1e-50, 16777217.0};
  const std::vector<float> want = {1.5f, -0.1f, kInf, -kInf, 0.0f, 16777216.0f};
  ExpectDequantizes(GgmlType::kF64, PlainCase(values, want));
}

TEST(DequantizeTest, IntegersConvertByValue) {
  ExpectDequantizes(GgmlType::kI8,
                    PlainCase<int8_t>({-128, -1, 0, 127}, {-128, -1, 0, 127}));
  ExpectDequantizes(GgmlType::kI16, PlainCase<int16_t>({-32768, 32767, -7},
                                                       {-32768, 32767, -7}));
  ExpectDequantizes(GgmlType::kI32,
                    PlainCase<int32_t>({-2147483647 - 1, 16777217, 5},
                                       {-0x1p31f, 16777216.0f, 5.0f}));
  ExpectDequantizes(GgmlType::kI64, PlainCase<int64_t>({int64_t{1} << 40, -3},
                                                       {0x1p40f, -3.0f}));
}

// ------------------------------------------------------ contract checks

TEST(DequantizeTest, CanDequantizeMatchesDequantizeRow) {
  for (const ExpectedTraits& t : kGgmlTypes) {
    SCOPED_TRACE(t.name);
    const GgmlTypeTraits& traits =
        GetGgmlTypeTraits(static_cast<GgmlType>(t.id));
    const std::vector<uint8_t> zeros(traits.type_size, 0);
    std::vector<float> out(traits.block_size, -1.0f);
    const absl::Status status =
        DequantizeRow(traits.type, zeros.data(), out.data(), traits.block_size);
    if (traits.can_dequantize) {
      EXPECT_TRUE(status.ok()) << status;
    } else {
      EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented);
      EXPECT_NE(status.message().find(t.name), absl::string_view::npos)
          << status;
    }
  }
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16,
                        GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    EXPECT_TRUE(GetGgmlTypeTraits(type).can_dequantize);
  }
}

TEST(DequantizeTest, RejectsBadArguments) {
  std::vector<uint8_t> src(1024);
  std::vector<float> dst(512);
  EXPECT_EQ(DequantizeRow(GgmlType::kQ4_K, src.data(), dst.data(), 100).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DequantizeRow(GgmlType::kQ4_K, src.data(), dst.data(), -256).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      DequantizeRow(static_cast<GgmlType>(5), src.data(), dst.data(), 1).code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DequantizeRow(GgmlType::kF32, nullptr, dst.data(), 4).code(),
            absl::StatusCode::kInvalidArgument);
  // An empty row is fine and writes nothing.
  dst[0] = 7.0f;
  EXPECT_TRUE(DequantizeRow(GgmlType::kQ4_K, nullptr, dst.data(), 0).ok());
  EXPECT_EQ(dst[0], 7.0f);
}

TEST(DequantizeTest, PrefixOfARowMatchesTheWholeRow) {
  Rng rng(99);
  const Case c = MakeKBlocks(false, rng);
  std::vector<float> whole(3 * 256), first(256 + 1, 7.0f);
  ASSERT_TRUE(
      DequantizeRow(GgmlType::kQ4_K, c.bytes.data(), whole.data(), 768).ok());
  ASSERT_TRUE(
      DequantizeRow(GgmlType::kQ4_K, c.bytes.data(), first.data(), 256).ok());
  for (int i = 0; i < 256; ++i) ASSERT_EQ(first[i], whole[i]) << i;
  EXPECT_EQ(first[256], 7.0f);  // nothing written past n
}

}  // namespace
}  // namespace paceline::engine
