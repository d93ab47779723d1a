// Kernel levels chosen by measurement (engine/cpu/kernel_choice.h), the
// per-type level MatMul runs at (SetMatMulLevel, kernels/matmul.h) and the
// cache of choices per CPU model (kernel_choice_cache.h).

#include "engine/cpu/kernel_choice.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "engine/cpu/cpu_features.h"
#include "engine/cpu/kernel_choice_cache.h"
#include "engine/cpu/kernels/matmul.h"
#include "engine/cpu/thread_pool.h"
#include "engine/gguf/quantize.h"
#include "gtest/gtest.h"
#include "tests/testing/files.h"

namespace paceline::engine::cpu {
namespace {

class KernelChoiceTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = paceline::testing::MakeTempDir("kernels"); }
  void TearDown() override {
    ResetMatMulLevels();
    SetIsaLevelCap(IsaLevel::kAvx512);
    std::filesystem::remove_all(dir_);
  }

  // A (rows, cols) matrix of `type` quantized from random values.
  WeightView Matrix(GgmlType type, int64_t rows, int64_t cols) {
    const size_t row_bytes = *GgmlRowBytes(type, cols);
    std::vector<uint8_t>& bytes = buffers_.emplace_back(rows * row_bytes);
    std::mt19937 rng(static_cast<uint32_t>(buffers_.size()));
    std::normal_distribution<float> normal;
    std::vector<float> values(cols);
    for (int64_t r = 0; r < rows; ++r) {
      for (float& v : values) v = normal(rng);
      EXPECT_TRUE(
          QuantizeRow(type, values.data(), cols, &bytes[r * row_bytes]).ok());
    }
    return {.type = type,
            .rows = rows,
            .cols = cols,
            .data = bytes.data(),
            .row_bytes = row_bytes};
  }

  // Small enough to measure quickly, large enough to be measured.
  KernelChoiceOptions Quick(bool cache) const {
    return {.threads = 1,
            .cache_dir = cache ? dir_ : "",
            .max_bytes = 256 << 10,
            .min_bytes = 64 << 10,
            .rounds = 1};
  }

  std::string dir_;
  std::vector<std::vector<uint8_t>> buffers_;
};

bool Has(const std::vector<IsaLevel>& levels, IsaLevel l) {
  return std::find(levels.begin(), levels.end(), l) != levels.end();
}

TEST_F(KernelChoiceTest, CandidatesAreDistinctKernelsFromTheTopLevel) {
  for (GgmlType t : {GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ4_K}) {
    const std::vector<IsaLevel> levels = MatMulCandidateLevels(t);
    if (EffectiveIsaLevel() < IsaLevel::kAvx2) {
      EXPECT_TRUE(levels.empty());
      continue;
    }
    ASSERT_FALSE(levels.empty());
    EXPECT_EQ(levels.front(), EffectiveIsaLevel());
    EXPECT_FALSE(Has(levels, IsaLevel::kScalar));
    std::vector<std::string> names;
    for (IsaLevel l : levels) {
      SetMatMulLevel(t, l);
      names.push_back(MatMulKernelName(t, WeightLayout::kRows));
    }
    std::sort(names.begin(), names.end());
    EXPECT_EQ(std::unique(names.begin(), names.end()), names.end());
  }
  // A cap leaves one candidate.
  if (SetIsaLevelCap(IsaLevel::kAvx2) == IsaLevel::kAvx2) {
    EXPECT_EQ(MatMulCandidateLevels(GgmlType::kF16),
              std::vector<IsaLevel>{IsaLevel::kAvx2});
  }
}

TEST_F(KernelChoiceTest, ATypesLevelIsCappedAndChangesItsKernels) {
  if (GetCpuFeatures().max_level < IsaLevel::kAvx512) {
    GTEST_SKIP() << "needs an AVX-512 CPU";
  }
  const std::string top = MatMulKernelName(GgmlType::kF16, WeightLayout::kRows);
  SetMatMulLevel(GgmlType::kF16, IsaLevel::kAvx2);
  EXPECT_EQ(MatMulLevel(GgmlType::kF16), IsaLevel::kAvx2);
  EXPECT_EQ(MatMulKernelName(GgmlType::kF16, WeightLayout::kRows), "avx2");
  EXPECT_NE(MatMulKernelName(GgmlType::kF16, WeightLayout::kRows), top);
  EXPECT_FALSE(MatMulPrefersPanels(GgmlType::kF16, 256));
  // Other types keep the top level; the ISA cap still bounds the choice.
  EXPECT_EQ(MatMulLevel(GgmlType::kQ8_0), IsaLevel::kAvx512);
  SetMatMulLevel(GgmlType::kQ8_0, IsaLevel::kAvx512);
  SetIsaLevelCap(IsaLevel::kScalar);
  EXPECT_EQ(MatMulLevel(GgmlType::kQ8_0), IsaLevel::kScalar);
  SetIsaLevelCap(IsaLevel::kAvx512);
  ResetMatMulLevels();
  EXPECT_EQ(MatMulKernelName(GgmlType::kF16, WeightLayout::kRows), top);
}

// The K-quants' claim that makes their choice free: the same bits at every
// level, packed for one level and run at another included.
TEST_F(KernelChoiceTest, KQuantResultsAreTheSameAtEveryChosenLevel) {
  ASSERT_TRUE(MatMulSameBitsAtEveryLevel(GgmlType::kQ4_K));
  EXPECT_FALSE(MatMulSameBitsAtEveryLevel(GgmlType::kF16));
  const WeightView w = Matrix(GgmlType::kQ4_K, 48, 512);
  absl::StatusOr<PackedMatrix> packed = PackForMatMul(w);
  ASSERT_TRUE(packed.ok()) << packed.status();
  std::vector<float> x(3 * w.cols);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (float& v : x) v = normal(rng);
  ThreadPool pool(1);
  MatMulScratch scratch;
  std::vector<float> want(3 * w.rows);
  ASSERT_TRUE(MatMul(w, x.data(), 3, want.data(), pool, scratch).ok());
  for (IsaLevel l : MatMulCandidateLevels(GgmlType::kQ4_K)) {
    SetMatMulLevel(GgmlType::kQ4_K, l);
    for (const WeightView& v : {w, packed->view()}) {
      std::vector<float> y(3 * w.rows);
      ASSERT_TRUE(MatMul(v, x.data(), 3, y.data(), pool, scratch).ok());
      EXPECT_EQ(y, want) << IsaLevelName(l);
    }
  }
}

TEST_F(KernelChoiceTest, MeasuresEachTypeAndSetsItsLevel) {
  const std::vector<WeightView> ws = {Matrix(GgmlType::kF16, 256, 512),
                                      Matrix(GgmlType::kQ4_K, 512, 512),
                                      Matrix(GgmlType::kQ8_0, 16, 64)};
  absl::StatusOr<KernelChoices> c = ChooseKernels(ws, Quick(false));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->types.size(), 3u);
  EXPECT_TRUE(c->cache_file.empty());
  for (const KernelChoice& k : c->types) {
    const std::vector<IsaLevel> levels = MatMulCandidateLevels(k.type);
    EXPECT_EQ(MatMulLevel(k.type), k.level);
    if (k.type == GgmlType::kQ8_0) {  // 1 KiB of weights
      EXPECT_EQ(k.how,
                levels.size() < 2 ? "one candidate" : "too small to measure");
      EXPECT_TRUE(k.timings.empty());
      continue;
    }
    EXPECT_EQ(k.cols, 512);
    if (levels.size() < 2) continue;
    EXPECT_EQ(k.how, "measured");
    EXPECT_TRUE(Has(levels, k.level));
    ASSERT_EQ(k.timings.size(), levels.size());
    for (const LevelTiming& t : k.timings) {
      EXPECT_GT(t.one_ms, 0);
      EXPECT_GT(t.batch_ms, 0);
    }
    // The chosen level's score is the best one, or the top level's when
    // nothing beats it by the margin.
    auto score = [](const LevelTiming& t) { return t.one_ms * t.batch_ms; };
    const LevelTiming* chosen = nullptr;
    for (const LevelTiming& t : k.timings) {
      if (t.level == k.level) chosen = &t;
    }
    ASSERT_NE(chosen, nullptr);
    if (k.level != levels.front()) {
      for (const LevelTiming& t : k.timings) {
        EXPECT_LE(score(*chosen), score(t));
      }
    }
  }
  EXPECT_NE(KernelChoicesLine(*c).find("F16 "), std::string::npos);
}

TEST_F(KernelChoiceTest, TheCacheIsWrittenThenReadAndApplied) {
  if (MatMulCandidateLevels(GgmlType::kF16).size() < 2) {
    GTEST_SKIP() << "one candidate level on this CPU: nothing to cache";
  }
  const std::vector<WeightView> ws = {Matrix(GgmlType::kF16, 256, 512)};
  absl::StatusOr<KernelChoices> first = ChooseKernels(ws, Quick(true));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->types[0].how, "measured");
  EXPECT_EQ(first->cache_file, KernelCacheFile(dir_));
  EXPECT_TRUE(first->warnings.empty());
  absl::StatusOr<KernelCacheEntries> entries =
      ReadKernelCache(first->cache_file);
  ASSERT_TRUE(entries.ok()) << entries.status();
  ASSERT_EQ(entries->size(), 1u);
  const std::string key = entries->begin()->first;
  EXPECT_TRUE(absl::StartsWith(key, "F16 cols=512 rows="));
  EXPECT_TRUE(absl::StrContains(key, "threads=1"));

  // A later start reads the level instead of measuring: force the one not
  // chosen, and it is the one applied.
  const IsaLevel other = first->types[0].level == IsaLevel::kAvx2
                             ? IsaLevel::kAvx512
                             : IsaLevel::kAvx2;
  ASSERT_TRUE(WriteKernelCache(first->cache_file,
                               {{key, {std::string(IsaLevelName(other)), ""}}})
                  .ok());
  ResetMatMulLevels();
  absl::StatusOr<KernelChoices> second = ChooseKernels(ws, Quick(true));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->types[0].how, "cached");
  EXPECT_EQ(second->types[0].level, other);
  EXPECT_EQ(MatMulLevel(GgmlType::kF16), other);
  EXPECT_TRUE(second->types[0].timings.empty());
}

TEST_F(KernelChoiceTest, ACorruptCacheIsAWarningAndIsRewritten) {
  if (MatMulCandidateLevels(GgmlType::kF16).size() < 2) {
    GTEST_SKIP() << "one candidate level on this CPU: nothing to cache";
  }
  const std::string file = KernelCacheFile(dir_);
  ASSERT_TRUE(paceline::testing::WriteFileAt(file, "not a cache\n"));
  const std::vector<WeightView> ws = {Matrix(GgmlType::kF16, 256, 512)};
  absl::StatusOr<KernelChoices> c = ChooseKernels(ws, Quick(true));
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->warnings.size(), 1u);
  EXPECT_TRUE(absl::StrContains(c->warnings[0], file + ":1:"))
      << c->warnings[0];
  EXPECT_EQ(c->types[0].how, "measured");
  EXPECT_TRUE(ReadKernelCache(file).ok());
}

LevelTiming At(IsaLevel l, double one, double batch) { return {l, one, batch}; }

TEST(DecideLevelTest, TheFastestByTheProductOfTheMinima) {
  constexpr IsaLevel k512 = IsaLevel::kAvx512, k2 = IsaLevel::kAvx2;
  // AVX-512 faster at both sizes.
  LevelDecision d = DecideLevel(
      {{At(k512, 1, 4), At(k2, 2, 8)}, {At(k512, 1.1, 4.2), At(k2, 2, 9)}},
      kMinGain);
  EXPECT_EQ(d.level, k512);
  EXPECT_TRUE(d.steady);
  ASSERT_EQ(d.timings.size(), 2u);
  EXPECT_EQ(d.timings[0].one_ms, 1);  // the minima over the rounds
  EXPECT_EQ(d.timings[1].batch_ms, 8);
  // AVX2 slower at one token, much faster batched: the product decides.
  d = DecideLevel({{At(k512, 1, 10), At(k2, 1.2, 5)}}, kMinGain);
  EXPECT_EQ(d.level, k2);
  // A lower level 5 % faster: not past the margin, unless there is none.
  const std::vector<std::vector<LevelTiming>> close = {
      {At(k512, 1, 1), At(k2, 0.95, 1)}};
  EXPECT_EQ(DecideLevel(close, kMinGain).level, k512);
  EXPECT_EQ(DecideLevel(close, 0.0).level, k2);
}

TEST(DecideLevelTest, RoundsThatDisagreeAreNotSteady) {
  constexpr IsaLevel k512 = IsaLevel::kAvx512, k2 = IsaLevel::kAvx2;
  // The second round (another process took a core) ranks AVX2 first.
  const LevelDecision d = DecideLevel(
      {{At(k512, 1, 4), At(k2, 2, 8)}, {At(k512, 5, 20), At(k2, 2.1, 8.1)}},
      kMinGain);
  EXPECT_EQ(d.level, k512);  // the minima still say AVX-512
  EXPECT_FALSE(d.steady);
  EXPECT_TRUE(DecideLevel({{At(k512, 1, 4), At(k2, 2, 8)}}, kMinGain).steady);
}

TEST(KernelChoiceCacheTest, ReadRefusesWhatItDidNotWrite) {
  const std::string dir = paceline::testing::MakeTempDir("cache");
  const std::string file = dir + "/c.txt";
  EXPECT_TRUE(absl::IsNotFound(ReadKernelCache(file).status()));
  ASSERT_TRUE(WriteKernelCache(file, {{"F16 a", {"avx2", "1 token 2 ms"}},
                                      {"Q4_K b", {"avx512", ""}}})
                  .ok());
  absl::StatusOr<KernelCacheEntries> read = ReadKernelCache(file);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->at("F16 a").level, "avx2");
  EXPECT_EQ(read->at("F16 a").note, "1 token 2 ms");
  EXPECT_EQ(read->at("Q4_K b").level, "avx512");
  // The file says which CPU wrote it.
  EXPECT_TRUE(absl::StrContains(paceline::testing::ReadFile(file),
                                "\n# " + CpuModelName() + "\n"));

  const std::string text = paceline::testing::ReadFile(file);
  ASSERT_TRUE(paceline::testing::WriteFileAt(
      file, absl::StrReplaceAll(text, {{"\tavx2\t", "\tavx1024\t"}})));
  absl::Status bad = ReadKernelCache(file).status();
  EXPECT_TRUE(absl::IsInvalidArgument(bad));
  EXPECT_TRUE(absl::StrContains(bad.message(), file + ":3:")) << bad;
  ASSERT_TRUE(paceline::testing::WriteFileAt(
      file, absl::StrCat("# paceline cpu kernel choices v0\n")));
  EXPECT_TRUE(absl::StrContains(ReadKernelCache(file).status().message(),
                                file + ":1:"));
  std::filesystem::remove_all(dir);
}

TEST(KernelChoiceCacheTest, TheFileNamesThisCpuModel) {
  const CpuFeatures& f = GetCpuFeatures();
  const std::string file = KernelCacheFile("/var/lib/x");
  EXPECT_TRUE(absl::StartsWith(file, "/var/lib/x/cpu-kernels-")) << file;
  EXPECT_TRUE(absl::EndsWith(file, absl::StrCat("-f", f.family, "-m", f.model,
                                                "-s", f.stepping, ".txt")))
      << file;
}

}  // namespace
}  // namespace paceline::engine::cpu
