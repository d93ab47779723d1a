// MXFP4 weights through MatMul at every ISA level this machine runs: against
// a double reference that decodes the blocks from the format's definition
// (E8M0 scale 2^(e - 127), E2M1 values) and quantizes the activations per
// matmul_internal.h; against the float product of the dequantized matrix
// (the activation rounding bounded from its definition); SIMD levels
// against the scalar one; batch invariance within a level.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_features.h"
#include "engine/cpu/kernels/matmul.h"
#include "engine/cpu/thread_pool.h"
#include "engine/gguf/ggml_type.h"
#include "engine/gguf/quantize.h"
#include "gtest/gtest.h"

namespace paceline::engine::cpu {
namespace {

constexpr int64_t kBlockBytes = 17;  // e | qs[16]

// E2M1: sign bit 3, then 2 exponent bits (bias 1) and 1 mantissa bit.
double E2M1(int nibble) {
  const int e = (nibble >> 1) & 3;
  const int m = nibble & 1;
  const double magnitude = e == 0 ? 0.5 * m : std::ldexp(1.0 + 0.5 * m, e - 1);
  return nibble & 8 ? -magnitude : magnitude;
}

// Element c of an MXFP4 row: block c / 32, byte 1 + c % 16, low nibble for
// c % 32 < 16.
double WeightAt(const uint8_t* row, int64_t c) {
  const uint8_t* block = row + c / 32 * kBlockBytes;
  const int j = static_cast<int>(c % 32);
  const int nibble = j < 16 ? block[1 + j] & 0xF : block[1 + j - 16] >> 4;
  return std::ldexp(1.0, block[0] - 127) * E2M1(nibble);
}

std::vector<IsaLevel> Levels() {
  std::vector<IsaLevel> levels;
  for (int l = 0; l <= static_cast<int>(GetCpuFeatures().max_level); ++l) {
    levels.push_back(static_cast<IsaLevel>(l));
  }
  return levels;
}

class MatMulMxfp4Test : public testing::Test {
 protected:
  void TearDown() override { SetIsaLevelCap(IsaLevel::kAvx512); }
};

// Random blocks: exponents around 127 (products stay far from overflow),
// every nibble; row_bytes may pad rows (0xEE, never read).
std::vector<uint8_t> RandomWeights(int64_t rows, int64_t cols, size_t row_bytes,
                                   std::mt19937& rng) {
  std::vector<uint8_t> w(rows * row_bytes, 0xEE);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < cols / 32; ++b) {
      uint8_t* block = w.data() + r * row_bytes + b * kBlockBytes;
      block[0] = static_cast<uint8_t>(118 + rng() % 16);
      for (int j = 1; j < kBlockBytes; ++j)
        block[j] = static_cast<uint8_t>(rng());
    }
  }
  return w;
}

// Activations in [-1, 1]; token 1 has an all-zero first block and an
// outlier, as real activations do.
std::vector<float> RandomActivations(int64_t n_tokens, int64_t cols,
                                     std::mt19937& rng) {
  std::vector<float> x(n_tokens * cols);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (float& v : x) v = unit(rng);
  if (n_tokens > 1) {
    for (int64_t c = 0; c < 32; ++c) x[cols + c] = 0;
    if (cols > 40) x[cols + 40] = 37.5f;
  }
  return x;
}

// The activation quantization of matmul_internal.h, from its definition:
// per block of 32, d = f16(max|x| / 127), q = round-half-even(x * 127 /
// max|x|); xq = q * d. Also each block's d.
void QuantizeActs(const float* x, int64_t cols, std::vector<double>& xq,
                  std::vector<double>& d) {
  xq.resize(cols);
  d.resize(cols / 32);
  for (int64_t b = 0; b < cols / 32; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j)
      amax = std::max(amax, std::fabs(x[b * 32 + j]));
    d[b] = HalfToFloat(FloatToHalf(amax / 127.0f));
    const float inv = amax != 0 ? 127.0f / amax : 0.0f;
    for (int j = 0; j < 32; ++j) {
      xq[b * 32 + j] = std::nearbyint(x[b * 32 + j] * inv) * d[b];
    }
  }
}

struct Shape {
  int64_t rows, cols, n_tokens;
  int threads;
};

// For each output: the double product with the quantized activations, its
// sum |w xq| (the scale of float rounding), the float product with the
// dequantized weights and a bound on their difference (each activation is
// within 0.5 d + 127 d 2^-11 of its quantized value).
struct Expected {
  std::vector<double> y, abs_sum, y_float, act_bound;
};

Expected Reference(const std::vector<uint8_t>& w, size_t row_bytes,
                   const std::vector<float>& x, const Shape& s) {
  Expected e;
  const size_t n = s.n_tokens * s.rows;
  e.y.assign(n, 0);
  e.abs_sum.assign(n, 0);
  e.y_float.assign(n, 0);
  e.act_bound.assign(n, 0);
  std::vector<double> xq, d;
  std::vector<float> deq(s.cols);
  for (int64_t t = 0; t < s.n_tokens; ++t) {
    QuantizeActs(x.data() + t * s.cols, s.cols, xq, d);
    for (int64_t r = 0; r < s.rows; ++r) {
      const uint8_t* row = w.data() + r * row_bytes;
      EXPECT_TRUE(
          DequantizeRow(GgmlType::kMXFP4, row, deq.data(), s.cols).ok());
      const size_t i = t * s.rows + r;
      for (int64_t c = 0; c < s.cols; ++c) {
        const double wc = WeightAt(row, c);
        e.y[i] += wc * xq[c];
        e.abs_sum[i] += std::fabs(wc * xq[c]);
        e.y_float[i] += static_cast<double>(deq[c]) * x[t * s.cols + c];
        e.act_bound[i] += std::fabs(wc) * d[c / 32] * (0.5 + 127.0 / 2048);
      }
    }
  }
  return e;
}

// MatMul of the shape at every level: each within float rounding of the
// reference and of the scalar level, and within the activation bound of
// the float product of the dequantized matrix.
void CheckShape(const Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  const size_t row_bytes = s.cols / 32 * kBlockBytes + (seed % 2) * 3;
  ASSERT_EQ(*GgmlRowBytes(GgmlType::kMXFP4, s.cols), s.cols / 32 * 17u);
  const std::vector<uint8_t> w = RandomWeights(s.rows, s.cols, row_bytes, rng);
  const std::vector<float> x = RandomActivations(s.n_tokens, s.cols, rng);
  const Expected e = Reference(w, row_bytes, x, s);
  const WeightView view{GgmlType::kMXFP4, s.rows, s.cols, w.data(), row_bytes};
  ThreadPool pool(s.threads);
  MatMulScratch scratch;
  std::vector<float> scalar_y;
  for (IsaLevel level : Levels()) {
    SetIsaLevelCap(level);
    SCOPED_TRACE(absl::StrCat("rows ", s.rows, " cols ", s.cols, " tokens ",
                              s.n_tokens, " threads ", s.threads, " isa ",
                              IsaLevelName(level)));
    std::vector<float> y(s.n_tokens * s.rows, std::nanf(""));
    ASSERT_TRUE(
        MatMul(view, x.data(), s.n_tokens, y.data(), pool, scratch).ok());
    int bad = 0;
    for (size_t i = 0; i < y.size() && bad < 5; ++i) {
      // Float sums of cols / 32 block products: ~2^-18 of sum|w xq| covers
      // any order and FMA contraction.
      const double tol = 1e-30 + 4e-6 * e.abs_sum[i];
      const double float_tol =
          e.act_bound[i] + tol + 1e-6 * std::fabs(e.y_float[i]);
      const bool ok =
          std::fabs(y[i] - e.y[i]) <= tol &&
          std::fabs(y[i] - e.y_float[i]) <= float_tol &&
          (scalar_y.empty() || std::fabs(y[i] - scalar_y[i]) <= 2 * tol);
      if (!ok) {
        ADD_FAILURE() << "t " << i / s.rows << " r " << i % s.rows << ": got "
                      << y[i] << ", reference " << e.y[i] << " (tol " << tol
                      << "), float product " << e.y_float[i] << " (tol "
                      << float_tol << ")"
                      << (scalar_y.empty()
                              ? ""
                              : absl::StrCat(", scalar ", scalar_y[i]));
        ++bad;
      }
    }
    if (level == IsaLevel::kScalar) scalar_y = y;
  }
}

TEST_F(MatMulMxfp4Test, MatchesTheFormatOnOddShapes) {
  uint32_t seed = 1;
  // Rows not a multiple of 16, odd block counts (the last block alone in
  // the AVX-512 pair step), 1 to 9 tokens (the 4-token tile and its tails).
  for (const Shape& s :
       {Shape{1, 32, 1, 1}, Shape{7, 96, 3, 1}, Shape{17, 160, 5, 2},
        Shape{33, 64, 2, 2}, Shape{5, 2880, 9, 1}, Shape{19, 352, 4, 2}}) {
    CheckShape(s, seed++);
  }
}

TEST_F(MatMulMxfp4Test, LargeShapeAcrossThreads) {
  CheckShape(Shape{300, 2880, 1, 2}, 11);
  CheckShape(Shape{129, 1024, 6, 2}, 12);
}

// A token's output has the same bits alone as in a batch, at every level.
TEST_F(MatMulMxfp4Test, EveryTokenGetsTheSameBitsInAnyBatch) {
  constexpr int64_t kRows = 37, kCols = 608, kTokens = 7;
  std::mt19937 rng(5);
  const std::vector<uint8_t> w =
      RandomWeights(kRows, kCols, kCols / 32 * 17, rng);
  const std::vector<float> x = RandomActivations(kTokens, kCols, rng);
  const WeightView view{GgmlType::kMXFP4, kRows, kCols, w.data(),
                        static_cast<size_t>(kCols / 32 * 17)};
  ThreadPool pool(2);
  MatMulScratch scratch;
  for (IsaLevel level : Levels()) {
    SetIsaLevelCap(level);
    SCOPED_TRACE(IsaLevelName(level));
    std::vector<float> batch(kTokens * kRows);
    ASSERT_TRUE(
        MatMul(view, x.data(), kTokens, batch.data(), pool, scratch).ok());
    for (int64_t t = 0; t < kTokens; ++t) {
      std::vector<float> alone(kRows);
      ASSERT_TRUE(
          MatMul(view, x.data() + t * kCols, 1, alone.data(), pool, scratch)
              .ok());
      EXPECT_EQ(std::memcmp(alone.data(), batch.data() + t * kRows,
                            kRows * sizeof(float)),
                0)
          << "token " << t;
    }
  }
}

// Weights written by QuantizeRow multiply like the float matrix they came
// from, within MXFP4's rounding (at most a quarter of each block's largest
// magnitude per element, quantize.h) and the activations'.
TEST_F(MatMulMxfp4Test, QuantizedMatrixApproximatesTheFloatMatrix) {
  constexpr int64_t kRows = 24, kCols = 256;
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> wf(kRows * kCols);
  for (float& v : wf) v = normal(rng);
  std::vector<uint8_t> w(kRows * kCols / 32 * 17);
  for (int64_t r = 0; r < kRows; ++r) {
    ASSERT_TRUE(QuantizeRow(GgmlType::kMXFP4, wf.data() + r * kCols, kCols,
                            w.data() + r * kCols / 32 * 17)
                    .ok());
  }
  const std::vector<float> x = RandomActivations(1, kCols, rng);
  const WeightView view{GgmlType::kMXFP4, kRows, kCols, w.data(),
                        static_cast<size_t>(kCols / 32 * 17)};
  ThreadPool pool(1);
  MatMulScratch scratch;
  std::vector<float> y(kRows);
  ASSERT_TRUE(MatMul(view, x.data(), 1, y.data(), pool, scratch).ok());
  for (int64_t r = 0; r < kRows; ++r) {
    double exact = 0, bound = 0;
    for (int64_t b = 0; b < kCols / 32; ++b) {
      float amax = 0, xmax = 0;
      for (int j = 0; j < 32; ++j) {
        amax = std::max(amax, std::fabs(wf[r * kCols + b * 32 + j]));
        xmax = std::max(xmax, std::fabs(x[b * 32 + j]));
      }
      for (int j = 0; j < 32; ++j) {
        const double wv = wf[r * kCols + b * 32 + j], xv = x[b * 32 + j];
        exact += wv * xv;
        bound +=
            amax / 4 * std::fabs(xv) + (std::fabs(wv) + amax / 4) * xmax / 127;
      }
    }
    EXPECT_NEAR(y[r], exact, bound) << "row " << r;
  }
}

TEST_F(MatMulMxfp4Test, SupportedRowMajorOnly) {
  EXPECT_TRUE(MatMulSupports(GgmlType::kMXFP4));
  std::vector<uint8_t> w(16 * 17, 0);
  const WeightView rows{GgmlType::kMXFP4, 16, 32, w.data(), 17};
  EXPECT_FALSE(PackForMatMul(rows).ok());
  EXPECT_FALSE(MatMulPrefersPanels(GgmlType::kMXFP4, 32));
  WeightView panels = rows;
  panels.layout = WeightLayout::kPanels;
  std::vector<float> x(32, 1.0f), y(16, -7.0f);
  ThreadPool pool(1);
  MatMulScratch scratch;
  EXPECT_FALSE(MatMul(panels, x.data(), 1, y.data(), pool, scratch).ok());
  EXPECT_EQ(y[0], -7.0f);  // nothing written
  const WeightView partial{GgmlType::kMXFP4, 16, 48, w.data(), 17};
  EXPECT_FALSE(MatMul(partial, x.data(), 1, y.data(), pool, scratch).ok());
}

}  // namespace
}  // namespace paceline::engine::cpu
