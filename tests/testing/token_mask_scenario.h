#ifndef PACELINE_TESTS_TESTING_TOKEN_MASK_SCENARIO_H_
#define PACELINE_TESTS_TESTING_TOKEN_MASK_SCENARIO_H_

// The sampling chain's token mask held through the scheduler's hard cases,
// over any engine that runs stories260K (the CPU engine, the CUDA engine
// and its emulation): a scripted mask (scripted_masks.h) on n-gram drafts,
// on a group of n = 4 forked from one prompt, and on requests preempted
// and recomputed — with rows sampled on the host or in the engine. Header
// only: the test binaries that use it link the scheduler.

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/engine.h"
#include "engine/sampling/sampler.h"
#include "engine/tokenizer/tokenizer.h"
#include "gtest/gtest.h"
#include "scheduler/offline_runner.h"
#include "scheduler/serving_loop.h"
#include "scheduler/step_sampler.h"
#include "scheduler/token_sink.h"
#include "tests/testing/scripted_masks.h"
#include "tests/testing/stories260k_oracle.h"

namespace paceline::testing {

// An engine over stories260K with `num_blocks` KV blocks of 16 tokens.
using EngineFactory =
    std::function<std::unique_ptr<engine::Engine>(int32_t num_blocks)>;

struct MaskedRun {
  std::vector<std::vector<int32_t>> tokens;  // per member
  std::vector<scheduler::FinishInfo> finish;
  scheduler::SchedulerCounters counters;
};

// A group of n members of `sampling` (member i with seed + i) on "Once upon
// a time", through a serving loop over `num_blocks` blocks.
inline MaskedRun RunMaskedGroup(const EngineFactory& make_engine,
                                const engine::Tokenizer& tokenizer,
                                const engine::SamplingParams& sampling, int n,
                                int32_t max_tokens, int32_t drafts,
                                int32_t num_blocks,
                                scheduler::EngineSampling where,
                                int32_t forced = 0) {
  scheduler::ServingLoopOptions options;
  options.scheduler.max_batched_tokens = 16;
  scheduler::TenantConfig tenant;
  tenant.name = "offline";
  options.scheduler.tenants = {tenant};
  options.engine_sampling = where;
  auto loop = scheduler::ServingLoop::Create(make_engine(num_blocks),
                                             &tokenizer, options);
  EXPECT_TRUE(loop.ok()) << loop.status();
  MaskedRun run;
  if (!loop.ok()) return run;
  std::vector<scheduler::RequestSpec> specs;
  std::vector<std::shared_ptr<scheduler::CollectingSink>> sinks;
  for (int i = 0; i < n; ++i) {
    scheduler::RequestSpec spec;
    spec.tenant = "offline";
    spec.prompt = kOnceUponATimePrompt;
    spec.sampling = sampling;
    spec.sampling.seed = sampling.seed + static_cast<uint64_t>(i);
    spec.stop.max_tokens = max_tokens;
    spec.max_draft_tokens = drafts;
    spec.max_forced_tokens = forced;
    sinks.push_back(std::make_shared<scheduler::CollectingSink>());
    spec.sink = sinks.back();
    specs.push_back(std::move(spec));
  }
  const auto ids = (*loop)->SubmitGroup(std::move(specs));
  EXPECT_TRUE(ids.ok()) << ids.status();
  (*loop)->RunUntilIdle();
  for (const auto& sink : sinks) {
    EXPECT_TRUE(sink->finished());
    if (!sink->finished()) continue;
    run.tokens.push_back(sink->tokens());
    run.finish.push_back(sink->finish());
  }
  run.counters = (*loop)->scheduler().counters();
  return run;
}

// Every member's tokens follow the mask's script, and no member failed.
inline void ExpectFollowsParity(const MaskedRun& run, int32_t first_parity,
                                bool alternate) {
  for (size_t m = 0; m < run.tokens.size(); ++m) {
    EXPECT_NE(run.finish[m].reason, scheduler::FinishReason::kError)
        << "member " << m << ": " << run.finish[m].status;
    for (size_t k = 0; k < run.tokens[m].size(); ++k) {
      ASSERT_EQ(run.tokens[m][k] % 2,
                ParityMask::ParityAt(static_cast<int64_t>(k), first_parity,
                                     alternate))
          << "member " << m << " token " << k << " is " << run.tokens[m][k];
    }
  }
}

// The scenario: (1) greedy under "even ids only" with drafts accepts
// drafts and keeps every token even; (2) a sampled group of 4 under the
// alternating mask, with drafts, in a pool too small for the group
// (preemption), gives each member the tokens it gets alone without drafts
// in a large pool, all following the script; (3) a mask that allows
// nothing fails the request with the mask named, and frees its blocks.
inline void ExpectMaskHolds(const EngineFactory& make_engine,
                            const engine::Tokenizer& tokenizer,
                            scheduler::EngineSampling where) {
  engine::SamplingParams even;
  even.temperature = 0;
  even.mask = std::make_shared<ParityMask>(0, /*alternate=*/false);
  const MaskedRun drafted =
      RunMaskedGroup(make_engine, tokenizer, even, 1, 48, 4, 64, where);
  ASSERT_EQ(drafted.tokens.size(), 1u);
  ExpectFollowsParity(drafted, 0, false);
  EXPECT_GT(drafted.finish[0].usage.accepted_draft_tokens, 0);

  engine::SamplingParams sampled;
  sampled.temperature = 0.9f;
  sampled.top_p = 0.95f;
  sampled.seed = 700;
  sampled.mask = std::make_shared<ParityMask>(1);
  // Each member needs 3 blocks (5 + 39 positions, + drafts); 6 hold two.
  const MaskedRun group =
      RunMaskedGroup(make_engine, tokenizer, sampled, 4, 40, 3, 6, where);
  ASSERT_EQ(group.tokens.size(), 4u);
  EXPECT_GT(group.counters.preemptions, 0);
  ExpectFollowsParity(group, 1, true);
  for (int i = 0; i < 4; ++i) {
    engine::SamplingParams alone_params = sampled;
    alone_params.seed = sampled.seed + static_cast<uint64_t>(i);
    const MaskedRun alone = RunMaskedGroup(make_engine, tokenizer, alone_params,
                                           1, 40, 0, 64, where);
    ASSERT_EQ(alone.tokens.size(), 1u);
    EXPECT_EQ(group.tokens[i], alone.tokens[0]) << "member " << i;
  }
  EXPECT_NE(group.tokens[0], group.tokens[1]);

  engine::SamplingParams nothing;
  nothing.mask = std::make_shared<NothingMask>();
  const MaskedRun failed =
      RunMaskedGroup(make_engine, tokenizer, nothing, 1, 8, 0, 64, where);
  ASSERT_EQ(failed.finish.size(), 1u);
  EXPECT_EQ(failed.finish[0].reason, scheduler::FinishReason::kError);
  EXPECT_NE(failed.finish[0].status.message().find("token mask allows no"),
            std::string::npos)
      << failed.finish[0].status;
  EXPECT_TRUE(failed.tokens[0].empty());
}

// A draft is cut at the first token the mask refuses: under a mask that
// allows no trigram twice, n-gram drafts (continuations of an earlier
// occurrence of the last tokens) are never run, while the same request
// without it drafts; the output follows the mask.
inline void ExpectDraftsCutByTheMask(const EngineFactory& make_engine,
                                     const engine::Tokenizer& tokenizer,
                                     scheduler::EngineSampling where) {
  engine::SamplingParams greedy;
  greedy.temperature = 0;
  const MaskedRun free =
      RunMaskedGroup(make_engine, tokenizer, greedy, 1, 64, 4, 64, where);
  ASSERT_EQ(free.finish.size(), 1u);
  EXPECT_GT(free.finish[0].usage.draft_tokens, 0);
  greedy.mask = std::make_shared<NoRepeatTrigramMask>(kOnceUponATimePrompt);
  const MaskedRun masked =
      RunMaskedGroup(make_engine, tokenizer, greedy, 1, 64, 4, 64, where);
  ASSERT_EQ(masked.finish.size(), 1u);
  EXPECT_NE(masked.finish[0].reason, scheduler::FinishReason::kError)
      << masked.finish[0].status;
  EXPECT_EQ(masked.tokens[0].size(), 64u);
  EXPECT_EQ(masked.finish[0].usage.draft_tokens, 0);
  std::vector<int32_t> all = kOnceUponATimePrompt;
  all.insert(all.end(), masked.tokens[0].begin(), masked.tokens[0].end());
  for (size_t i = 2; i < all.size(); ++i) {
    for (size_t j = 2; j < i; ++j) {
      EXPECT_FALSE(all[j - 2] == all[i - 2] && all[j - 1] == all[i - 1] &&
                   all[j] == all[i])
          << "trigram at " << i << " repeats the one at " << j;
    }
  }
}

// Fast-forward changes what the engine computes, not what is generated:
// under a mask that forces 3 tokens after each free one, a sampled group
// of 4 with fast-forward, drafts and preemption gives each member the
// tokens it gets alone without any of them, in fewer steps alone; usage
// counts the forced tokens among the completion tokens.
inline void ExpectFastForwardKeepsOutput(const EngineFactory& make_engine,
                                         const engine::Tokenizer& tokenizer,
                                         scheduler::EngineSampling where) {
  const int32_t vocab = static_cast<int32_t>(tokenizer.vocab_size());
  engine::SamplingParams sampled;
  sampled.temperature = 0.9f;
  sampled.seed = 900;
  sampled.mask = std::make_shared<ForcingMask>(3, vocab);
  constexpr int32_t kMaxTokens = 38;
  const MaskedRun group = RunMaskedGroup(make_engine, tokenizer, sampled, 4,
                                         kMaxTokens, 3, 6, where, 32);
  ASSERT_EQ(group.tokens.size(), 4u);
  EXPECT_GT(group.counters.preemptions, 0);
  for (int i = 0; i < 4; ++i) {
    engine::SamplingParams alone_params = sampled;
    alone_params.seed = sampled.seed + static_cast<uint64_t>(i);
    const MaskedRun slow = RunMaskedGroup(make_engine, tokenizer, alone_params,
                                          1, kMaxTokens, 0, 64, where, 0);
    const MaskedRun fast = RunMaskedGroup(make_engine, tokenizer, alone_params,
                                          1, kMaxTokens, 0, 64, where, 32);
    ASSERT_EQ(slow.tokens.size(), 1u);
    ASSERT_EQ(fast.tokens.size(), 1u);
    EXPECT_EQ(group.tokens[i], slow.tokens[0]) << "member " << i;
    EXPECT_EQ(fast.tokens[0], slow.tokens[0]) << "member " << i;
    // 38 tokens: free at 0, 4, ..., 36 (10), the other 28 forced.
    ASSERT_EQ(slow.tokens[0].size(), static_cast<size_t>(kMaxTokens));
    for (size_t k = 1; k < slow.tokens[0].size(); ++k) {
      const size_t free_at = k - k % 4;
      if (k % 4 == 0) continue;
      EXPECT_EQ(slow.tokens[0][k],
                ForcingMask::Forced(slow.tokens[0][free_at],
                                    static_cast<int32_t>(k % 4), vocab))
          << "token " << k;
    }
    EXPECT_EQ(slow.finish[0].usage.forced_tokens, 0);
    EXPECT_EQ(fast.finish[0].usage.forced_tokens, 28);
    EXPECT_EQ(group.finish[i].usage.forced_tokens, 28);
    EXPECT_EQ(fast.finish[0].usage.completion_tokens, kMaxTokens);
    // One step per free token (and the prompt's), not one per token.
    EXPECT_LT(fast.counters.steps, slow.counters.steps / 2);
  }
}

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_TOKEN_MASK_SCENARIO_H_
