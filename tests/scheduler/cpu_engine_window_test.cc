// Sliding-window KV release end to end (kvpager/kv_pager.h "layer groups",
// engine/model/kv_layout.h) on the CPU engine with Gemma 3's oracle file
// (../shared/oracle-next: 4 layers, window 32 on layers 0, 1 and 3):
//  - llama.cpp's logits at every stored position with the windowed groups'
//    blocks given back and reused as the 1,200-token prompt runs, the same
//    bits as with every layer's full history (and gpt-oss's file: sinks);
//  - through the scheduler, with release on: requests sharing a prefix,
//    drafting speculatively, chunked and preempted in a pool too small for
//    them together, and a group of n = 3 forking its prompt, each give the
//    greedy tokens they get alone with full history; a long generation
//    runs in a pool that could not hold its full history; no block leaks.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/model_loader.h"
#include "gtest/gtest.h"
#include "scheduler/offline_runner.h"
#include "scheduler/serving_loop.h"
#include "scheduler/token_sink.h"
#include "tests/testing/oracle_logits.h"

namespace paceline::scheduler {
namespace {

constexpr int32_t kBlockSize = 16;

class Gemma3WindowTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::filesystem::path file = ::paceline::testing::OracleNextDir() /
                                       "models" / "gemma3-base-f32.gguf";
    if (!std::filesystem::exists(file)) GTEST_SKIP() << "no " << file;
    absl::StatusOr<engine::LoadedModel> model = engine::OpenModel(file.string());
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
  }

  std::unique_ptr<engine::cpu::CpuEngine> MakeEngine(int32_t num_blocks,
                                                     bool release,
                                                     int32_t step = 32) {
    engine::cpu::CpuEngineOptions options;
    options.block_size = kBlockSize;
    options.num_blocks = num_blocks;
    options.max_tokens_per_step = step;
    options.num_threads = 2;
    options.kv_window_release = release;
    auto engine = engine::cpu::CpuEngine::Create(model_.weights, options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? *std::move(engine) : nullptr;
  }

  static OfflineRequest Greedy(std::vector<int32_t> prompt, int32_t max_tokens,
                               int32_t drafts = 0) {
    OfflineRequest r;
    r.prompt = std::move(prompt);
    r.sampling.temperature = 0;
    r.stop.max_tokens = max_tokens;
    r.max_draft_tokens = drafts;
    return r;
  }

  // Each request alone with every layer's full history, in a pool that
  // holds it.
  std::vector<OfflineResult> AloneWithFullHistory(
      const std::vector<OfflineRequest>& requests) {
    std::vector<OfflineResult> alone;
    for (const OfflineRequest& r : requests) {
      const int64_t blocks = KvBlocksToRunTogether({r}, kBlockSize);
      auto result =
          RunOffline(MakeEngine(static_cast<int32_t>(blocks), false),
                     *model_.tokenizer, {r}, OfflineOptions());
      EXPECT_TRUE(result.ok()) << result.status();
      alone.push_back(result.ok() ? (*result)[0] : OfflineResult());
    }
    return alone;
  }

  std::vector<int32_t> Tokens(int32_t first, int32_t n) const {
    std::vector<int32_t> ids;
    const int32_t vocab = static_cast<int32_t>(model_.weights->config().n_vocab);
    for (int32_t i = 0; i < n; ++i) ids.push_back((first + 37 * i) % vocab);
    return ids;
  }

  engine::LoadedModel model_;
};

// llama.cpp's logits with release on and off, the same bits: Gemma 3's
// file, and gpt-oss's (../shared/oracle-next: 2 layers, layer 0 sliding
// with window 32 and attention sinks, layer 1 global).
TEST(OracleWindowTest, ReleaseKeepsLlamaCppsLogitsBitForBit) {
  struct Case {
    const char* name;
    std::vector<int32_t> windows;  // with release
  };
  for (const Case& c :
       {Case{"gemma3-base-f32", {0, 32, 32, 32}},
        Case{"gpt-oss-base-f32", {0, 32}}}) {
    SCOPED_TRACE(c.name);
    const std::filesystem::path file = ::paceline::testing::OracleNextDir() /
                                       "models" / (std::string(c.name) +
                                                   ".gguf");
    if (!std::filesystem::exists(file)) continue;
    absl::StatusOr<engine::LoadedModel> model =
        engine::OpenModel(file.string());
    ASSERT_TRUE(model.ok()) << model.status();
    ::paceline::testing::OracleMeasure by_release[2];
    for (const bool release : {true, false}) {
      // 128 blocks: with release one layer each (the full group's 76 for
      // 1,216 positions, the windowed groups' few); without, every layer
      // each (76).
      engine::cpu::CpuEngineOptions options;
      options.block_size = kBlockSize;
      options.num_blocks = 128;
      options.max_tokens_per_step = 128;
      options.num_threads = 2;
      options.kv_window_release = release;
      auto engine = engine::cpu::CpuEngine::Create(model->weights, options);
      ASSERT_TRUE(engine.ok()) << engine.status();
      EXPECT_EQ((*engine)->kv_group_windows(),
                release ? c.windows : std::vector<int32_t>({0}));
      ::paceline::testing::OracleRunOptions run;
      run.ref_dir = ::paceline::testing::OracleNextDir() / "ref";
      ::paceline::testing::OracleMeasure& m = by_release[release ? 0 : 1];
      const absl::Status s =
          ::paceline::testing::MeasureOracleFile(**engine, c.name, run, &m);
      ASSERT_TRUE(s.ok()) << s;
      EXPECT_EQ(m.positions, 85);
      EXPECT_LE(m.max_rel, ::paceline::testing::OracleTolerance(c.name));
      EXPECT_EQ(m.argmax_equal, m.argmax_checked);
    }
    EXPECT_EQ(by_release[0].max_rel, by_release[1].max_rel);
    EXPECT_EQ(by_release[0].logits_hash, by_release[1].logits_hash);
  }
}

TEST_F(Gemma3WindowTest, TogetherUnderPreemptionEqualsAloneWithFullHistory) {
  const std::vector<int32_t> shared = Tokens(5, 70);
  std::vector<int32_t> sibling(shared.begin(), shared.begin() + 64);
  const std::vector<int32_t> tail = Tokens(300, 9);
  sibling.insert(sibling.end(), tail.begin(), tail.end());
  const std::vector<OfflineRequest> requests = {
      Greedy(shared, 90),          // 70 + 89 positions
      Greedy(sibling, 70),         // its first 4 blocks cached by the first
      Greedy(Tokens(11, 9), 120, /*drafts=*/4),
      Greedy(Tokens(400, 45), 60),
  };
  const std::vector<OfflineResult> alone = AloneWithFullHistory(requests);
  ASSERT_EQ(alone.size(), requests.size());
  // With release a request holds its full group's blocks and at most 5
  // per windowed group (31 + 32 positions): the longest, 159 positions,
  // 10 + 15 = 25 blocks of one layer; the four together need more than
  // 40, so 40 preempts. Then in a pool that holds them all.
  for (const int32_t blocks : {40, 160}) {
    SCOPED_TRACE(blocks);
    OfflineOptions options;
    options.max_batched_tokens = 16;
    OfflineStats stats;
    auto together = RunOffline(MakeEngine(blocks, true), *model_.tokenizer,
                               requests, options, &stats);
    ASSERT_TRUE(together.ok()) << together.status();
    if (blocks == 40) {
      EXPECT_GT(stats.preemptions, 0);
    } else {
      EXPECT_EQ(stats.preemptions, 0);
    }
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ((*together)[i].tokens, alone[i].tokens) << "request " << i;
      EXPECT_EQ((*together)[i].finish.reason, alone[i].finish.reason);
    }
    // The sibling's first 64 tokens came from the cache when nothing
    // preempted it first.
    if (blocks == 160) {
      EXPECT_EQ((*together)[1].finish.usage.cached_prompt_tokens, 64);
    }
  }
}

TEST_F(Gemma3WindowTest, ALongGenerationFitsWhereFullHistoryWouldNot) {
  // 8 + 399 positions: 26 blocks per layer group. Full history takes 26
  // blocks of four layers (104 one-layer blocks of memory); released, the
  // full group's 26 and at most 5 for each windowed one: 41 one-layer
  // blocks, so 44 run it without a preemption.
  const std::vector<OfflineRequest> requests = {Greedy(Tokens(3, 8), 400)};
  const std::vector<OfflineResult> alone = AloneWithFullHistory(requests);
  OfflineStats stats;
  auto released = RunOffline(MakeEngine(44, true), *model_.tokenizer, requests,
                             OfflineOptions(), &stats);
  ASSERT_TRUE(released.ok()) << released.status();
  EXPECT_EQ(stats.preemptions, 0);
  EXPECT_EQ((*released)[0].tokens, alone[0].tokens);
  // Refused outright without release: 26 four-layer blocks > 11 (44
  // one-layer blocks' memory).
  auto full = RunOffline(MakeEngine(11, false), *model_.tokenizer, requests,
                         OfflineOptions());
  EXPECT_FALSE(full.ok());
}

TEST_F(Gemma3WindowTest, AGroupForksItsWindowedBlocks) {
  const std::vector<int32_t> prompt = Tokens(21, 41);  // a partial block
  const std::vector<OfflineResult> alone =
      AloneWithFullHistory({Greedy(prompt, 60)});
  ServingLoopOptions options;
  options.scheduler.max_batched_tokens = 16;
  TenantConfig tenant;
  tenant.name = "offline";
  options.scheduler.tenants = {tenant};
  auto loop = ServingLoop::Create(MakeEngine(64, true), model_.tokenizer.get(),
                                  options);
  ASSERT_TRUE(loop.ok()) << loop.status();
  std::vector<RequestSpec> specs;
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (int i = 0; i < 3; ++i) {
    RequestSpec spec;
    spec.tenant = "offline";
    spec.prompt = prompt;
    spec.sampling.temperature = 0;
    spec.stop.max_tokens = 60;
    auto sink = std::make_shared<CollectingSink>();
    spec.sink = sink;
    sinks.push_back(sink);
    specs.push_back(std::move(spec));
  }
  ASSERT_TRUE((*loop)->SubmitGroup(std::move(specs)).ok());
  (*loop)->RunUntilIdle();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(sinks[i]->finished());
    EXPECT_EQ(sinks[i]->tokens(), alone[0].tokens) << "choice " << i;
  }
  const kvpager::PagerStats kv = (*loop)->scheduler().pager().Stats();
  // The fork point, 40 tokens, ends in a partial block each group shares
  // three ways: the first two members to write past it copy it, in each
  // of the four groups. Every block is back.
  EXPECT_EQ(kv.cow_copies, 2 * 4);
  EXPECT_EQ(kv.used_blocks, 0);
  EXPECT_EQ(kv.free_blocks + kv.cached_blocks, 64);
  EXPECT_EQ((*loop)->scheduler().counters().preemptions, 0);
}

}  // namespace
}  // namespace paceline::scheduler
