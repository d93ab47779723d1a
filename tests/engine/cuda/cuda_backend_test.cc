// Backend selection (engine/backend.h) with the CUDA backend: the KV cache
// types it takes (--kv-dtype f32, f16, q8_0; unset = the device dtype),
// the bytes per token and pool it plans for each, and the ones it refuses.
// Skips where no device is present; the emulated build (emu/) always has
// one.

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/cuda/cuda_engine.h"
#include "engine/model_loader.h"
#include "gtest/gtest.h"
#include "tests/testing/oracle_logits.h"

namespace paceline::engine {
namespace {

// dummy:stories42m:q8_0: 8 layers, 8 KV heads of 64, context 1024; its
// weights run in F16 on CUDA.
constexpr uint64_t kRows = 2 * 8 * 8;  // K and V rows per token
constexpr int64_t kBlocksPerSequence = 1024 / 16;

std::shared_ptr<const ModelWeights> Open(const std::string& source) {
  absl::StatusOr<LoadedModel> m = OpenModel(source);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? m->weights : nullptr;
}

std::shared_ptr<const ModelWeights> Stories42m() {
  static const auto* weights =
      new std::shared_ptr<const ModelWeights>(Open("dummy:stories42m:q8_0"));
  return *weights;
}

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CudaAvailable()) GTEST_SKIP() << "no CUDA device on this machine";
    ASSERT_NE(Stories42m(), nullptr);
  }

  static BackendOptions Cuda() {
    BackendOptions o;
    o.backend = "cuda";
    o.max_running = 16;
    return o;
  }
};

// Each KV type sizes the pool by its own row bytes (Q8_0: 34 per 32
// elements) and reaches the engine; the plan and memory line name it.
TEST_F(CudaBackendTest, TakesF32F16AndQ8Caches) {
  const struct {
    GgmlType type;
    const char* name;
    uint64_t row_bytes;
    GgmlType kv;
  } cases[] = {{GgmlType::kF32, "f32", 64 * 4, GgmlType::kF32},
               {GgmlType::kF16, "f16", 64 * 2, GgmlType::kF16},
               {GgmlType::kQ8_0, "q8_0", 64 / 32 * 34, GgmlType::kQ8_0}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    BackendOptions o = Cuda();
    o.kv_type = c.type;
    const uint64_t per_token = kRows * c.row_bytes;
    // Room for 3 sequences of F32 K/V: 6 of F16, 11 of Q8_0.
    o.kv_memory_bytes = 3 * kBlocksPerSequence * 16 * kRows * 64 * 4;
    absl::StatusOr<Backend> b = MakeBackend(o, Stories42m());
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(b->name, "cuda");
    EXPECT_EQ(DtypeName(b->plan.kv_dtype), c.name);
    EXPECT_EQ(b->plan.kv_bytes_per_token, per_token);
    const int64_t blocks = static_cast<int64_t>(std::min<uint64_t>(
        o.kv_memory_bytes / (16 * per_token), 16 * kBlocksPerSequence));
    EXPECT_EQ(b->num_blocks, blocks);
    EXPECT_EQ(b->plan.sequences, blocks / kBlocksPerSequence);
    auto* engine = dynamic_cast<cuda::CudaEngine*>(b->engine.get());
    ASSERT_NE(engine, nullptr);
    EXPECT_EQ(engine->kv_dtype(), c.kv);
    EXPECT_EQ(engine->kv_pool_bytes(),
              static_cast<uint64_t>(blocks) * 16 * per_token);
    ASSERT_FALSE(b->log_lines.empty());
    EXPECT_NE(b->log_lines.back().find(std::string("(") + c.name + ")"),
              std::string::npos)
        << b->log_lines.back();
  }
}

TEST_F(CudaBackendTest, UnsetKeepsTheDeviceDtype) {
  BackendOptions o = Cuda();
  o.kv_blocks = 4;
  absl::StatusOr<Backend> b = MakeBackend(o, Stories42m());
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->plan.kv_dtype, GgmlType::kF16);  // Q8_0 weights run in F16
  EXPECT_EQ(b->plan.kv_bytes_per_token, kRows * 64 * 2);
}

TEST_F(CudaBackendTest, RefusesOtherCacheTypes) {
  BackendOptions o = Cuda();
  o.kv_blocks = 4;
  o.kv_type = GgmlType::kQ4_0;
  absl::StatusOr<Backend> b = MakeBackend(o, Stories42m());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b.status().message(),
            "KV cache dtype q4_0 is not supported by the CUDA backend: use "
            "f32, f16 or q8_0");
  // BF16 only beside BF16 weights.
  o.kv_type = GgmlType::kBF16;
  b = MakeBackend(o, Stories42m());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument)
      << b.status();
}

// dummy:stories15m's heads of 48 are not whole Q8_0 blocks: refused before
// the pool is sized, naming the head size.
TEST_F(CudaBackendTest, Q8CacheNeedsAHeadSizeOfWholeBlocks) {
  std::shared_ptr<const ModelWeights> weights = Open("dummy:stories15m");
  ASSERT_NE(weights, nullptr);
  BackendOptions o = Cuda();
  o.kv_type = GgmlType::kQ8_0;
  absl::StatusOr<Backend> b = MakeBackend(o, weights);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("head_dim is 48"), std::string::npos)
      << b.status();
}

// Gemma 3's oracle file (4 layers, window 32 on layers 0, 1 and 3): with
// release, 4 KV groups of one layer slot (the global layer's, then one per
// sliding layer), the pool's blocks one slot each; without, one group of
// every layer.
TEST_F(CudaBackendTest, Gemma3SlidingWindowsGetTheirOwnGroups) {
  const std::filesystem::path file =
      ::paceline::testing::OracleNextDir() / "models" / "gemma3-base-f32.gguf";
  if (!std::filesystem::exists(file)) GTEST_SKIP() << "no " << file;
  std::shared_ptr<const ModelWeights> weights = Open(file.string());
  ASSERT_NE(weights, nullptr);
  const uint64_t slot_block_bytes = 2 * 2 * 64 * 2 * 16;  // K, V of 2 heads
  for (const bool release : {true, false}) {
    SCOPED_TRACE(release);
    BackendOptions o = Cuda();
    o.kv_type = GgmlType::kF16;
    o.kv_blocks = 64;
    o.kv_window_release = release;
    absl::StatusOr<Backend> b = MakeBackend(o, weights);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(b->plan.kv_groups, release ? 4 : 1);
    EXPECT_EQ(b->plan.kv_slots, release ? 1 : 4);
    EXPECT_EQ(b->engine->kv_group_windows(),
              release ? std::vector<int32_t>({0, 32, 32, 32})
                      : std::vector<int32_t>({0}));
    auto* engine = dynamic_cast<cuda::CudaEngine*>(b->engine.get());
    ASSERT_NE(engine, nullptr);
    EXPECT_EQ(engine->kv_pool_bytes(),
              64 * slot_block_bytes * (release ? 1 : 4));
  }
}

}  // namespace
}  // namespace paceline::engine
