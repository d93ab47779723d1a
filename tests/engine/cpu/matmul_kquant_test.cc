// K-quant matmuls (Q2_K .. Q6_K) against a reference built from the float
// dequantizer (DequantizeRow) and the Q8_K activation rule written out
// again from its specification (llama.cpp's quantize_row_q8_K), at every
// ISA level this machine runs.

#include "engine/cpu/kernels/matmul_kquant.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_features.h"
#include "engine/cpu/kernels/matmul.h"
#include "engine/cpu/thread_pool.h"
#include "engine/gguf/ggml_type.h"
#include "gtest/gtest.h"

namespace paceline::engine::cpu {
namespace {

constexpr GgmlType kKTypes[] = {GgmlType::kQ2_K, GgmlType::kQ3_K,
                                GgmlType::kQ4_K, GgmlType::kQ5_K,
                                GgmlType::kQ6_K};

std::vector<IsaLevel> Levels() {
  std::vector<IsaLevel> levels;
  for (int l = 0; l <= static_cast<int>(GetCpuFeatures().max_level); ++l) {
    levels.push_back(static_cast<IsaLevel>(l));
  }
  return levels;
}

class MatMulKQuantTest : public testing::Test {
 protected:
  void TearDown() override { SetIsaLevelCap(IsaLevel::kAvx512); }
};

void PutHalf(uint8_t* p, uint16_t h) { std::memcpy(p, &h, 2); }

// A positive normal half in [2^(e0-15), 2^(e1-15)).
uint16_t RandomHalf(std::mt19937& rng, int e0, int e1) {
  const uint32_t e = e0 + rng() % (e1 - e0);
  return static_cast<uint16_t>(e << 10 | (rng() & 0x3FF));
}

// Random super-blocks: every quant and scale byte random, the f16 scales
// valid (Q2_K / Q4_K / Q5_K dmin too; Q6_K's int8 scales of both signs).
std::vector<uint8_t> RandomWeights(GgmlType type, int64_t rows, int64_t cols,
                                   size_t row_bytes, std::mt19937& rng) {
  std::vector<uint8_t> w(rows * row_bytes, 0xEE);
  const int64_t bb = GgmlBlockBytes(type);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < cols / 256; ++b) {
      uint8_t* p = w.data() + r * row_bytes + b * bb;
      for (int64_t i = 0; i < bb; ++i) p[i] = static_cast<uint8_t>(rng());
      switch (type) {
        case GgmlType::kQ2_K:
          PutHalf(p + 80, RandomHalf(rng, 6, 10));
          PutHalf(p + 82, RandomHalf(rng, 6, 10));
          break;
        case GgmlType::kQ3_K:
          PutHalf(p + 108, RandomHalf(rng, 6, 10));
          break;
        case GgmlType::kQ4_K:
        case GgmlType::kQ5_K:
          PutHalf(p, RandomHalf(rng, 4, 8));
          PutHalf(p + 2, RandomHalf(rng, 4, 8));
          break;
        default:
          PutHalf(p + 208, RandomHalf(rng, 4, 8));
          break;
      }
    }
  }
  return w;
}

// Activations in [-1, 1]; token 1 (when present) has an all-zero first
// super-block and one large outlier, as real activations do.
std::vector<float> RandomActivations(int64_t n_tokens, int64_t cols,
                                     std::mt19937& rng) {
  std::vector<float> x(n_tokens * cols);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (float& v : x) v = unit(rng);
  if (n_tokens > 1) {
    for (int64_t c = 0; c < 256; ++c) x[cols + c] = 0;
    if (cols > 256) x[cols + 300] = -37.5f;
  }
  return x;
}

// Q8_K from its specification: per 256, m = the first element of largest
// magnitude, iscale = -127 / m, q = min(127, round-half-even(iscale * x)),
// the value q / iscale; zeros where m is 0.
void ReferenceQ8K(const float* x, int64_t cols, std::vector<double>& xq) {
  xq.assign(cols, 0.0);
  for (int64_t b = 0; b < cols / 256; ++b) {
    float m = 0;
    for (int j = 0; j < 256; ++j) {
      if (std::fabs(x[b * 256 + j]) > std::fabs(m)) m = x[b * 256 + j];
    }
    if (m == 0) continue;
    const float iscale = -127.0f / m;
    const float d = 1.0f / iscale;
    for (int j = 0; j < 256; ++j) {
      const float q = std::min(127.0f, std::nearbyint(iscale * x[b * 256 + j]));
      xq[b * 256 + j] = static_cast<double>(q) * d;
    }
  }
}

// y (n_tokens, rows) in double, and sum |w x| per output (the error scale).
void Reference(GgmlType type, const std::vector<uint8_t>& w, int64_t rows,
               int64_t cols, size_t row_bytes, const std::vector<float>& x,
               int64_t n_tokens, std::vector<double>& y,
               std::vector<double>& abs_sum) {
  std::vector<float> wf(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    ASSERT_TRUE(DequantizeRow(type, w.data() + r * row_bytes,
                              wf.data() + r * cols, cols)
                    .ok());
  }
  y.assign(n_tokens * rows, 0);
  abs_sum.assign(n_tokens * rows, 0);
  std::vector<double> xq;
  for (int64_t t = 0; t < n_tokens; ++t) {
    ReferenceQ8K(x.data() + t * cols, cols, xq);
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0, a = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const double p = static_cast<double>(wf[r * cols + c]) * xq[c];
        s += p;
        a += std::fabs(p);
      }
      y[t * rows + r] = s;
      abs_sum[t * rows + r] = a;
    }
  }
}

struct Case {
  GgmlType type;
  int64_t rows, cols, n_tokens;
  int threads;
};

std::string Describe(const Case& c, IsaLevel level) {
  return absl::StrCat(GetGgmlTypeTraits(c.type).name, " rows ", c.rows,
                      " cols ", c.cols, " tokens ", c.n_tokens, " threads ",
                      c.threads, " isa ", IsaLevelName(level));
}

// Every level against the reference (float rounding only: the weights'
// dequantized products and the summation order), and bit for bit against
// the scalar level (the kernels share their float operations).
void CheckCase(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  const size_t row_bytes = *GgmlRowBytes(c.type, c.cols) + (seed % 2) * 64;
  const std::vector<uint8_t> w =
      RandomWeights(c.type, c.rows, c.cols, row_bytes, rng);
  const std::vector<float> x = RandomActivations(c.n_tokens, c.cols, rng);
  std::vector<double> ref, abs_sum;
  Reference(c.type, w, c.rows, c.cols, row_bytes, x, c.n_tokens, ref, abs_sum);
  const WeightView view{c.type, c.rows, c.cols, w.data(), row_bytes};
  ThreadPool pool(c.threads);
  MatMulScratch scratch;
  std::vector<float> scalar_y;
  for (IsaLevel level : Levels()) {
    SetIsaLevelCap(level);
    std::vector<float> y(c.n_tokens * c.rows, -1.0f);
    ASSERT_TRUE(
        MatMul(view, x.data(), c.n_tokens, y.data(), pool, scratch).ok());
    for (size_t i = 0; i < y.size(); ++i) {
      ASSERT_NEAR(y[i], ref[i], 2e-6 * abs_sum[i] + 1e-30)
          << Describe(c, level) << " at token " << i / c.rows << " row "
          << i % c.rows;
    }
    if (level == IsaLevel::kScalar) {
      scalar_y = y;
    } else {
      ASSERT_EQ(0, std::memcmp(y.data(), scalar_y.data(), 4 * y.size()))
          << Describe(c, level) << ": not the scalar level's bits";
    }
  }
}

TEST_F(MatMulKQuantTest, MatchesDequantizedReferenceAtEveryLevel) {
  uint32_t seed = 1;
  for (GgmlType type : kKTypes) {
    for (const Case& c : std::vector<Case>{{type, 1, 256, 1, 1},
                                           {type, 7, 512, 3, 1},
                                           {type, 33, 768, 8, 2},
                                           {type, 70, 2048, 17, 2},
                                           {type, 19, 4096, 70, 2},
                                           {type, 64, 4096, 1, 2},
                                           {type, 3, 1280, 5, 1}}) {
      SCOPED_TRACE(Describe(c, IsaLevel::kScalar));
      CheckCase(c, seed++);
      if (HasFatalFailure()) return;
    }
  }
}

// A (token, row) alone gives the bits it gives inside any batch.
TEST_F(MatMulKQuantTest, BatchInvariantAtEveryLevel) {
  constexpr int64_t kRows = 37, kCols = 1024, kTokens = 23;
  for (GgmlType type : kKTypes) {
    std::mt19937 rng(100 + static_cast<int>(type));
    const size_t row_bytes = *GgmlRowBytes(type, kCols);
    const std::vector<uint8_t> w =
        RandomWeights(type, kRows, kCols, row_bytes, rng);
    const std::vector<float> x = RandomActivations(kTokens, kCols, rng);
    const WeightView view{type, kRows, kCols, w.data(), row_bytes};
    for (IsaLevel level : Levels()) {
      SetIsaLevelCap(level);
      ThreadPool pool(2);
      MatMulScratch scratch;
      std::vector<float> batch(kTokens * kRows);
      ASSERT_TRUE(
          MatMul(view, x.data(), kTokens, batch.data(), pool, scratch).ok());
      for (int64_t t0 = 0; t0 < kTokens; t0 += 5) {
        for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{5}}) {
          if (t0 + n > kTokens) continue;
          std::vector<float> part(n * kRows);
          ASSERT_TRUE(
              MatMul(view, x.data() + t0 * kCols, n, part.data(), pool, scratch)
                  .ok());
          ASSERT_EQ(0, std::memcmp(part.data(), batch.data() + t0 * kRows,
                                   4 * part.size()))
              << GetGgmlTypeTraits(type).name << " isa " << IsaLevelName(level)
              << " tokens " << t0 << "+" << n;
        }
      }
    }
  }
}

// MatMulShared over K-quant matrices: the bits of one MatMul per matrix.
TEST_F(MatMulKQuantTest, SharedMatchesSeparateCalls) {
  constexpr int64_t kCols = 768, kTokens = 9;
  const int64_t rows[] = {40, 16, 16};
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    std::mt19937 rng(7);
    const size_t row_bytes = *GgmlRowBytes(type, kCols);
    std::vector<std::vector<uint8_t>> ws;
    std::vector<WeightView> views;
    for (int64_t r : rows) {
      ws.push_back(RandomWeights(type, r, kCols, row_bytes, rng));
      views.push_back({type, r, kCols, ws.back().data(), row_bytes});
    }
    const std::vector<float> x = RandomActivations(kTokens, kCols, rng);
    for (IsaLevel level : Levels()) {
      SetIsaLevelCap(level);
      ThreadPool pool(2);
      MatMulScratch scratch;
      std::vector<std::vector<float>> shared, alone;
      std::vector<float*> outs;
      for (int64_t r : rows) shared.emplace_back(kTokens * r);
      for (auto& s : shared) outs.push_back(s.data());
      ASSERT_TRUE(
          MatMulShared(views, x.data(), kTokens, outs, pool, scratch).ok());
      for (size_t i = 0; i < views.size(); ++i) {
        std::vector<float> y(kTokens * rows[i]);
        ASSERT_TRUE(
            MatMul(views[i], x.data(), kTokens, y.data(), pool, scratch).ok());
        EXPECT_EQ(0, std::memcmp(y.data(), shared[i].data(), 4 * y.size()))
            << GetGgmlTypeTraits(type).name << " matrix " << i << " isa "
            << IsaLevelName(level);
      }
    }
  }
}

// The quantizer's bytes are the specification's (ReferenceQ8K's values).
TEST_F(MatMulKQuantTest, QuantizeRowQ8KFollowsTheSpecification) {
  constexpr int64_t kCols = 768;
  std::mt19937 rng(3);
  std::vector<float> x = RandomActivations(2, kCols, rng);
  x[kCols + 600] = 0.5f * (-127.0f / 37.5f);  // near a rounding tie
  for (int t = 0; t < 2; ++t) {
    std::vector<int8_t> q(kCols);
    std::vector<float> d(kCols / 256);
    std::vector<int16_t> bs(kCols / 16);
    internal::QuantizeRowQ8K(x.data() + t * kCols, kCols, q.data(), d.data(),
                             bs.data());
    std::vector<double> xq;
    ReferenceQ8K(x.data() + t * kCols, kCols, xq);
    for (int64_t c = 0; c < kCols; ++c) {
      ASSERT_EQ(static_cast<double>(q[c]) * d[c / 256], xq[c]) << c;
    }
    for (int64_t g = 0; g < kCols / 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += q[16 * g + l];
      EXPECT_EQ(bs[g], sum) << g;
    }
  }
}

// The AVX-512 quantizer writes the portable one's bytes, scales and sums:
// random rows, a rounding tie, a block of zeros, and blocks whose largest
// magnitude comes twice with both signs (the first one's sign wins).
TEST_F(MatMulKQuantTest, QuantizeRowQ8KAvx512MatchesPortable) {
  if (!GetCpuFeatures().avx512f || !GetCpuFeatures().avx512_vnni) {
    GTEST_SKIP() << "no AVX-512 VNNI here";
  }
  constexpr int64_t kCols = 1280;  // 5 blocks
  std::mt19937 rng(7);
  std::vector<float> x = RandomActivations(1, kCols, rng);
  x[600] = 0.5f * (-127.0f / 37.5f);
  std::fill(x.begin() + 256, x.begin() + 512, 0.0f);
  x[512 + 40] = -1000.0f;  // block 2: -1000 first, then +1000
  x[512 + 200] = 1000.0f;
  x[768 + 17] = 1000.0f;  // block 3: +1000 first, then -1000
  x[768 + 255] = -1000.0f;
  std::vector<int8_t> q1(kCols), q2(kCols);
  std::vector<float> d1(kCols / 256), d2(kCols / 256);
  std::vector<int16_t> b1(kCols / 16), b2(kCols / 16);
  internal::QuantizeRowQ8K(x.data(), kCols, q1.data(), d1.data(), b1.data());
  internal::QuantizeRowQ8KAvx512(x.data(), kCols, q2.data(), d2.data(),
                                 b2.data());
  EXPECT_EQ(q1, q2);
  EXPECT_EQ(d1, d2);
  EXPECT_EQ(b1, b2);
  EXPECT_GT(d1[2], 0.0f);  // d = -max / 127: -1000 came first
  EXPECT_LT(d1[3], 0.0f);
  EXPECT_EQ(d1[1], 0.0f);
}

TEST_F(MatMulKQuantTest, RejectsBadShapesAndLayouts) {
  std::vector<uint8_t> w(4096);
  std::vector<float> x(512), y(8);
  ThreadPool pool(1);
  MatMulScratch scratch;
  for (GgmlType type : kKTypes) {
    EXPECT_TRUE(MatMulSupports(type));
    const bool panels = internal::HasKPanels(type);
    if (!panels) {
      EXPECT_FALSE(MatMulPrefersPanels(type, 4096));
    }
    EXPECT_EQ(MatMul({type, 2, 128, w.data(), 1024}, x.data(), 1, y.data(),
                     pool, scratch)
                  .code(),
              absl::StatusCode::kInvalidArgument);
    const size_t rb = *GgmlRowBytes(type, 256);
    EXPECT_EQ(MatMul({type, 2, 256, w.data(), rb - 1}, x.data(), 1, y.data(),
                     pool, scratch)
                  .code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(
        MatMul({type, 2, 256, w.data(), rb, WeightLayout::kPanels}, x.data(), 1,
               y.data(), pool, scratch)
            .code(),
        panels ? absl::StatusCode::kOk : absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(
        PackForMatMul({type, 2, 256, w.data(), rb}).status().code(),
        panels ? absl::StatusCode::kOk : absl::StatusCode::kInvalidArgument);
  }
}

// Q4_K / Q6_K panels: lossless (they unpack to the row-major bytes), and at
// every level bit for bit the row-major matrix's results, for ragged last
// panels, one and several tokens and threads.
TEST_F(MatMulKQuantTest, PanelsGiveTheRowMajorBits) {
  uint32_t seed = 500;
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    for (const Case& c : std::vector<Case>{{type, 1, 256, 1, 1},
                                           {type, 16, 512, 1, 1},
                                           {type, 35, 768, 1, 2},
                                           {type, 48, 2048, 3, 2},
                                           {type, 21, 1280, 17, 2},
                                           {type, 40, 512, 6, 2}}) {
      SCOPED_TRACE(Describe(c, IsaLevel::kScalar));
      std::mt19937 rng(seed++);
      const size_t row_bytes = *GgmlRowBytes(type, c.cols) + (seed % 2) * 64;
      const std::vector<uint8_t> w =
          RandomWeights(type, c.rows, c.cols, row_bytes, rng);
      const std::vector<float> x = RandomActivations(c.n_tokens, c.cols, rng);
      const WeightView view{type, c.rows, c.cols, w.data(), row_bytes};
      absl::StatusOr<PackedMatrix> packed = PackForMatMul(view);
      ASSERT_TRUE(packed.ok()) << packed.status();
      ASSERT_EQ(packed->view().layout, WeightLayout::kPanels);
      ASSERT_EQ(packed->bytes(),
                static_cast<size_t>(internal::PanelCount(c.rows) *
                                    internal::PanelBytes(type, c.cols)));
      const size_t dense = *GgmlRowBytes(type, c.cols);
      std::vector<uint8_t> back(c.rows * dense);
      internal::UnpackPanelRows(
          type, static_cast<const uint8_t*>(packed->view().data), c.cols, 0,
          c.rows, back.data());
      for (int64_t r = 0; r < c.rows; ++r) {
        ASSERT_EQ(0, std::memcmp(back.data() + r * dense,
                                 w.data() + r * row_bytes, dense))
            << "row " << r;
      }
      ThreadPool pool(c.threads);
      MatMulScratch scratch;
      for (IsaLevel level : Levels()) {
        SetIsaLevelCap(level);
        std::vector<float> rows_y(c.n_tokens * c.rows, -1.0f);
        std::vector<float> panels_y(c.n_tokens * c.rows, -2.0f);
        ASSERT_TRUE(
            MatMul(view, x.data(), c.n_tokens, rows_y.data(), pool, scratch)
                .ok());
        ASSERT_TRUE(MatMul(packed->view(), x.data(), c.n_tokens,
                           panels_y.data(), pool, scratch)
                        .ok());
        ASSERT_EQ(
            0, std::memcmp(rows_y.data(), panels_y.data(), 4 * rows_y.size()))
            << Describe(c, level);
      }
    }
  }
}

}  // namespace
}  // namespace paceline::engine::cpu
