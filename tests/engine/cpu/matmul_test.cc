#include "engine/cpu/kernels/matmul.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_features.h"
#include "engine/cpu/kernels/matmul_internal.h"
#include "engine/cpu/thread_pool.h"
#include "engine/gguf/ggml_type.h"
#include "engine/gguf/quantize.h"
#include "gtest/gtest.h"

namespace paceline::engine::cpu {
namespace {

constexpr GgmlType kTypes[] = {GgmlType::kF32, GgmlType::kF16,
                               GgmlType::kBF16, GgmlType::kQ8_0,
                               GgmlType::kQ4_0};

bool IsQuantized(GgmlType t) {
  return t == GgmlType::kQ8_0 || t == GgmlType::kQ4_0;
}

// Every level this machine runs, scalar first.
std::vector<IsaLevel> Levels() {
  std::vector<IsaLevel> levels;
  for (int l = 0; l <= static_cast<int>(GetCpuFeatures().max_level); ++l) {
    levels.push_back(static_cast<IsaLevel>(l));
  }
  return levels;
}

// Restores the full level when a test ends, whatever it set.
class MatMulTest : public testing::Test {
 protected:
  void TearDown() override { SetIsaLevelCap(IsaLevel::kAvx512); }
};

void PutU16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, 2); }

// A normal half in +-[2^-6, 2) (or, for scales, in [2^-10, 2^-6)).
uint16_t RandomHalf(std::mt19937& rng, int min_exp, int max_exp) {
  const uint32_t e = min_exp + rng() % (max_exp - min_exp);
  return static_cast<uint16_t>((rng() & 0x8000) | e << 10 | (rng() & 0x3FF));
}

// `rows` random rows of `type` with `cols` elements, row_bytes apart.
std::vector<uint8_t> RandomWeights(GgmlType type, int64_t rows, int64_t cols,
                                   size_t row_bytes, std::mt19937& rng) {
  std::vector<uint8_t> w(rows * row_bytes, 0xEE);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = w.data() + r * row_bytes;
    switch (type) {
      case GgmlType::kF32:
        for (int64_t c = 0; c < cols; ++c) {
          const float v = unit(rng);
          std::memcpy(row + 4 * c, &v, 4);
        }
        break;
      case GgmlType::kF16:
        for (int64_t c = 0; c < cols; ++c) {
          PutU16(row + 2 * c, RandomHalf(rng, 9, 16));
        }
        break;
      case GgmlType::kBF16:
        for (int64_t c = 0; c < cols; ++c) {
          const float v = unit(rng);
          uint32_t bits;
          std::memcpy(&bits, &v, 4);
          PutU16(row + 2 * c, static_cast<uint16_t>(bits >> 16));
        }
        break;
      case GgmlType::kQ8_0:
        // Scales positive and negative; qs over the full int8 range,
        // including -128 (ggml's quantizer never writes it, files may).
        for (int64_t b = 0; b < cols / 32; ++b) {
          uint8_t* block = row + b * 34;
          PutU16(block, RandomHalf(rng, 5, 10));
          for (int j = 0; j < 32; ++j) block[2 + j] = static_cast<uint8_t>(rng());
        }
        break;
      case GgmlType::kQ4_0:
        for (int64_t b = 0; b < cols / 32; ++b) {
          uint8_t* block = row + b * 18;
          PutU16(block, RandomHalf(rng, 8, 14));
          for (int j = 0; j < 16; ++j) block[2 + j] = static_cast<uint8_t>(rng());
        }
        break;
      default:
        ADD_FAILURE() << "no generator";
    }
  }
  return w;
}

// Activations in [-1, 1]; token 1 (when present) has an all-zero first
// block and a block with one large outlier, as real activations do.
std::vector<float> RandomActivations(int64_t n_tokens, int64_t cols,
                                     std::mt19937& rng) {
  std::vector<float> x(n_tokens * cols);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (float& v : x) v = unit(rng);
  if (n_tokens > 1) {
    for (int64_t c = 0; c < std::min<int64_t>(32, cols); ++c) x[cols + c] = 0;
    if (cols > 40) x[cols + 40] = 37.5f;
  }
  return x;
}

// The activation quantization MatMul uses for Q8_0/Q4_0 weights, written
// out again from its specification (matmul_internal.h): per token and block
// of 32, d = f16(max|x| / 127), q = round-half-even(x * (127 / max|x|)).
void ReferenceQuantize(const float* x, int64_t cols, std::vector<double>& xq) {
  xq.resize(cols);
  for (int64_t b = 0; b < cols / 32; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const float d = HalfToFloat(FloatToHalf(amax / 127.0f));
    const float inv = amax != 0 ? 127.0f / amax : 0.0f;
    for (int j = 0; j < 32; ++j) {
      xq[b * 32 + j] = std::nearbyint(x[b * 32 + j] * inv) * static_cast<double>(d);
    }
  }
}

// y_ref (n_tokens, rows) in double from the dequantized weights; for Q
// types the activations go through ReferenceQuantize first. Also returns
// sum_c |w x| per output, the scale of rounding error for the tolerance.
void Reference(GgmlType type, const std::vector<uint8_t>& w, int64_t rows,
               int64_t cols, size_t row_bytes, const std::vector<float>& x,
               int64_t n_tokens, std::vector<double>& y,
               std::vector<double>& abs_sum) {
  std::vector<float> wrow(cols);
  std::vector<double> xt(cols);
  y.assign(n_tokens * rows, 0);
  abs_sum.assign(n_tokens * rows, 0);
  for (int64_t t = 0; t < n_tokens; ++t) {
    if (IsQuantized(type)) {
      ReferenceQuantize(x.data() + t * cols, cols, xt);
    } else {
      for (int64_t c = 0; c < cols; ++c) xt[c] = x[t * cols + c];
    }
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_TRUE(
          DequantizeRow(type, w.data() + r * row_bytes, wrow.data(), cols).ok());
      double s = 0, a = 0;
      for (int64_t c = 0; c < cols; ++c) {
        s += static_cast<double>(wrow[c]) * xt[c];
        a += std::fabs(static_cast<double>(wrow[c]) * xt[c]);
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

// Runs MatMul for `c` at every level; checks each against the double
// reference, and each SIMD level against the scalar result.
void CheckCase(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  const size_t min_row_bytes = *GgmlRowBytes(c.type, c.cols);
  const size_t row_bytes = min_row_bytes + (seed % 2) * 64;  // padded rows too
  const std::vector<uint8_t> w =
      RandomWeights(c.type, c.rows, c.cols, row_bytes, rng);
  const std::vector<float> x = RandomActivations(c.n_tokens, c.cols, rng);
  std::vector<double> ref, abs_sum;
  Reference(c.type, w, c.rows, c.cols, row_bytes, x, c.n_tokens, ref, abs_sum);

  const WeightView view{c.type, c.rows, c.cols, w.data(), row_bytes};
  // Also in the panel layout where there is one, which must give the
  // row-major bits.
  std::optional<PackedMatrix> packed;
  if (IsQuantized(c.type) || c.cols % 16 == 0) {
    absl::StatusOr<PackedMatrix> p = PackForMatMul(view);
    ASSERT_TRUE(p.ok()) << p.status();
    packed = *std::move(p);
  }
  ThreadPool pool(c.threads);
  MatMulScratch scratch;
  std::vector<float> scalar_y;
  for (IsaLevel level : Levels()) {
    SetIsaLevelCap(level);
    SCOPED_TRACE(Describe(c, level));
    std::vector<float> y(c.n_tokens * c.rows, std::nanf(""));
    ASSERT_TRUE(MatMul(view, x.data(), c.n_tokens, y.data(), pool, scratch).ok());
    if (packed.has_value()) {
      std::vector<float> yp(c.n_tokens * c.rows, std::nanf(""));
      ASSERT_TRUE(MatMul(packed->view(), x.data(), c.n_tokens, yp.data(), pool,
                         scratch)
                      .ok());
      ASSERT_EQ(std::memcmp(y.data(), yp.data(), y.size() * sizeof(float)), 0)
          << "panel layout differs from row-major";
    }
    // Float accumulation over `cols` products: the error is bounded by
    // ~cols * eps * sum|w x| in the worst case and ~sqrt(cols) * eps in
    // practice; 4e-6 * sum|w x| (~2^-18) leaves room for both orders and
    // for FMA contraction. The integer Q dot products are exact; only
    // the per-block float scaling and the sum over blocks round.
    int bad = 0;
    for (int64_t i = 0; i < c.n_tokens * c.rows && bad < 5; ++i) {
      const double tol = 1e-30 + 4e-6 * abs_sum[i] + 1e-6 * std::fabs(ref[i]);
      if (!(std::fabs(y[i] - ref[i]) <= tol)) {
        ADD_FAILURE() << "t " << i / c.rows << " r " << i % c.rows << ": got "
                      << y[i] << ", reference " << ref[i] << ", tol " << tol;
        ++bad;
      }
    }
    if (level == IsaLevel::kScalar) {
      scalar_y = y;
    } else {
      for (int64_t i = 0; i < c.n_tokens * c.rows && bad < 5; ++i) {
        const double tol = 1e-30 + 2e-6 * abs_sum[i];
        if (!(std::fabs(y[i] - scalar_y[i]) <= tol)) {
          ADD_FAILURE() << "vs scalar: t " << i / c.rows << " r "
                        << i % c.rows << ": " << y[i] << " vs " << scalar_y[i];
          ++bad;
        }
      }
    }
  }
}

TEST_F(MatMulTest, FloatTypesMatchReferenceOnOddShapes) {
  uint32_t seed = 1;
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16}) {
    for (int64_t cols : {1, 5, 16, 33, 64, 100, 257, 1030}) {
      for (int64_t rows : {1, 7, 33}) {
        for (int64_t n_tokens : {1, 3, 8, 33}) {
          CheckCase({type, rows, cols, n_tokens, 2}, seed++);
        }
      }
    }
  }
}

TEST_F(MatMulTest, QuantizedTypesMatchReferenceOnOddShapes) {
  uint32_t seed = 100;
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0}) {
    for (int64_t cols : {32, 64, 96, 160, 544, 1056}) {
      for (int64_t rows : {1, 7, 33}) {
        for (int64_t n_tokens : {1, 3, 8, 33}) {
          CheckCase({type, rows, cols, n_tokens, 2}, seed++);
        }
      }
    }
  }
}

// Big enough to take the threaded, tiled paths (prefill-like K blocking
// included), with thread counts that split rows unevenly.
TEST_F(MatMulTest, LargeShapesAcrossThreadCounts) {
  uint32_t seed = 500;
  for (GgmlType type : kTypes) {
    for (int threads : {1, 2, 3}) {
      CheckCase({type, 131, 1536, 1, threads}, seed++);
      CheckCase({type, 67, 1088, 70, threads}, seed++);
      // Several column blocks of the packed int8 GEMM (2048 columns
      // each), row blocks of 64 with a ragged last panel, tokens not a
      // multiple of its tile.
      CheckCase({type, 83, 2144, 20, threads}, seed++);
      // F16 / BF16 widened to f32 (12+ tokens), with an odd number of
      // columns in the last column block.
      CheckCase({type, 37, IsQuantized(type) ? 1056 : 1029, 50, threads},
                seed++);
    }
  }
}

// Batch invariance (matmul_internal.h): at every level, a token's outputs
// are bit for bit the same whether it is multiplied alone or among others,
// wherever it sits in the batch, and whatever the thread count. Column
// counts span several column blocks of every tiled path with ragged tails;
// token counts cross every tile and GEMM threshold.
TEST_F(MatMulTest, EveryTokenGetsTheSameBitsInAnyBatch) {
  constexpr int64_t kTokens = 70, kRows = 83;
  uint32_t seed = 900;
  // Float weights twice: 2085 columns keep the dot-product tiles at every
  // batch size; 2080 (a multiple of 16) sends many tokens to the packed
  // float GEMM on AVX-512, over three of its column blocks.
  // And each type with a panel layout packed for the batches (the tokens
  // alone stay row-major).
  struct Weights {
    GgmlType type;
    int64_t cols;
    bool panels;
  };
  std::vector<Weights> cases;
  for (GgmlType type : kTypes) {
    if (IsQuantized(type)) {
      cases.push_back({type, 2144, false});
    } else {
      cases.push_back({type, 2085, false});
      cases.push_back({type, 2080, false});
    }
  }
  for (GgmlType type : kTypes) {
    cases.push_back({type, IsQuantized(type) ? 2144 : 2080, true});
  }
  for (const auto& [type, cols, panels] : cases) {
    std::mt19937 rng(seed++);
    const size_t row_bytes = *GgmlRowBytes(type, cols);
    const auto w = RandomWeights(type, kRows, cols, row_bytes, rng);
    const auto x = RandomActivations(kTokens, cols, rng);
    const WeightView rows_view{type, kRows, cols, w.data(), row_bytes};
    std::optional<PackedMatrix> packed;
    if (panels) {
      absl::StatusOr<PackedMatrix> p = PackForMatMul(rows_view);
      ASSERT_TRUE(p.ok()) << p.status();
      packed = *std::move(p);
    }
    for (IsaLevel level : Levels()) {
      SetIsaLevelCap(level);
      // y_alone[t]: token t multiplied on its own, one thread.
      std::vector<float> alone(kTokens * kRows);
      {
        ThreadPool pool(1);
        MatMulScratch scratch;
        for (int64_t t = 0; t < kTokens; ++t) {
          ASSERT_TRUE(MatMul(rows_view, x.data() + t * cols, 1,
                             alone.data() + t * kRows, pool, scratch)
                          .ok());
        }
      }
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        MatMulScratch scratch;
        for (int64_t n : {2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 25, 47, 48, 49, 70}) {
          // The first n tokens, and the last n (other tile positions).
          for (int64_t first : {int64_t{0}, kTokens - n}) {
            SCOPED_TRACE(absl::StrCat(GetGgmlTypeTraits(type).name,
                                      panels ? " panels" : "", " cols ",
                                      cols, " isa ",
                                      IsaLevelName(level), " threads ",
                                      threads, " tokens ", first, "+", n));
            std::vector<float> y(n * kRows, std::nanf(""));
            ASSERT_TRUE(MatMul(panels ? packed->view() : rows_view,
                               x.data() + first * cols, n, y.data(), pool,
                               scratch)
                            .ok());
            for (int64_t i = 0; i < n * kRows; ++i) {
              const float want = alone[first * kRows + i];
              if (std::memcmp(&y[i], &want, sizeof(float)) != 0) {
                FAIL() << "t " << first + i / kRows << " r " << i % kRows
                       << ": " << y[i] << " in the batch, " << want
                       << " alone";
              }
            }
          }
        }
      }
    }
  }
}

TEST_F(MatMulTest, ScratchIsReusedAcrossShapes) {
  std::mt19937 rng(9);
  ThreadPool pool(2);
  MatMulScratch scratch;
  for (int64_t n_tokens : {40, 1, 7, 40}) {
    const int64_t rows = 19, cols = 256;
    const size_t row_bytes = *GgmlRowBytes(GgmlType::kQ8_0, cols);
    const auto w = RandomWeights(GgmlType::kQ8_0, rows, cols, row_bytes, rng);
    const auto x = RandomActivations(n_tokens, cols, rng);
    std::vector<double> ref, abs_sum;
    Reference(GgmlType::kQ8_0, w, rows, cols, row_bytes, x, n_tokens, ref,
              abs_sum);
    std::vector<float> y(n_tokens * rows);
    ASSERT_TRUE(MatMul({GgmlType::kQ8_0, rows, cols, w.data(), row_bytes},
                       x.data(), n_tokens, y.data(), pool, scratch)
                    .ok());
    for (size_t i = 0; i < y.size(); ++i) {
      EXPECT_NEAR(y[i], ref[i], 4e-6 * abs_sum[i] + 1e-30);
    }
  }
}

TEST_F(MatMulTest, EveryQuantizerWritesIdenticalBytes) {
  std::mt19937 rng(3);
  const int64_t cols = 4096;
  auto x = RandomActivations(3, cols, rng);
  // Token 1: a zero block and an outlier; plus values near rounding ties.
  x.erase(x.begin(), x.begin() + cols);
  x.resize(cols);
  x[65] = 2.5f / 127;
  x[70] = -1e-30f;
  std::vector<int8_t> q_ref(cols), q(cols);
  std::vector<float> d_ref(cols / 32), d(cols / 32);
  internal::QuantizeRowScalar(x.data(), cols, q_ref.data(), d_ref.data());
  std::vector<internal::QuantizeKernel> kernels;
#if defined(__x86_64__)
  if (GetCpuFeatures().max_level >= IsaLevel::kAvx2) {
    kernels.push_back(&internal::QuantizeRowAvx2);
  }
  if (GetCpuFeatures().max_level >= IsaLevel::kAvx512) {
    kernels.push_back(&internal::QuantizeRowAvx512);
  }
#endif
  for (internal::QuantizeKernel k : kernels) {
    k(x.data(), cols, q.data(), d.data());
    EXPECT_EQ(q, q_ref);
    EXPECT_EQ(d, d_ref);
  }
#if defined(__x86_64__)
  // The VNNI layout: per pair of blocks, -sum(q) of each block in its first
  // lane (0 or 8), zero elsewhere. Odd block counts included.
  if (GetCpuFeatures().max_level >= IsaLevel::kAvx512) {
    for (int64_t n : {cols, cols - 32}) {
      const int64_t nb = n / 32, pairs = (nb + 1) / 2;
      std::vector<int32_t> sp(pairs * 16, -1);
      internal::BuildPairsAvx512(q_ref.data(), n, sp.data());
      for (int64_t b = 0; b < nb; ++b) {
        int32_t sum = 0;
        for (int j = 0; j < 32; ++j) sum += q_ref[b * 32 + j];
        const int64_t lane0 = (b / 2) * 16 + (b % 2) * 8;
        EXPECT_EQ(sp[lane0], -sum) << "block " << b;
        for (int j = 1; j < 8; ++j) EXPECT_EQ(sp[lane0 + j], 0);
      }
      if (nb % 2 == 1) {
        const int64_t last = (pairs - 1) * 16;
        for (int j = 8; j < 16; ++j) EXPECT_EQ(sp[last + j], 0);
      }
    }
  }
#endif
  for (int64_t c = 0; c < cols; ++c) {
    EXPECT_LE(std::abs(static_cast<int>(q_ref[c])), 127);
  }
}

TEST_F(MatMulTest, RejectsBadArgumentsWithoutWriting) {
  ThreadPool pool(2);
  MatMulScratch scratch;
  std::vector<uint8_t> w(4096, 0);
  std::vector<float> x(256, 1.0f), y(64, 123.0f);
  auto call = [&](const WeightView& v, int64_t n_tokens, float* out) {
    return MatMul(v, x.data(), n_tokens, out, pool, scratch);
  };
  // A type without a kernel.
  EXPECT_EQ(call({GgmlType::kQ5_0, 1, 256, w.data(), 176}, 1, y.data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(MatMulSupports(GgmlType::kQ5_0));
  for (GgmlType t : kTypes) EXPECT_TRUE(MatMulSupports(t));
  // cols not a multiple of the block.
  EXPECT_EQ(call({GgmlType::kQ8_0, 2, 48, w.data(), 51}, 1, y.data()).code(),
            absl::StatusCode::kInvalidArgument);
  // row_bytes too small.
  EXPECT_EQ(call({GgmlType::kF16, 2, 64, w.data(), 100}, 1, y.data()).code(),
            absl::StatusCode::kInvalidArgument);
  // Negative sizes, null data, aliasing.
  EXPECT_EQ(call({GgmlType::kF32, -1, 64, w.data(), 256}, 1, y.data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(call({GgmlType::kF32, 2, 64, nullptr, 256}, 1, y.data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(call({GgmlType::kF32, 2, 64, w.data(), 256}, 1, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(call({GgmlType::kF32, 2, 64, w.data(), 256}, 1, x.data() + 10)
                .code(),
            absl::StatusCode::kInvalidArgument);
  for (float v : y) ASSERT_EQ(v, 123.0f);
  // Zero tokens or rows: nothing to do.
  EXPECT_TRUE(call({GgmlType::kF32, 2, 64, w.data(), 256}, 0, y.data()).ok());
  EXPECT_TRUE(call({GgmlType::kF32, 0, 64, w.data(), 256}, 3, y.data()).ok());
  // No panel layout for floats with cols not a multiple of 16.
  WeightView panels{GgmlType::kF16, 2, 65, w.data(), 130};
  panels.layout = WeightLayout::kPanels;
  EXPECT_EQ(call(panels, 1, y.data()).code(),
            absl::StatusCode::kInvalidArgument);
  for (float v : y) ASSERT_EQ(v, 123.0f);
}

// Matrices sharing activations in one call give each matrix's own MatMul
// bits, at every level, packed or not, threaded or not.
TEST_F(MatMulTest, SharedActivationsGiveEachMatrixsOwnBits) {
  std::mt19937 rng(31);
  for (GgmlType type : kTypes) {
    const int64_t cols = 256;
    const int64_t rows[] = {48, 16, 37};  // like Q, K, V; one ragged
    const size_t row_bytes = *GgmlRowBytes(type, cols);
    std::vector<std::vector<uint8_t>> w;
    std::vector<WeightView> views;
    std::vector<PackedMatrix> packed;
    for (int64_t r : rows) {
      w.push_back(RandomWeights(type, r, cols, row_bytes, rng));
      views.push_back({type, r, cols, w.back().data(), row_bytes});
    }
    for (const WeightView& v : views) packed.push_back(*PackForMatMul(v));
    for (IsaLevel level : Levels()) {
      SetIsaLevelCap(level);
      for (int64_t n : {1, 5, 40}) {
        for (int threads : {1, 2}) {
          SCOPED_TRACE(absl::StrCat(GetGgmlTypeTraits(type).name, " isa ",
                                    IsaLevelName(level), " tokens ", n,
                                    " threads ", threads));
          const auto x = RandomActivations(n, cols, rng);
          ThreadPool pool(threads);
          MatMulScratch scratch;
          for (bool use_packed : {false, true}) {
            std::vector<WeightView> ws;
            for (size_t i = 0; i < views.size(); ++i) {
              ws.push_back(use_packed ? packed[i].view() : views[i]);
            }
            std::vector<std::vector<float>> want(3), got(3);
            std::vector<float*> outs;
            for (size_t i = 0; i < 3; ++i) {
              want[i].assign(n * rows[i], std::nanf(""));
              got[i].assign(n * rows[i], std::nanf(""));
              ASSERT_TRUE(MatMul(ws[i], x.data(), n, want[i].data(), pool,
                                 scratch)
                              .ok());
              outs.push_back(got[i].data());
            }
            ASSERT_TRUE(MatMulShared(ws, x.data(), n, outs, pool, scratch).ok());
            for (size_t i = 0; i < 3; ++i) {
              ASSERT_EQ(std::memcmp(want[i].data(), got[i].data(),
                                    want[i].size() * sizeof(float)),
                        0)
                  << "matrix " << i << (use_packed ? " packed" : "");
            }
          }
        }
      }
    }
  }
}

TEST_F(MatMulTest, SharedActivationsRejectMismatches) {
  ThreadPool pool(2);
  MatMulScratch scratch;
  std::vector<uint8_t> w(4096, 0);
  std::vector<float> x(128, 1.0f), y1(64, 5.0f), y2(64, 5.0f);
  const WeightView f32{GgmlType::kF32, 2, 64, w.data(), 256};
  const WeightView f16{GgmlType::kF16, 2, 64, w.data(), 128};
  const WeightView wide{GgmlType::kF32, 2, 32, w.data(), 128};
  auto call = [&](std::vector<WeightView> ws, std::vector<float*> ys) {
    return MatMulShared(ws, x.data(), 1, ys, pool, scratch).code();
  };
  EXPECT_EQ(call({f32, f16}, {y1.data(), y2.data()}),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(call({f32, wide}, {y1.data(), y2.data()}),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(call({f32, f32}, {y1.data(), y1.data() + 1}),
            absl::StatusCode::kInvalidArgument);  // outputs overlap
  EXPECT_EQ(call({f32, f32}, {y1.data()}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(call({}, {}), absl::StatusCode::kInvalidArgument);
  for (float v : y1) ASSERT_EQ(v, 5.0f);
  for (float v : y2) ASSERT_EQ(v, 5.0f);
  EXPECT_EQ(call({f32, f32}, {y1.data(), y2.data()}), absl::StatusCode::kOk);
}

TEST_F(MatMulTest, PackingRejectsWhatItCannotPack) {
  std::vector<uint8_t> w(4096, 0);
  EXPECT_EQ(PackForMatMul({GgmlType::kQ5_K, 1, 256, w.data(), 176}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PackForMatMul({GgmlType::kQ4_0, 2, 64, w.data(), 30}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PackForMatMul({GgmlType::kF16, 2, 72, w.data(), 144}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PackForMatMul({GgmlType::kF32, 2, 64, w.data(), 200}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PackForMatMul({GgmlType::kQ8_0, 2, 48, w.data(), 51}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PackForMatMul({GgmlType::kQ8_0, 2, 64, w.data(), 60}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PackForMatMul({GgmlType::kQ8_0, 2, 64, nullptr, 68}).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<PackedMatrix> packed =
      PackForMatMul({GgmlType::kQ8_0, 2, 64, w.data(), 68});
  ASSERT_TRUE(packed.ok());
  EXPECT_EQ(PackForMatMul(packed->view()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Packing is lossless: the panels unpack to the row-major bytes, for odd
// row and block counts (a padded last panel, a half-empty last pair).
TEST_F(MatMulTest, PanelsUnpackToTheOriginalRows) {
  std::mt19937 rng(77);
  for (GgmlType type : kTypes) {
    for (int64_t rows : {1, 16, 35}) {
      // Q8_0 / Q4_0: odd block counts; floats: several column blocks,
      // ragged.
      for (int64_t cols : {32, 96, 2048, 4160}) {
        const size_t row_bytes = *GgmlRowBytes(type, cols);
        const auto w = RandomWeights(type, rows, cols, row_bytes, rng);
        absl::StatusOr<PackedMatrix> packed =
            PackForMatMul({type, rows, cols, w.data(), row_bytes});
        ASSERT_TRUE(packed.ok()) << packed.status();
        EXPECT_EQ(packed->view().layout, WeightLayout::kPanels);
        EXPECT_EQ(packed->bytes(),
                  static_cast<size_t>(internal::PanelCount(rows) *
                                      internal::PanelBytes(type, cols)));
        std::vector<uint8_t> back(w.size());
        internal::UnpackPanelRows(
            type, static_cast<const uint8_t*>(packed->view().data), cols, 0,
            rows, back.data());
        EXPECT_EQ(back, w) << GetGgmlTypeTraits(type).name << " rows " << rows
                           << " cols " << cols;
      }
    }
  }
}

}  // namespace
}  // namespace paceline::engine::cpu
