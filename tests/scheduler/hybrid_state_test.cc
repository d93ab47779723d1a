// The scheduler on a hybrid model's engine (recurrent-state slots), over a
// fake engine that checks every slice's state against its K/V
// (hybrid_fake_engine.h): slices name their leases' distinct slots, at most
// as many requests run as there are slots, a group's forks copy the
// parent's state, preemption frees the slot and recomputes the state from
// position 0, rejected drafts roll the state back (snapshot and
// recompute), the prefix cache gives nothing, and no slot leaks.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "kvpager/pager_stats.h"
#include "scheduler/serving_loop.h"
#include "scheduler/token_sink.h"
#include "tests/scheduler/hybrid_fake_engine.h"
#include "tests/testing/scheduler_test_util.h"

namespace paceline::scheduler {
namespace {

using ::paceline::testing::FakeEngineOptions;
using ::paceline::testing::TokenScript;
using testing::ByteTokenizer;
using testing::HybridFakeEngine;
using testing::TaggedPrompt;

constexpr int32_t kVocab = 2048;

// Mostly the token four back (so n-gram drafts are mostly right), but at
// every position that is a multiple of 11 a token of its own (a draft
// across it is rejected).
int32_t RepeatScript(absl::Span<const int32_t> context) {
  const size_t n = context.size();
  if (n % 11 == 0) return 'a' + static_cast<int32_t>(n % 26);
  return n >= 4 ? context[n - 4] : 'x';
}

struct HybridSetup {
  int32_t slots = 8;
  int32_t num_blocks = 256;
  int32_t max_batched_tokens = 64;
  int32_t max_running = 16;
  int32_t speculation_max_step_tokens = 4;
  // SchedulerOptions'; off unless a test is about the prefix cache (the
  // snapshots' copies and slots would blur the counts of the others).
  int32_t state_snapshots = 0;
  TokenScript script = ::paceline::testing::LetterScript;
};

struct Outcome {
  std::vector<std::vector<int32_t>> tokens;  // by request, groups flattened
  std::vector<FinishInfo> finish;
  SchedulerCounters counters;
  kvpager::PagerStats kv;
  absl::Status consistency;
  int32_t max_running = 0;
  int64_t mismatches = 0;
  int64_t engine_state_copies = 0;
  int32_t max_slices = 0;
  std::vector<int32_t> used_slots;
};

RequestSpec Spec(std::vector<int32_t> prompt, int32_t max_tokens,
                 int32_t drafts = 0) {
  RequestSpec spec;
  spec.tenant = "t";
  spec.prompt = std::move(prompt);
  spec.sampling.temperature = 0;
  spec.stop.max_tokens = max_tokens;
  spec.max_draft_tokens = drafts;
  spec.sink = std::make_shared<CollectingSink>();
  return spec;
}

// Runs `groups` (each submitted with SubmitGroup, in order) to the end.
Outcome RunHybrid(std::vector<std::vector<RequestSpec>> groups,
                  const HybridSetup& setup) {
  static const auto* tokenizer = ByteTokenizer(kVocab).release();
  FakeEngineOptions engine_options;
  engine_options.n_vocab = kVocab;
  engine_options.num_blocks = setup.num_blocks;
  engine_options.max_tokens_per_step = 64;
  engine_options.script = setup.script;
  auto engine = std::make_unique<HybridFakeEngine>(engine_options, setup.slots);
  HybridFakeEngine* hybrid = engine.get();
  ServingLoopOptions options;
  options.scheduler.max_batched_tokens = setup.max_batched_tokens;
  options.scheduler.max_running = setup.max_running;
  options.scheduler.speculation_max_step_tokens =
      setup.speculation_max_step_tokens;
  options.scheduler.state_snapshots = setup.state_snapshots;
  options.scheduler.tenants = {testing::Tenant("t")};
  auto loop = ServingLoop::Create(std::move(engine), tokenizer, options);
  EXPECT_TRUE(loop.ok()) << loop.status();
  Outcome out;
  if (!loop.ok()) return out;
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (std::vector<RequestSpec>& group : groups) {
    for (const RequestSpec& spec : group) {
      sinks.push_back(std::static_pointer_cast<CollectingSink>(spec.sink));
    }
    const auto ids = (*loop)->SubmitGroup(std::move(group));
    EXPECT_TRUE(ids.ok()) << ids.status();
  }
  (*loop)->RunUntilIdle();
  for (const auto& sink : sinks) {
    EXPECT_TRUE(sink->finished());
    out.tokens.push_back(sink->tokens());
    out.finish.push_back(sink->finished() ? sink->finish() : FinishInfo());
    EXPECT_EQ(out.finish.back().reason, FinishReason::kLength)
        << out.finish.back().status;
  }
  const Scheduler& scheduler = (*loop)->scheduler();
  out.counters = scheduler.counters();
  out.kv = scheduler.pager().Stats();
  out.consistency = scheduler.pager().CheckConsistency();
  out.max_running = scheduler.max_running();
  out.mismatches = hybrid->mismatches();
  out.engine_state_copies = hybrid->state_copies();
  out.max_slices = hybrid->max_slices();
  out.used_slots = hybrid->used_slots();
  return out;
}

std::vector<std::vector<RequestSpec>> Singles(std::vector<RequestSpec> specs) {
  std::vector<std::vector<RequestSpec>> groups;
  for (RequestSpec& spec : specs) {
    groups.emplace_back();
    groups.back().push_back(std::move(spec));
  }
  return groups;
}

// Everything given back, nothing inconsistent, no state ever wrong.
void ExpectClean(const Outcome& out) {
  EXPECT_EQ(out.mismatches, 0);
  EXPECT_TRUE(out.consistency.ok()) << out.consistency;
  // Slots left held keep cached prefixes' state (snapshots), no request's.
  EXPECT_EQ(out.kv.free_state_slots + out.kv.state_snapshots,
            out.kv.total_state_slots);
  EXPECT_EQ(out.kv.used_blocks, 0);
}

// Each request of `specs` alone (a pool that holds it, no preemption).
std::vector<std::vector<int32_t>> Alone(
    const std::vector<std::pair<std::vector<int32_t>, int32_t>>& requests,
    HybridSetup setup, int32_t drafts = 0) {
  setup.num_blocks = 256;
  std::vector<std::vector<int32_t>> tokens;
  for (const auto& [prompt, max_tokens] : requests) {
    Outcome out = RunHybrid(Singles({Spec(prompt, max_tokens, drafts)}), setup);
    ExpectClean(out);
    tokens.push_back(out.tokens.empty() ? std::vector<int32_t>{}
                                        : out.tokens[0]);
  }
  return tokens;
}

const std::vector<std::pair<std::vector<int32_t>, int32_t>>& Requests() {
  static const auto* requests =
      new std::vector<std::pair<std::vector<int32_t>, int32_t>>{
          {TaggedPrompt(0, 7), 40},
          {TaggedPrompt(1, 21), 33},
          {TaggedPrompt(2, 3), 50},
          {TaggedPrompt(3, 40), 20}};
  return *requests;
}

std::vector<RequestSpec> Specs(int32_t drafts = 0) {
  std::vector<RequestSpec> specs;
  for (const auto& [prompt, max_tokens] : Requests()) {
    specs.push_back(Spec(prompt, max_tokens, drafts));
  }
  return specs;
}

TEST(SchedulerStateSlotsTest, TogetherEqualsAloneOnDistinctSlots) {
  const HybridSetup setup;
  const auto alone = Alone(Requests(), setup);
  const Outcome together = RunHybrid(Singles(Specs()), setup);
  ExpectClean(together);
  EXPECT_EQ(together.tokens, alone);
  EXPECT_EQ(together.max_slices, 4);  // they ran together
  for (int32_t slot : together.used_slots) {
    EXPECT_GE(slot, 0);
    EXPECT_LT(slot, setup.slots);
  }
  EXPECT_EQ(together.kv.total_state_slots, setup.slots);
  EXPECT_EQ(together.engine_state_copies, 0);  // no fork, no draft
}

TEST(SchedulerStateSlotsTest, MaxRunningIsAtMostTheSlots) {
  HybridSetup setup;
  setup.slots = 2;
  setup.max_running = 16;
  const auto alone = Alone(Requests(), setup);
  const Outcome together = RunHybrid(Singles(Specs()), setup);
  ExpectClean(together);
  EXPECT_EQ(together.max_running, 2);
  EXPECT_EQ(together.max_slices, 2);
  EXPECT_EQ(together.tokens, alone);
}

TEST(SchedulerStateSlotsTest, AGroupsForksCopyTheParentsState) {
  // A prompt of 21 tokens: the fork is at position 20, inside the second
  // block, so the children need the parent's state there.
  const HybridSetup setup;
  const auto alone = Alone({{TaggedPrompt(5, 21), 30}}, setup);
  std::vector<std::vector<RequestSpec>> groups(1);
  for (int i = 0; i < 3; ++i) {
    groups[0].push_back(Spec(TaggedPrompt(5, 21), 30));
  }
  const Outcome out = RunHybrid(std::move(groups), setup);
  ExpectClean(out);
  ASSERT_EQ(out.tokens.size(), 3u);
  for (const auto& tokens : out.tokens) EXPECT_EQ(tokens, alone[0]);
  EXPECT_EQ(out.kv.state_copies, 2);
  EXPECT_EQ(out.engine_state_copies, 2);
}

TEST(SchedulerStateSlotsTest, PreemptionFreesTheSlotAndRecomputes) {
  // 6 blocks of 16 for requests that need 16 together: preemption by
  // recompute, each recompute starting at position 0 on a fresh slot.
  HybridSetup setup;
  setup.num_blocks = 6;
  setup.max_batched_tokens = 8;
  const auto alone = Alone(Requests(), setup);
  const Outcome together = RunHybrid(Singles(Specs()), setup);
  ExpectClean(together);
  EXPECT_GT(together.counters.preemptions, 0);
  EXPECT_EQ(together.tokens, alone);
}

TEST(SchedulerStateSlotsTest, RejectedDraftsRollTheStateBack) {
  HybridSetup setup;
  setup.script = RepeatScript;
  setup.speculation_max_step_tokens = 8;
  const auto plain = Alone(Requests(), setup, 0);
  // With prefix snapshots too: they hold the idle slots, which a
  // speculation snapshot then takes from them.
  for (const int32_t snapshots : {0, -1})
  for (const bool together : {false, true}) {
    SCOPED_TRACE(together ? "together" : "alone");
    SCOPED_TRACE(snapshots);
    setup.state_snapshots = snapshots;
    std::vector<std::vector<int32_t>> tokens;
    int64_t drafted = 0, accepted = 0, copies = 0;
    std::vector<Outcome> runs;
    if (together) {
      runs.push_back(RunHybrid(Singles(Specs(4)), setup));
    } else {
      for (RequestSpec& spec : Specs(4)) {
        runs.push_back(RunHybrid(Singles({std::move(spec)}), setup));
      }
    }
    for (const Outcome& out : runs) {
      ExpectClean(out);
      tokens.insert(tokens.end(), out.tokens.begin(), out.tokens.end());
      for (const FinishInfo& f : out.finish) {
        drafted += f.usage.draft_tokens;
        accepted += f.usage.accepted_draft_tokens;
      }
      copies += out.engine_state_copies;
    }
    EXPECT_EQ(tokens, plain);
    EXPECT_GT(accepted, 0);
    EXPECT_GT(drafted, accepted);  // some were rejected and rolled back
    EXPECT_GT(copies, 0);          // the snapshots
  }
}

TEST(SchedulerStateSlotsTest, NoSpareSlotNoDrafts) {
  // One slot, held by the one running request: no snapshot, so no drafts.
  HybridSetup setup;
  setup.script = RepeatScript;
  setup.slots = 1;
  const auto plain = Alone({Requests()[0]}, setup, 0);
  const Outcome out = RunHybrid(
      Singles({Spec(Requests()[0].first, Requests()[0].second, 4)}), setup);
  ExpectClean(out);
  EXPECT_EQ(out.tokens, plain);
  ASSERT_EQ(out.finish.size(), 1u);
  EXPECT_EQ(out.finish[0].usage.draft_tokens, 0);
}

TEST(SchedulerStateSlotsTest, PrefixSnapshotsGiveTheirSlotToSpeculation) {
  // Two slots, one request at a time: the first's prompt snapshot holds
  // the slot the second is not using, and the second's drafts take it
  // (the snapshot is evicted), with the output of decoding without drafts.
  HybridSetup setup;
  setup.script = RepeatScript;
  setup.slots = 2;
  setup.max_running = 1;
  setup.state_snapshots = -1;
  const auto plain = Alone({Requests()[0]}, setup, 0);
  std::vector<RequestSpec> specs;
  specs.push_back(Spec(TaggedPrompt(8, 40), 3));
  specs.push_back(Spec(Requests()[0].first, Requests()[0].second, 4));
  const Outcome out = RunHybrid(Singles(std::move(specs)), setup);
  ExpectClean(out);
  ASSERT_EQ(out.finish.size(), 2u);
  EXPECT_EQ(out.tokens[1], plain[0]);
  EXPECT_GT(out.finish[1].usage.draft_tokens, 0);
  EXPECT_GE(out.kv.state_snapshot_evictions, 1);
}

TEST(SchedulerStateSlotsTest, NoPrefixCacheHitsWithoutSnapshots) {
  // The same 40-token prompt twice, one after the other: without state
  // snapshots the second computes it all.
  HybridSetup setup;
  setup.max_running = 1;
  std::vector<RequestSpec> specs;
  specs.push_back(Spec(TaggedPrompt(7, 40), 5));
  specs.push_back(Spec(TaggedPrompt(7, 40), 5));
  const Outcome out = RunHybrid(Singles(std::move(specs)), setup);
  ExpectClean(out);
  ASSERT_EQ(out.finish.size(), 2u);
  EXPECT_EQ(out.finish[1].usage.cached_prompt_tokens, 0);
  EXPECT_EQ(out.kv.prefix_hit_tokens, 0);
  EXPECT_EQ(out.kv.cached_blocks, 0);
  EXPECT_EQ(out.tokens[0], out.tokens[1]);
}

TEST(SchedulerStateSlotsTest, APromptsCachedPrefixStartsFromItsSnapshot) {
  // The same 40-token prompt twice: the first's state after its last
  // whole block (32 tokens: the chunk is cut there) is kept, and the
  // second starts there from a copy of it. The fake engine checks every
  // slice's state against its K/V, so a wrong or missing copy fails.
  HybridSetup setup;
  setup.max_running = 1;
  setup.state_snapshots = -1;
  std::vector<RequestSpec> specs;
  specs.push_back(Spec(TaggedPrompt(7, 40), 5));
  specs.push_back(Spec(TaggedPrompt(7, 40), 5));
  const Outcome out = RunHybrid(Singles(std::move(specs)), setup);
  ExpectClean(out);
  ASSERT_EQ(out.finish.size(), 2u);
  EXPECT_EQ(out.finish[0].usage.cached_prompt_tokens, 0);
  EXPECT_EQ(out.finish[1].usage.cached_prompt_tokens, 32);
  EXPECT_EQ(out.kv.state_snapshot_hits, 1);
  EXPECT_EQ(out.tokens[0], out.tokens[1]);
  EXPECT_EQ(out.mismatches, 0);
}

TEST(SchedulerStateSlotsTest, ANextTurnStartsFromTheGeneratedTokensState) {
  // A chat's second turn: the first turn's prompt and answer, then more.
  // Its last block boundary while generating (the rolling snapshot) is
  // where the second starts: 20 + 29 computed tokens -> 48.
  HybridSetup setup;
  setup.max_running = 1;
  setup.state_snapshots = -1;
  const std::vector<int32_t> prompt = TaggedPrompt(9, 20);
  const auto first = Alone({{prompt, 30}}, setup);
  std::vector<int32_t> next = prompt;
  next.insert(next.end(), first[0].begin(), first[0].end());
  for (int32_t t : TaggedPrompt(3, 6)) next.push_back(t);
  const auto cold = Alone({{next, 10}}, setup);
  std::vector<RequestSpec> specs;
  specs.push_back(Spec(prompt, 30));
  specs.push_back(Spec(next, 10));
  const Outcome out = RunHybrid(Singles(std::move(specs)), setup);
  ExpectClean(out);
  ASSERT_EQ(out.finish.size(), 2u);
  EXPECT_EQ(out.finish[1].usage.cached_prompt_tokens, 48);
  EXPECT_EQ(out.tokens[0], first[0]);
  EXPECT_EQ(out.tokens[1], cold[0]);
  EXPECT_EQ(out.mismatches, 0);
}

TEST(SchedulerStateSlotsTest, CancelFreesTheSlot) {
  static const auto* tokenizer = ByteTokenizer(kVocab).release();
  FakeEngineOptions engine_options;
  engine_options.n_vocab = kVocab;
  ServingLoopOptions options;
  options.scheduler.tenants = {testing::Tenant("t")};
  auto loop =
      ServingLoop::Create(std::make_unique<HybridFakeEngine>(engine_options, 2),
                          tokenizer, options);
  ASSERT_TRUE(loop.ok()) << loop.status();
  auto id = (*loop)->Submit(Spec(TaggedPrompt(0, 5), 100));
  ASSERT_TRUE(id.ok()) << id.status();
  (*loop)->RunOnce();
  (*loop)->RunOnce();
  EXPECT_EQ((*loop)->scheduler().pager().Stats().free_state_slots, 1);
  (*loop)->Cancel(*id);
  (*loop)->RunUntilIdle();
  EXPECT_EQ((*loop)->scheduler().pager().Stats().free_state_slots, 2);
  EXPECT_TRUE((*loop)->scheduler().pager().CheckConsistency().ok());
}

}  // namespace
}  // namespace paceline::scheduler
