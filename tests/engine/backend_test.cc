// Backend selection (engine/backend.h): the choice of CPU or CUDA and the
// KV pool's size, on a dummy model.

#include "engine/backend.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/cpu/cpu_features.h"
#include "engine/cpu/kernel_choice_cache.h"
#include "engine/cpu/kernels/matmul.h"
#include "engine/model_loader.h"
#include "gtest/gtest.h"
#include "tests/testing/build_paths.h"
#include "tests/testing/files.h"

namespace paceline::engine {
namespace {

// dummy:stories15m: 6 layers, 6 KV heads of 48, context 256. The CPU's KV
// is f16 by default: 2 × 6 × 6 × 48 × 2 bytes per token.
constexpr uint64_t kCpuKvPerToken = 2 * 6 * 6 * 48 * 2;
constexpr int64_t kBlocksPerSequence = 256 / 16;

std::shared_ptr<const ModelWeights> Dummy() {
  static const auto* weights = [] {
    absl::StatusOr<LoadedModel> m = OpenModel("dummy:stories15m");
    return new std::shared_ptr<const ModelWeights>(m.ok() ? m->weights
                                                          : nullptr);
  }();
  return *weights;
}

BackendOptions Cpu() {
  BackendOptions o;
  o.backend = "cpu";
  o.threads = 1;
  o.pack_weights = false;
  return o;
}

TEST(BackendTest, ExplicitCpu) {
  ASSERT_NE(Dummy(), nullptr);
  BackendOptions o = Cpu();
  o.kv_memory_bytes = 4 * kBlocksPerSequence * 16 * kCpuKvPerToken;
  o.max_running = 8;
  absl::StatusOr<Backend> b = MakeBackend(o, Dummy());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->name, "cpu");
  ASSERT_NE(b->engine, nullptr);
  EXPECT_EQ(b->engine->block_size(), 16);
  EXPECT_EQ(b->engine->num_blocks(), 4 * kBlocksPerSequence);
  EXPECT_EQ(b->num_blocks, 4 * kBlocksPerSequence);
  EXPECT_EQ(b->plan.kv_dtype, GgmlType::kF16);
  EXPECT_EQ(b->plan.kv_bytes_per_token, kCpuKvPerToken);
  EXPECT_EQ(b->plan.context, 256);
  EXPECT_EQ(b->plan.sequences, 4);
  EXPECT_EQ(b->plan.kv_bytes, o.kv_memory_bytes);
  // No fallback line for an explicit choice: the backend's, its kernels,
  // then memory.
  ASSERT_EQ(b->log_lines.size(), 3u);
  EXPECT_EQ(b->log_lines[0].rfind("backend cpu: 1 engine threads", 0), 0u)
      << b->log_lines[0];
  // Every matrix of the dummy model is F16, read row-major (no packing).
  EXPECT_EQ(
      b->log_lines[1],
      absl::StrCat("backend cpu: kernels (",
                   cpu::IsaLevelName(cpu::EffectiveIsaLevel()),
                   " on this CPU, ", cpu::CpuModelName(), "): F16 x",
                   7 * Dummy()->config().n_layers + 1, " ",
                   cpu::MatMulKernelName(GgmlType::kF16, WeightLayout::kRows)));
  EXPECT_EQ(b->log_lines[2].rfind("memory: weights ", 0), 0u);
  EXPECT_NE(b->log_lines[2].find("(4 full-context sequences)"),
            std::string::npos)
      << b->log_lines[2];
}

// With measure_kernels the CPU's kernel levels are chosen first, said in a
// line before the others, and kept in the state directory for the next
// start, which reads them.
TEST(BackendTest, MeasuredKernelLevelsAreLoggedAndKept) {
  ASSERT_NE(Dummy(), nullptr);
  const std::string dir = paceline::testing::MakeTempDir("state");
  BackendOptions o = Cpu();
  o.kv_blocks = kBlocksPerSequence;
  o.measure_kernels = true;
  o.state_dir = dir;
  absl::StatusOr<Backend> b = MakeBackend(o, Dummy());
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(b->log_lines.size(), 4u);
  EXPECT_TRUE(absl::StartsWith(b->log_lines[0],
                               "backend cpu: kernel levels chosen in "))
      << b->log_lines[0];
  const bool choice = cpu::MatMulCandidateLevels(GgmlType::kF16).size() > 1;
  EXPECT_TRUE(absl::StrContains(
      b->log_lines[0],
      absl::StrCat("F16 ", cpu::IsaLevelName(cpu::MatMulLevel(GgmlType::kF16)),
                   " (")))
      << b->log_lines[0];
  // The dummy model's 30 MB of F16 matrices are measured where the CPU
  // has two levels to choose from, and the choice kept unless its rounds
  // disagreed (a busy machine).
  const std::string file = cpu::KernelCacheFile(dir);
  const bool kept = choice && !absl::StrContains(b->log_lines[0], "not cached");
  EXPECT_EQ(std::filesystem::exists(file), kept) << file;
  if (choice) {
    EXPECT_TRUE(absl::StrContains(b->log_lines[0], "(measured"))
        << b->log_lines[0];
  }
  if (kept) {
    absl::StatusOr<Backend> again = MakeBackend(o, Dummy());
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_TRUE(absl::StrContains(again->log_lines[0], "(cached)"))
        << again->log_lines[0];
  }
  EXPECT_TRUE(absl::StartsWith(b->log_lines[2], "backend cpu: kernels ("));
  cpu::ResetMatMulLevels();
  std::filesystem::remove_all(dir);
}

// Gemma 3's oracle file (../shared/oracle-next: 4 layers, window 32 on
// layers 0, 1 and 3, 2 KV heads of 64, context 4,096): the CPU engine
// keeps the sliding layers' K/V in three windowed groups of one layer
// slot beside the global layer's full group. A block is one layer: 2 x 2
// x 64 x 2 bytes x 16 tokens = 8 KiB. A full-context sequence holds the
// full group's 256 blocks and, per windowed group, the window before a
// 512-token step and the step (31 + 512 positions: 35 blocks at most):
// 361 blocks, 2.8 MiB, against 8 MiB with every layer's history.
TEST(BackendTest, SlidingWindowsReleasedCountInThePoolAndTheMemoryLine) {
  const std::string file = ::paceline::testing::SharedPath(
      "oracle-next/models/gemma3-base-f32.gguf");
  absl::StatusOr<LoadedModel> model = OpenModel(file);
  if (!model.ok()) GTEST_SKIP() << file << ": " << model.status();
  constexpr uint64_t kBlockBytes = 2 * 2 * 64 * 2 * 16;
  constexpr int64_t kHeld = 256 + 3 * 35;
  BackendOptions o = Cpu();
  o.kv_memory_bytes = 4 * kHeld * kBlockBytes;
  o.max_running = 8;
  absl::StatusOr<Backend> b = MakeBackend(o, model->weights);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->engine->kv_group_windows(),
            (std::vector<int32_t>{0, 32, 32, 32}));
  EXPECT_EQ(b->num_blocks, 4 * kHeld);
  EXPECT_EQ(b->plan.sequences, 4);
  EXPECT_EQ(b->plan.kv_bytes, o.kv_memory_bytes);
  EXPECT_EQ(b->plan.kv_bytes_per_token, 4 * 2 * 2 * 64 * 2u);
  EXPECT_EQ(b->plan.kv_bytes_per_sequence, kHeld * kBlockBytes);
  EXPECT_EQ(b->plan.kv_bytes_per_sequence_full, 4096 * 4 * 2 * 2 * 64 * 2u);
  ASSERT_EQ(b->log_lines.size(), 3u);
  EXPECT_NE(b->log_lines[2].find("(4 full-context sequences); sliding "
                                 "windows released: 4 KV groups of 1 layer "
                                 "slots, 2.8 MiB per full-context sequence "
                                 "(8.0 MiB with every layer's full history)"),
            std::string::npos)
      << b->log_lines[2];
  // Release off: one group of four layers, 256 blocks of 32 KiB per
  // sequence, so the same budget holds one sequence.
  o.kv_window_release = false;
  b = MakeBackend(o, model->weights);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->engine->kv_group_windows(), std::vector<int32_t>{0});
  EXPECT_EQ(b->plan.sequences, 1);
  EXPECT_EQ(b->log_lines[2].find("sliding"), std::string::npos);
}

// An F32 cache: twice the bytes per token of the default F16, so the same
// budget holds half the sequences; the plan and the memory line say f32.
TEST(BackendTest, F32CacheHoldsHalfTheTokens) {
  ASSERT_NE(Dummy(), nullptr);
  BackendOptions o = Cpu();
  o.kv_type = GgmlType::kF32;
  o.kv_memory_bytes = 4 * kBlocksPerSequence * 16 * kCpuKvPerToken;
  o.max_running = 16;
  absl::StatusOr<Backend> b = MakeBackend(o, Dummy());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->plan.kv_dtype, GgmlType::kF32);
  EXPECT_EQ(b->plan.kv_bytes_per_token, kCpuKvPerToken * 2);
  EXPECT_EQ(b->plan.sequences, 2);
  EXPECT_EQ(b->engine->num_blocks(), 2 * kBlocksPerSequence);
  EXPECT_EQ(b->plan.kv_bytes, o.kv_memory_bytes);
  ASSERT_EQ(b->log_lines.size(), 3u);
  EXPECT_NE(b->log_lines[2].find("f32"), std::string::npos) << b->log_lines[2];
}

// A Q8_0 cache on a shape whose head size is a multiple of 32
// (dummy:stories42m: 8 layers, 8 KV heads of 64): 34 bytes per 32
// elements, 2 × 8 × 8 × 64 / 32 × 34 per token, 3.76x the tokens of F32.
TEST(BackendTest, Q8CacheCountsItsBlockBytes) {
  absl::StatusOr<LoadedModel> m = OpenModel("dummy:stories42m:q8_0");
  ASSERT_TRUE(m.ok()) << m.status();
  BackendOptions o = Cpu();
  o.kv_type = GgmlType::kQ8_0;
  constexpr uint64_t kQ8PerToken = 2 * 8 * 8 * 64 / 32 * 34;
  constexpr uint64_t kF32PerToken = 2 * 8 * 8 * 64 * 4;
  o.kv_memory_bytes =
      2 * 64 * 16 * kF32PerToken;  // 2 sequences of 1,024 in F32
  o.max_running = 16;
  absl::StatusOr<Backend> b = MakeBackend(o, m->weights);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->plan.kv_dtype, GgmlType::kQ8_0);
  EXPECT_EQ(b->plan.kv_bytes_per_token, kQ8PerToken);
  EXPECT_EQ(b->plan.sequences, 7);  // floor(2 x 4 / 1.0625)
  EXPECT_EQ(b->engine->num_blocks(), o.kv_memory_bytes / (16 * kQ8PerToken));
  EXPECT_NE(b->log_lines[2].find("q8_0"), std::string::npos) << b->log_lines[2];
}

// The one KV parser takes bf16 (the CUDA engine stores it beside BF16
// weights); the CPU engine refuses it when the backend is made, naming it.
TEST(BackendTest, CpuRefusesABf16Cache) {
  absl::StatusOr<LoadedModel> m = OpenModel("dummy:stories42m:q8_0");
  ASSERT_TRUE(m.ok()) << m.status();
  BackendOptions o = Cpu();
  o.kv_type = GgmlType::kBF16;
  o.kv_blocks = 4;
  absl::StatusOr<Backend> b = MakeBackend(o, m->weights);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("KV cache dtype BF16 is not supported"),
            std::string::npos)
      << b.status();
}

// Q8_0 blocks hold 32 elements: stories15m's heads of 48 cannot be stored
// as whole blocks, and the error says what to use instead.
TEST(BackendTest, Q8CacheNeedsAHeadSizeOfWholeBlocks) {
  ASSERT_NE(Dummy(), nullptr);
  BackendOptions o = Cpu();
  o.kv_type = GgmlType::kQ8_0;
  o.kv_blocks = 4;
  absl::StatusOr<Backend> b = MakeBackend(o, Dummy());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("multiple of 32"), std::string::npos)
      << b.status();
  EXPECT_NE(b.status().message().find("48"), std::string::npos) << b.status();
}

TEST(BackendTest, OtherBlockQuantizedCachesAreRefused) {
  ASSERT_NE(Dummy(), nullptr);
  BackendOptions o = Cpu();
  o.kv_type = GgmlType::kQ4_0;
  o.kv_blocks = 4;
  absl::StatusOr<Backend> b = MakeBackend(o, Dummy());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BackendTest, UnsetChoosesCudaWhenAvailableElseCpuAndSaysWhy) {
  ASSERT_NE(Dummy(), nullptr);
  BackendOptions o = Cpu();
  o.backend = "";
  absl::StatusOr<Backend> b = MakeBackend(o, Dummy());
  ASSERT_TRUE(b.ok()) << b.status();
  if (CudaAvailable()) {
    EXPECT_EQ(b->name, "cuda");
    return;
  }
  EXPECT_EQ(b->name, "cpu");
  ASSERT_FALSE(b->log_lines.empty());
  EXPECT_EQ(b->log_lines[0],
            BuildHasCuda() ? "no CUDA device found: using the CPU backend"
                           : "this build has no CUDA backend: using the CPU");
}

TEST(BackendTest, ExplicitCudaWithoutADeviceIsAnError) {
  if (CudaAvailable()) GTEST_SKIP() << "this machine has a CUDA device";
  ASSERT_NE(Dummy(), nullptr);
  BackendOptions o = Cpu();
  o.backend = "cuda";
  o.backend_setting = "model.backend";
  absl::StatusOr<Backend> b = MakeBackend(o, Dummy());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(b.status().message(),
            BuildHasCuda()
                ? "model.backend is cuda but no CUDA device was found"
                : "model.backend is cuda but this build has no CUDA backend "
                  "(nvcc was not found when it was built)");
}

TEST(BackendTest, UnknownBackendIsInvalid) {
  ASSERT_NE(Dummy(), nullptr);
  BackendOptions o = Cpu();
  o.backend = "tpu";
  o.backend_setting = "--backend";
  absl::StatusOr<Backend> b = MakeBackend(o, Dummy());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b.status().message(), "--backend must be cpu or cuda, got 'tpu'");
}

TEST(BackendTest, BlockSizeBelowOneIsInvalid) {
  ASSERT_NE(Dummy(), nullptr);
  BackendOptions o = Cpu();
  o.block_size = 0;
  o.kv_blocks = 3;
  EXPECT_EQ(MakeBackend(o, Dummy()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(BackendTest, ExplicitBlocksNeedNoFullContext) {
  ASSERT_NE(Dummy(), nullptr);
  BackendOptions o = Cpu();
  o.kv_blocks = 3;
  absl::StatusOr<Backend> b = MakeBackend(o, Dummy());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->engine->num_blocks(), 3);
  EXPECT_EQ(b->plan.sequences, 0);
  EXPECT_EQ(b->plan.kv_bytes, 3 * 16 * kCpuKvPerToken);
  EXPECT_EQ(b->log_lines.back().find("full-context"), std::string::npos);
}

TEST(BackendTest, BudgetTooSmallForOneSequenceIsResourceExhausted) {
  ASSERT_NE(Dummy(), nullptr);
  BackendOptions o = Cpu();
  o.kv_memory_bytes = (kBlocksPerSequence - 1) * 16 * kCpuKvPerToken;
  absl::StatusOr<Backend> b = MakeBackend(o, Dummy());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted)
      << b.status();
}

// A fraction of the host's memory is far more than two sequences of this
// small model need: the max_running cap decides.
TEST(BackendTest, FractionOfHostMemoryIsCappedAtMaxRunning) {
  ASSERT_NE(Dummy(), nullptr);
  BackendOptions o = Cpu();
  o.kv_memory_fraction = 0.5;
  o.max_running = 2;
  absl::StatusOr<Backend> b = MakeBackend(o, Dummy());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->num_blocks, 2 * kBlocksPerSequence);
  EXPECT_EQ(b->plan.sequences, 2);
}

TEST(KvBudgetBytesTest, BytesWinOverTheFraction) {
  BackendOptions o;
  o.kv_memory_fraction = 0.25;
  EXPECT_EQ(KvBudgetBytes(o, 1000), 250u);
  o.kv_memory_bytes = 77;
  EXPECT_EQ(KvBudgetBytes(o, 1000), 77u);
}

TEST(KvPoolBlocksTest, TheBudgetOrTheMaxRunningCapDecides) {
  BackendOptions o;
  o.block_size = 16;
  o.max_running = 4;
  // 100 tokens of context: 7 blocks per sequence; 10 bytes per token.
  EXPECT_EQ(*KvPoolBlocks(o, 100, 160 * 20, 10), 20);    // the budget
  EXPECT_EQ(*KvPoolBlocks(o, 100, 160 * 1000, 10), 28);  // 4 × 7
  o.max_running = 0;                                     // counts as 1
  EXPECT_EQ(*KvPoolBlocks(o, 100, 160 * 1000, 10), 7);
}

TEST(KvPoolBlocksTest, LessThanOneSequenceIsResourceExhausted) {
  BackendOptions o;
  o.block_size = 16;
  o.max_running = 4;
  absl::StatusOr<int64_t> blocks = KvPoolBlocks(o, 100, 160 * 6, 10);
  EXPECT_EQ(blocks.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(blocks.status().message(),
            "kv_cache: the budget of 0.0 MiB holds 6 blocks of 16 tokens; one "
            "sequence of the model's context needs 7");
  EXPECT_EQ(*KvPoolBlocks(o, 100, 160 * 7, 10), 7);
}

TEST(KvPoolBlocksTest, NonPositiveSizesAreInvalid) {
  BackendOptions o;
  o.block_size = 0;
  EXPECT_EQ(KvPoolBlocks(o, 100, 1000, 10).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.block_size = 16;
  EXPECT_EQ(KvPoolBlocks(o, 100, 1000, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(KvPoolBlocks(o, 0, 1000, 10).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace paceline::engine
