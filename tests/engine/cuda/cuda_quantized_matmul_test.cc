// The quantized GEMV and dequantization kernels (kernels/quantized_matmul.h)
// against the CPU's DequantizeRow (engine/gguf/ggml_type.h) and a double dot
// product, for every block type the device keeps: Q8_0 / Q4_0 rows written by
// QuantizeRow (MXFP4 too, with the smallest scales set by hand), and
// K-quant super-blocks of random bytes (every bit pattern of
// scales, mins and quants is a valid block; only the f16 factors are set to
// finite values), times activations of each element type.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/cuda/kernels/quantized_matmul.h"
#include "engine/gguf/ggml_type.h"
#include "engine/gguf/quantize.h"
#include "gtest/gtest.h"
#include "tests/engine/cuda/cuda_test_util.h"

namespace paceline::engine::cuda {
namespace {

using testing::Download;
using testing::Encode;
using testing::ExpectClose;
using testing::Poisoned;
using testing::RoundAll;
using testing::Upload;

struct TypeCase {
  GgmlType file_type;
  GgmlType quant;
};

constexpr TypeCase kTypes[] = {
    {GgmlType::kQ8_0, GgmlType::kQ8_0}, {GgmlType::kQ4_0, GgmlType::kQ4_0},
    {GgmlType::kQ2_K, GgmlType::kQ2_K}, {GgmlType::kQ3_K, GgmlType::kQ3_K},
    {GgmlType::kQ4_K, GgmlType::kQ4_K}, {GgmlType::kQ5_K, GgmlType::kQ5_K},
    {GgmlType::kQ6_K, GgmlType::kQ6_K}, {GgmlType::kMXFP4, GgmlType::kMXFP4}};

// Byte offsets of a K-quant block's f16 factors (d, and dmin where the type
// has one), from ggml_type.cc's layouts.
std::vector<int> HalfFields(GgmlType q) {
  switch (q) {
    case GgmlType::kQ2_K:
      return {80, 82};
    case GgmlType::kQ3_K:
      return {108};
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
      return {0, 2};
    case GgmlType::kQ6_K:
      return {208};
    default:
      return {};
  }
}

class QuantizedMatmulTest : public testing::GpuTest,
                            public ::testing::WithParamInterface<GgmlType> {
 protected:
  GgmlType dtype() const { return GetParam(); }

  // (rows, cols) of `t` as bytes; *w gets the values DequantizeRow reads.
  std::vector<uint8_t> RandomMatrix(const TypeCase& t, int64_t rows,
                                    int64_t cols, std::vector<float>* w) {
    const int64_t row_bytes =
        cols / GgmlBlockElems(t.quant) * GgmlBlockBytes(t.quant);
    EXPECT_EQ(static_cast<size_t>(row_bytes),
              GetGgmlTypeTraits(t.file_type).type_size * cols /
                  GetGgmlTypeTraits(t.file_type).block_size);
    std::vector<uint8_t> bytes(rows * row_bytes);
    const std::vector<int> halves = HalfFields(t.quant);
    if (halves.empty()) {
      const std::vector<float> dense = Random(rows * cols);
      for (int64_t r = 0; r < rows; ++r) {
        EXPECT_TRUE(QuantizeRow(t.file_type, &dense[r * cols], cols,
                                &bytes[r * row_bytes])
                        .ok());
      }
      if (t.quant == GgmlType::kMXFP4) {
        // The scale's subnormal exponents (0, 1) and the first normal one
        // (2) in the first blocks, beside QuantizeRow's.
        for (uint8_t e = 0; e < 3 && e * 17u < bytes.size(); ++e) {
          bytes[e * 17u] = e;
        }
      }
    } else {
      for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng_());
      std::uniform_real_distribution<float> factor(-0.05f, 0.05f);
      for (size_t b = 0; b < bytes.size(); b += GgmlBlockBytes(t.quant)) {
        for (int off : halves) {
          const uint16_t h = FloatToHalf(factor(rng_));
          std::memcpy(&bytes[b + off], &h, sizeof(h));
        }
      }
    }
    w->resize(rows * cols);
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_TRUE(DequantizeRow(t.file_type, &bytes[r * row_bytes],
                                &(*w)[r * cols], cols)
                      .ok());
    }
    return bytes;
  }
};

TEST_P(QuantizedMatmulTest, DequantizeEqualsDequantizeRow) {
  constexpr int64_t kRows = 7, kCols = 256 * 3;
  for (const TypeCase& t : kTypes) {
    SCOPED_TRACE(GetGgmlTypeTraits(t.file_type).name);
    std::vector<float> w;
    DeviceBuffer d_w, d_dense;
    ASSERT_TRUE(Upload(RandomMatrix(t, kRows, kCols, &w), &d_w).ok());
    const size_t elem = GgmlBlockBytes(dtype());
    ASSERT_TRUE(Poisoned(kRows * kCols * elem, &d_dense).ok());
    ASSERT_EQ(LaunchDequantize(t.quant, d_w.get(), kRows, kCols, dtype(),
                               d_dense.get(), nullptr),
              cudaSuccess);
    // Bit for bit: the same operations as DequantizeRow, then one rounding.
    ExpectClose(Download(dtype(), d_dense, kRows * kCols), RoundAll(dtype(), w),
                0, 0, "dequantized");
    // Rows must be whole blocks.
    const int64_t block = GgmlBlockElems(t.quant);
    for (int64_t cols : {block / 2, block + 16}) {
      EXPECT_EQ(LaunchDequantize(t.quant, d_w.get(), kRows, cols, dtype(),
                                 d_dense.get(), nullptr),
                cudaErrorInvalidValue)
          << cols;
    }
  }
}

// 1..8 tokens, beta 0 and 1, into a y wider than the matrix (ldy > rows):
// the columns past `rows` keep their values.
TEST_P(QuantizedMatmulTest, GemvMatchesDequantizeRowDotProducts) {
  constexpr int64_t kRows = 37, kCols = 256 * 5, kLdy = kRows + 3;
  for (const TypeCase& t : kTypes) {
    SCOPED_TRACE(GetGgmlTypeTraits(t.file_type).name);
    std::vector<float> w;
    DeviceBuffer d_w;
    ASSERT_TRUE(Upload(RandomMatrix(t, kRows, kCols, &w), &d_w).ok());
    for (int64_t n : {1, 2, 3, 6}) {  // each kernel width, two partly used
      for (float beta : {0.0f, 1.0f}) {
        SCOPED_TRACE(n);
        const std::vector<float> x = RoundAll(dtype(), Random(n * kCols));
        const std::vector<float> y0 = Random(n * kLdy);
        std::vector<double> ref(y0.begin(), y0.end());
        std::vector<double> magnitude(n * kLdy, 0.0);  // sum of |terms|
        for (int64_t k = 0; k < n; ++k) {
          for (int64_t r = 0; r < kRows; ++r) {
            double sum = beta * y0[k * kLdy + r];
            double mag = std::fabs(sum);
            for (int64_t c = 0; c < kCols; ++c) {
              const double p =
                  static_cast<double>(w[r * kCols + c]) * x[k * kCols + c];
              sum += p;
              mag += std::fabs(p);
            }
            ref[k * kLdy + r] = sum;
            magnitude[k * kLdy + r] = mag;
          }
        }
        DeviceBuffer d_x, d_y;
        ASSERT_TRUE(Upload(Encode(dtype(), x), &d_x).ok());
        ASSERT_TRUE(Upload(y0, &d_y).ok());
        ASSERT_EQ(LaunchQuantizedGemv(t.quant, d_w.get(), kRows, kCols, dtype(),
                                      d_x.get(), n, beta, d_y.as<float>(), kLdy,
                                      nullptr),
                  cudaSuccess);
        // Float sums of 1,280 terms: within 1e-5 of the sum of their
        // magnitudes (float rounding gives ~1e-6); one wrong weight of
        // ~0.1 moves a sum by far more. Columns past kRows stay y0's.
        const std::vector<float> got = Download(GgmlType::kF32, d_y, n * kLdy);
        for (int64_t i = 0; i < n * kLdy; ++i) {
          if (i % kLdy >= kRows) {
            ASSERT_EQ(got[i], y0[i]) << "column " << i % kLdy;
          } else {
            ASSERT_NEAR(got[i], ref[i], 1e-5 * magnitude[i] + 1e-6)
                << "token " << i / kLdy << " row " << i % kLdy;
          }
        }
      }
    }
    DeviceBuffer d_y;
    ASSERT_TRUE(Poisoned(kLdy * sizeof(float), &d_y).ok());
    EXPECT_EQ(LaunchQuantizedGemv(t.quant, d_w.get(), kRows, kCols, dtype(),
                                  d_w.get(), 1, 0.0f, d_y.as<float>(),
                                  kRows - 1, nullptr),
              cudaErrorInvalidValue);
    EXPECT_EQ(LaunchQuantizedGemv(t.quant, d_w.get(), kRows, kCols, dtype(),
                                  d_w.get(), kMaxGemvTokens + 1, 0.0f,
                                  d_y.as<float>(), kLdy, nullptr),
              cudaErrorInvalidValue);
  }
}

// Rows gathered by token id, as DequantizeRow reads them (float, exact).
TEST_P(QuantizedMatmulTest, EmbeddingGathersDequantizedRows) {
  if (dtype() != GgmlType::kF32) GTEST_SKIP() << "no activation type";
  constexpr int64_t kVocab = 29, kDim = 256 * 2, kTokens = 11;
  for (const TypeCase& t : kTypes) {
    SCOPED_TRACE(GetGgmlTypeTraits(t.file_type).name);
    std::vector<float> w;
    DeviceBuffer d_table, d_tokens, d_out;
    ASSERT_TRUE(Upload(RandomMatrix(t, kVocab, kDim, &w), &d_table).ok());
    std::vector<int32_t> tokens(kTokens);
    for (int32_t& id : tokens) id = static_cast<int32_t>(rng_() % kVocab);
    tokens[0] = kVocab - 1;
    ASSERT_TRUE(Upload(tokens, &d_tokens).ok());
    ASSERT_TRUE(Poisoned(kTokens * kDim * sizeof(float), &d_out).ok());
    ASSERT_EQ(
        LaunchQuantizedEmbedding(t.quant, d_table.get(), d_tokens.as<int32_t>(),
                                 kTokens, kDim, d_out.as<float>(), nullptr),
        cudaSuccess);
    std::vector<float> want(kTokens * kDim);
    for (int64_t i = 0; i < kTokens; ++i) {
      std::copy(w.begin() + tokens[i] * kDim,
                w.begin() + (tokens[i] + 1) * kDim, want.begin() + i * kDim);
    }
    ExpectClose(Download(GgmlType::kF32, d_out, kTokens * kDim), want, 0, 0,
                "embedding");
    EXPECT_EQ(
        LaunchQuantizedEmbedding(t.quant, d_table.get(), d_tokens.as<int32_t>(),
                                 kTokens, 16, d_out.as<float>(), nullptr),
        cudaErrorInvalidValue);
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantizedMatmulTest,
                         ::testing::Values(GgmlType::kF32, GgmlType::kF16,
                                           GgmlType::kBF16),
                         [](const auto& info) {
                           return std::string(GgmlTypeName(info.param));
                         });

}  // namespace
}  // namespace paceline::engine::cuda
