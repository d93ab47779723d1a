// Request groups (Scheduler::SubmitGroup, OpenAI's `n`) over the fake
// engine: the children fork the parent's KV blocks at its last prompt
// token and copy the shared partial block on write; every choice equals
// the single request with its seed (the oracle: the same request run
// alone, on its own scheduler); cancel, preemption and the fallback leave
// the others' output unchanged and every block returned; groups too large
// for the limits are refused with the right status.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "scheduler/retry_hint.h"
#include "scheduler/scheduler.h"
#include "scheduler/serving_loop.h"
#include "tests/testing/scheduler_test_util.h"

namespace paceline::scheduler::testing {
namespace {

constexpr int kCancelled = static_cast<int>(FinishReason::kCancelled);

FakeEngineOptions Engine(int32_t num_blocks = 64) {
  FakeEngineOptions o;
  o.n_vocab = 2048;
  o.block_size = 4;
  o.num_blocks = num_blocks;
  return o;
}

// Member i of a group: greedy, or sampled at temperature 1 with seed
// `seed` + i (the caller's rule for OpenAI's n).
struct Choice {
  std::vector<int32_t> prompt;
  int32_t max_tokens = 8;
  float temperature = 0;
  uint64_t seed = 0;
  PriorityClass priority = PriorityClass::kStandard;
};

RequestSpec MakeSpec(const Choice& c, int32_t i,
                     const std::string& tenant = "t") {
  RequestSpec spec;
  spec.tenant = tenant;
  spec.prompt = c.prompt;
  spec.sampling.temperature = c.temperature;
  spec.sampling.seed = c.seed + i;
  spec.stop.max_tokens = c.max_tokens;
  spec.priority = c.priority;
  spec.sink = std::make_shared<CollectingSink>();
  return spec;
}

struct Group {
  std::vector<RequestId> ids;
  std::vector<std::shared_ptr<CollectingSink>> sinks;
};

// Submits n members under ids first_id, first_id + 1, ...
Group SubmitGroup(Harness& h, const Choice& c, int32_t n,
                  RequestId first_id = 100, const std::string& tenant = "t") {
  Group g;
  std::vector<RequestSpec> specs;
  for (int32_t i = 0; i < n; ++i) {
    specs.push_back(MakeSpec(c, i, tenant));
    g.ids.push_back(first_id + i);
    g.sinks.push_back(std::static_pointer_cast<CollectingSink>(specs[i].sink));
  }
  const absl::Status status =
      h.scheduler().SubmitGroup(g.ids, std::move(specs));
  EXPECT_TRUE(status.ok()) << status;
  return g;
}

// The oracle: member i's spec run alone on a scheduler of its own.
std::shared_ptr<CollectingSink> RunAlone(const Choice& c, int32_t i) {
  Harness h(Engine(), Opts(64, 8));
  const Submitted s = h.Submit(MakeSpec(c, i));
  h.RunUntilIdle(1000);
  EXPECT_TRUE(s.sink->finished());
  return s.sink;
}

std::vector<int32_t> Alone(const Choice& c, int32_t i) {
  return RunAlone(c, i)->tokens();
}

void ExpectEachEqualsAlone(const Choice& c, const Group& g,
                           absl::Span<const int32_t> skip = {}) {
  for (int32_t i = 0; i < static_cast<int32_t>(g.sinks.size()); ++i) {
    if (std::find(skip.begin(), skip.end(), i) != skip.end()) continue;
    ASSERT_TRUE(g.sinks[i]->finished()) << "member " << i;
    const std::shared_ptr<CollectingSink> alone = RunAlone(c, i);
    EXPECT_EQ(g.sinks[i]->finish().reason, alone->finish().reason) << i;
    EXPECT_EQ(g.sinks[i]->tokens(), alone->tokens()) << "member " << i;
  }
}

void ExpectNoLeak(Harness& h) {
  EXPECT_EQ(h.scheduler().num_running(), 0);
  EXPECT_EQ(h.scheduler().num_waiting(), 0);
  EXPECT_EQ(h.scheduler().pager().Stats().used_blocks, 0);
  EXPECT_TRUE(h.scheduler().pager().CheckConsistency().ok());
  EXPECT_EQ(h.scheduler().queues().stats(0).running, 0);
  EXPECT_EQ(h.scheduler().queues().stats(0).waiting, 0);
}

TEST(RequestGroupTest, ChildrenShareThePromptBlocksAndCopyThePartialOne) {
  Harness h(Engine(), Opts(64, 8));
  const Choice c{TaggedPrompt(0, 10), 6};
  const Group g = SubmitGroup(h, c, 4);
  EXPECT_EQ(h.scheduler().num_waiting(), 4);
  for (int32_t i = 0; i < 4; ++i) EXPECT_EQ(g.sinks[i]->id(), g.ids[i]);

  // Step 1: the parent computes the prompt but its last token (9 tokens,
  // 3 blocks of 4, the last partial); the children fork at once.
  h.Step();
  ASSERT_EQ(h.steps()[0].slices.size(), 1u);
  EXPECT_EQ(h.steps()[0].slices[0].token_count, 9);
  EXPECT_EQ(h.steps()[0].slices[0].num_logits, 0);
  EXPECT_EQ(h.scheduler().num_running(), 4);
  EXPECT_EQ(h.scheduler().pager().Stats().used_blocks, 3);  // all shared

  // Step 2: each member computes the last prompt token from its own row;
  // the shared partial block is copied for each but the last.
  const int64_t copies_before = h.scheduler().pager().Stats().cow_copies;
  h.Step();
  const RecordedStep& step = h.steps()[1];
  ASSERT_EQ(step.slices.size(), 4u);
  for (const RecordedSlice& s : step.slices) {
    EXPECT_EQ(s.position_begin, 9);
    EXPECT_EQ(s.token_count, 1);
    EXPECT_EQ(s.num_logits, 1);
  }
  EXPECT_EQ(step.copies.size(), 3u);
  EXPECT_EQ(h.scheduler().pager().Stats().cow_copies - copies_before, 3);
  // Prompt blocks (3) + one copied partial block per child.
  EXPECT_EQ(h.scheduler().pager().Stats().used_blocks, 3 + 3);

  h.RunUntilIdle(1000);
  ExpectEachEqualsAlone(c, g);
  // Fair share counts the group as 4 requests.
  const TenantStats stats = h.scheduler().queues().stats(0);
  EXPECT_EQ(stats.prompt_tokens, 4 * 10);
  EXPECT_EQ(stats.generated_tokens, 4 * 6);
  EXPECT_EQ(h.scheduler().counters().submitted, 4);
  EXPECT_EQ(h.scheduler()
                .counters()
                .finished[static_cast<int>(FinishReason::kLength)],
            4);
  ExpectNoLeak(h);
}

TEST(RequestGroupTest, BlockAlignedForkNeedsNoCopy) {
  Harness h(Engine(), Opts(64, 8));
  const Choice c{TaggedPrompt(0, 9), 6};  // 8 shared tokens: 2 full blocks
  const Group g = SubmitGroup(h, c, 3);
  h.Step();
  EXPECT_EQ(h.scheduler().pager().Stats().used_blocks, 2);
  h.Step();
  EXPECT_TRUE(h.steps()[1].copies.empty());
  EXPECT_EQ(h.scheduler().pager().Stats().cow_copies, 0);
  // Prompt blocks (3): the 2 shared and one new block per member.
  EXPECT_EQ(h.scheduler().pager().Stats().used_blocks, 2 + 3);
  h.RunUntilIdle(1000);
  ExpectEachEqualsAlone(c, g);
  ExpectNoLeak(h);
}

TEST(RequestGroupTest, GreedyChoicesEqualTheSingleRequest) {
  for (int32_t len : {1, 2, 4, 5, 9, 17, 30}) {
    for (int32_t n : {2, 5, 16}) {
      SCOPED_TRACE(::testing::Message() << "prompt " << len << ", n " << n);
      // 8-token steps: the parent's prefill is chunked up to the fork.
      Harness h(Engine(), Opts(8, 16));
      const Choice c{TaggedPrompt(len, len), 5};
      const Group g = SubmitGroup(h, c, n);
      h.RunUntilIdle(1000);
      const std::vector<int32_t> alone = Alone(c, 0);
      for (int32_t i = 0; i < n; ++i) {
        ASSERT_TRUE(g.sinks[i]->finished());
        EXPECT_EQ(g.sinks[i]->tokens(), alone) << "member " << i;
      }
      EXPECT_EQ(h.scheduler().counters().preemptions, 0);
      ExpectNoLeak(h);
    }
  }
}

TEST(RequestGroupTest, SampledChoiceIEqualsASingleRequestSeededSeedPlusI) {
  Harness h(Engine(), Opts(8, 8));
  Choice c{TaggedPrompt(0, 14), 10};
  c.temperature = 1.0f;
  c.seed = 4242;
  const Group g = SubmitGroup(h, c, 5);
  h.RunUntilIdle(1000);
  ExpectEachEqualsAlone(c, g);
  // The seeds differ, and so do the choices (near-uniform rows).
  EXPECT_NE(g.sinks[0]->tokens(), g.sinks[1]->tokens());
  ExpectNoLeak(h);
}

TEST(RequestGroupTest, OneTokenPromptStartsEveryMemberAtAdmission) {
  Harness h(Engine(), Opts(64, 8));
  const Choice c{{kFirstTag}, 4};
  const Group g = SubmitGroup(h, c, 3);
  h.Step();
  ASSERT_EQ(h.steps()[0].slices.size(), 3u);
  for (const RecordedSlice& s : h.steps()[0].slices) {
    EXPECT_EQ(s.num_logits, 1);
  }
  EXPECT_EQ(h.scheduler().pager().Stats().used_blocks, 3);
  h.RunUntilIdle(1000);
  ExpectEachEqualsAlone(c, g);
  ExpectNoLeak(h);
}

TEST(RequestGroupTest, GroupOfOneIsSubmit) {
  Harness a(Engine(), Opts(8, 8));
  Harness b(Engine(), Opts(8, 8));
  const Choice c{TaggedPrompt(0, 21), 7};
  const Submitted single = a.Submit(MakeSpec(c, 0));
  const Group g = SubmitGroup(b, c, 1, single.id);
  a.RunUntilIdle(1000);
  b.RunUntilIdle(1000);
  ASSERT_EQ(a.steps().size(), b.steps().size());
  for (size_t i = 0; i < a.steps().size(); ++i) {
    EXPECT_EQ(a.steps()[i].tokens, b.steps()[i].tokens) << "step " << i;
    EXPECT_EQ(a.steps()[i].slices.size(), b.steps()[i].slices.size());
  }
  EXPECT_EQ(g.sinks[0]->tokens(), single.sink->tokens());
  EXPECT_EQ(g.sinks[0]->finish().usage.cached_prompt_tokens,
            single.sink->finish().usage.cached_prompt_tokens);
}

TEST(RequestGroupTest, CancelOneMemberMidwayTheOthersFinish) {
  Harness h(Engine(), Opts(64, 8));
  const Choice c{TaggedPrompt(0, 10), 12};
  const Group g = SubmitGroup(h, c, 3);
  for (int i = 0; i < 4; ++i) h.Step();  // forked, 3 tokens each
  ASSERT_EQ(g.sinks[1]->tokens().size(), 3u);
  const int64_t used = h.scheduler().pager().Stats().used_blocks;
  ASSERT_TRUE(h.scheduler().Cancel(g.ids[1]).ok());
  EXPECT_EQ(g.sinks[1]->finish().reason, FinishReason::kCancelled);
  EXPECT_EQ(g.sinks[1]->finish().status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(h.scheduler().num_running(), 2);
  // Its own (copied) block is freed; the shared prompt blocks stay.
  EXPECT_EQ(h.scheduler().pager().Stats().used_blocks, used - 1);
  h.RunUntilIdle(1000);
  EXPECT_EQ(g.sinks[1]->tokens().size(), 3u);
  const int32_t skip[] = {1};
  ExpectEachEqualsAlone(c, g, skip);
  EXPECT_EQ(h.scheduler().counters().finished[kCancelled], 1);
  ExpectNoLeak(h);
}

TEST(RequestGroupTest, CancelledHeldChildLeavesTheGroup) {
  Harness h(Engine(), Opts(4, 8));  // 4-token steps: the fork is at step 3
  const Choice c{TaggedPrompt(0, 10), 5};
  const Group g = SubmitGroup(h, c, 4);
  ASSERT_TRUE(h.scheduler().Cancel(g.ids[3]).ok());  // parent queued
  EXPECT_EQ(h.scheduler().num_waiting(), 3);
  h.Step();
  EXPECT_EQ(h.scheduler().num_running(), 3);         // parent + 2 held
  ASSERT_TRUE(h.scheduler().Cancel(g.ids[2]).ok());  // parent prefilling
  EXPECT_EQ(h.scheduler().num_running(), 2);
  EXPECT_EQ(h.scheduler().queues().stats(0).running, 2);
  h.RunUntilIdle(1000);
  for (int32_t i : {2, 3}) {
    EXPECT_EQ(g.sinks[i]->finish().reason, FinishReason::kCancelled);
    EXPECT_TRUE(g.sinks[i]->tokens().empty());
  }
  const int32_t skip[] = {2, 3};
  ExpectEachEqualsAlone(c, g, skip);
  EXPECT_EQ(h.scheduler().counters().preemptions, 0);
  ExpectNoLeak(h);
}

TEST(RequestGroupTest, ParentWhoseChildrenAllLeaveRunsAlone) {
  Harness h(Engine(), Opts(4, 8));
  const Choice c{TaggedPrompt(0, 10), 5};
  const Group g = SubmitGroup(h, c, 3);
  h.Step();  // the parent prefills 4 of the 9 tokens its lease covers
  ASSERT_TRUE(h.scheduler().Cancel(g.ids[1]).ok());
  ASSERT_TRUE(h.scheduler().Cancel(g.ids[2]).ok());
  EXPECT_EQ(h.scheduler().num_running(), 1);
  h.RunUntilIdle(1000);
  const int32_t skip[] = {1, 2};
  ExpectEachEqualsAlone(c, g, skip);
  ExpectNoLeak(h);
}

TEST(RequestGroupTest, ParentCancelledWhileQueuedChildrenRunAlone) {
  Harness h(Engine(), Opts(64, 8));
  const Choice c{TaggedPrompt(0, 10), 6};
  const Group g = SubmitGroup(h, c, 3);
  ASSERT_TRUE(h.scheduler().Cancel(g.ids[0]).ok());
  EXPECT_EQ(g.sinks[0]->finish().reason, FinishReason::kCancelled);
  EXPECT_EQ(h.scheduler().num_waiting(), 2);
  h.RunUntilIdle(1000);
  EXPECT_TRUE(g.sinks[0]->tokens().empty());
  const int32_t skip[] = {0};
  ExpectEachEqualsAlone(c, g, skip);
  ExpectNoLeak(h);
}

TEST(RequestGroupTest, ParentCancelledMidPrefillChildrenUseThePrefixCache) {
  Harness h(Engine(), Opts(8, 8));
  const Choice c{TaggedPrompt(0, 20), 6};
  const Group g = SubmitGroup(h, c, 3);
  h.Step();  // the parent has computed 8 tokens: 2 full blocks
  EXPECT_EQ(h.scheduler().num_running(), 3);
  ASSERT_TRUE(h.scheduler().Cancel(g.ids[0]).ok());
  EXPECT_EQ(h.scheduler().num_running(), 0);
  EXPECT_EQ(h.scheduler().num_waiting(), 2);
  EXPECT_EQ(h.scheduler().pager().Stats().used_blocks, 0);
  const int64_t hits = h.scheduler().pager().Stats().prefix_hit_tokens;
  h.RunUntilIdle(1000);
  // Each child finds at least the parent's 8 computed tokens.
  EXPECT_GE(h.scheduler().pager().Stats().prefix_hit_tokens - hits, 2 * 8);
  const int32_t skip[] = {0};
  ExpectEachEqualsAlone(c, g, skip);
  ExpectNoLeak(h);
}

TEST(RequestGroupTest, ParentPreemptedBeforeTheForkChildrenFallBack) {
  // 7 blocks of 4. An interactive request decodes (2 blocks, its third
  // due at step 6) while the batch-class group's parent prefills 4 tokens
  // a step (5 blocks, its fork due at step 7): the parent is the victim.
  Harness h(Engine(7), Opts(5, 8));
  Choice first{TaggedPrompt(1, 4), 20};
  first.priority = PriorityClass::kInteractive;
  const Submitted a = h.Submit(MakeSpec(first, 0));
  h.Step();
  Choice c{TaggedPrompt(0, 21), 3};
  c.priority = PriorityClass::kBatch;
  const Group g = SubmitGroup(h, c, 3);
  for (int i = 0; i < 100 && h.scheduler().counters().preemptions == 0; ++i) {
    h.Step();
  }
  ASSERT_GT(h.scheduler().counters().preemptions, 0);
  // The parent was preempted before its fork: all three wait, unforked.
  EXPECT_EQ(h.scheduler().num_running(), 1);
  EXPECT_EQ(h.scheduler().num_waiting(), 3);
  h.RunUntilIdle(1000);
  EXPECT_EQ(a.sink->tokens(), Alone(first, 0));
  ExpectEachEqualsAlone(c, g);
  ExpectNoLeak(h);
}

TEST(RequestGroupTest, PreemptedForkedChildGivesIdenticalOutput) {
  // 12 blocks of 4; three members of 8 + 24 tokens need 8 blocks each.
  for (float temperature : {0.0f, 1.0f}) {
    SCOPED_TRACE(::testing::Message() << "temperature " << temperature);
    Harness h(Engine(12), Opts(64, 8));
    Choice c{TaggedPrompt(0, 8), 24};
    c.temperature = temperature;
    c.seed = 99;
    const Group g = SubmitGroup(h, c, 3);
    h.RunUntilIdle(1000);
    EXPECT_GT(h.scheduler().counters().preemptions, 0);
    int32_t preempted = 0;
    for (const auto& sink : g.sinks) {
      preempted += sink->finish().usage.preemptions;
    }
    EXPECT_GT(preempted, 0);
    ExpectEachEqualsAlone(c, g);
    ExpectNoLeak(h);
  }
}

TEST(RequestGroupTest, GroupWaitsForRoomAndIsAdmittedWhole) {
  Harness h(Engine(), Opts(64, 8, {Tenant("t", 1.0, /*max_running=*/3)}));
  const Submitted single = h.Submit(TaggedPrompt(1, 4), 4);
  h.Step();
  const Choice c{TaggedPrompt(0, 10), 4};
  const Group g = SubmitGroup(h, c, 3);
  for (int i = 0; !single.sink->finished(); ++i) {
    ASSERT_LT(i, 100);
    EXPECT_EQ(h.scheduler().queues().stats(0).waiting, 3);
    EXPECT_EQ(h.scheduler().num_running(), 1);
    h.Step();
  }
  h.Step();  // admitted whole once the single one has left
  EXPECT_EQ(h.scheduler().queues().stats(0).waiting, 0);
  EXPECT_EQ(h.scheduler().num_running(), 3);
  EXPECT_EQ(h.scheduler().queues().stats(0).running, 3);
  h.RunUntilIdle(1000);
  ExpectEachEqualsAlone(c, g);
  ExpectNoLeak(h);
}

TEST(RequestGroupTest, SchedulerMaxRunningAdmitsTheGroupWhole) {
  Harness h(Engine(), Opts(64, 3));
  const Submitted single = h.Submit(TaggedPrompt(1, 4), 4);
  h.Step();
  const Choice c{TaggedPrompt(0, 10), 4};
  const Group g = SubmitGroup(h, c, 3);
  h.Step();
  EXPECT_EQ(h.scheduler().num_running(), 1);  // 1 + 3 > 3: the group waits
  h.RunUntilIdle(1000);
  EXPECT_TRUE(single.sink->finished());
  ExpectEachEqualsAlone(c, g);
  ExpectNoLeak(h);
}

void ExpectRefused(Harness& h, std::vector<RequestSpec> specs,
                   std::vector<RequestId> ids, absl::StatusCode code,
                   bool retry_hint = false) {
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (const RequestSpec& s : specs) {
    sinks.push_back(std::static_pointer_cast<CollectingSink>(s.sink));
  }
  const int32_t waiting = h.scheduler().num_waiting();
  const int64_t rejected = h.scheduler().counters().rejected;
  const absl::Status status = h.scheduler().SubmitGroup(ids, std::move(specs));
  EXPECT_EQ(status.code(), code) << status;
  EXPECT_EQ(RetryAfter(status).has_value(), retry_hint) << status;
  EXPECT_EQ(h.scheduler().num_waiting(), waiting);
  EXPECT_EQ(h.scheduler().counters().rejected,
            rejected + static_cast<int64_t>(sinks.size()));
  for (const auto& sink : sinks) {
    EXPECT_FALSE(sink->accepted());
    EXPECT_FALSE(sink->finished());
  }
}

std::vector<RequestSpec> Specs(int32_t n, const std::string& tenant = "t") {
  std::vector<RequestSpec> specs;
  for (int32_t i = 0; i < n; ++i) {
    specs.push_back(MakeSpec(Choice{TaggedPrompt(0, 6), 4}, i, tenant));
  }
  return specs;
}

std::vector<RequestId> Ids(int32_t n, RequestId first = 100) {
  std::vector<RequestId> ids;
  for (int32_t i = 0; i < n; ++i) ids.push_back(first + i);
  return ids;
}

TEST(RequestGroupTest, GroupLargerThanTheLimitsIsRefused) {
  using absl::StatusCode;
  Harness h(Engine(),
            Opts(64, 8,
                 {Tenant("run2", 1.0, /*max_running=*/2),
                  Tenant("queue4", 1.0, 0, /*max_queued=*/4), Tenant("t")}));
  // Can never be admitted whole: not retryable.
  ExpectRefused(h, Specs(3, "run2"), Ids(3), StatusCode::kInvalidArgument);
  ExpectRefused(h, Specs(5, "queue4"), Ids(5), StatusCode::kInvalidArgument);
  ExpectRefused(h, Specs(9), Ids(9), StatusCode::kInvalidArgument);
  // Fits the limits but not the queue right now: a retry hint.
  h.Submit(TaggedPrompt(1, 4), 4, "queue4");
  h.Submit(TaggedPrompt(2, 4), 4, "queue4");
  ExpectRefused(h, Specs(3, "queue4"), Ids(3), StatusCode::kResourceExhausted,
                /*retry_hint=*/true);
  ASSERT_TRUE(h.scheduler().SubmitGroup(Ids(2), Specs(2, "queue4")).ok());
  EXPECT_EQ(h.scheduler().queues().stats(1).waiting, 4);
  h.RunUntilIdle(1000);
  ExpectNoLeak(h);
}

TEST(RequestGroupTest, MalformedGroupsAreRefused) {
  using absl::StatusCode;
  Harness h(Engine(), Opts(64, 32, {Tenant("t"), Tenant("u")}));
  ExpectRefused(h, {}, {}, StatusCode::kInvalidArgument);
  ExpectRefused(h, Specs(17), Ids(17), StatusCode::kInvalidArgument);
  std::vector<RequestSpec> specs = Specs(3);
  specs[2].prompt.push_back('z');
  ExpectRefused(h, std::move(specs), Ids(3), StatusCode::kInvalidArgument);
  specs = Specs(3);
  specs[1].tenant = "u";
  ExpectRefused(h, std::move(specs), Ids(3), StatusCode::kInvalidArgument);
  specs = Specs(2);
  specs[1].cache_salt = "shared";
  ExpectRefused(h, std::move(specs), Ids(2), StatusCode::kInvalidArgument);
  specs = Specs(2);
  specs[1].priority = PriorityClass::kBatch;
  ExpectRefused(h, std::move(specs), Ids(2), StatusCode::kInvalidArgument);
  specs = Specs(2);
  specs[1].sampling.temperature = -1;  // a member's own check
  ExpectRefused(h, std::move(specs), Ids(2), StatusCode::kInvalidArgument);
  // Two members, one sink: the sink would hear two requests.
  specs = Specs(2);
  specs[1].sink = specs[0].sink;
  const absl::Status shared =
      h.scheduler().SubmitGroup(Ids(2), std::move(specs));
  EXPECT_EQ(shared.code(), StatusCode::kInvalidArgument);
  ExpectRefused(h, Specs(2), Ids(3), StatusCode::kInvalidArgument);
  ExpectRefused(h, Specs(2), {7, 7}, StatusCode::kAlreadyExists);
  const Submitted live = h.Submit(TaggedPrompt(1, 4), 4);
  ExpectRefused(h, Specs(2), {200, live.id}, StatusCode::kAlreadyExists);
  EXPECT_EQ(h.scheduler().num_waiting(), 1);
  h.RunUntilIdle(1000);
  ExpectNoLeak(h);
}

TEST(RequestGroupTest, ShutdownCancelsEveryMember) {
  Harness h(Engine(), Opts(4, 8));
  const Choice c{TaggedPrompt(0, 10), 5};
  const Group running = SubmitGroup(h, c, 3, 100);
  h.Step();  // parent prefilling, children held
  const Group queued = SubmitGroup(h, c, 2, 200);
  h.scheduler().CancelAll(CancelReason::kShutdown);
  for (const Group* g : {&running, &queued}) {
    for (const auto& sink : g->sinks) {
      ASSERT_TRUE(sink->finished());
      EXPECT_EQ(sink->finish().status.code(), absl::StatusCode::kUnavailable);
    }
  }
  ExpectNoLeak(h);
}

std::unique_ptr<ServingLoop> MakeLoop(const engine::Tokenizer* tokenizer,
                                      SchedulerOptions options) {
  ServingLoopOptions o;
  o.scheduler = std::move(options);
  if (o.scheduler.tenants.empty()) o.scheduler.tenants = OneTenant();
  auto loop =
      ServingLoop::Create(std::make_unique<FakeEngine>(Engine()), tokenizer, o);
  EXPECT_TRUE(loop.ok()) << loop.status();
  return loop.ok() ? *std::move(loop) : nullptr;
}

TEST(RequestGroupLoopTest, SubmitGroupGivesOneIdPerMemberAndCancelsOne) {
  const auto tokenizer = ByteTokenizer(2048);
  const std::unique_ptr<ServingLoop> loop =
      MakeLoop(tokenizer.get(), Opts(8, 8));
  ASSERT_NE(loop, nullptr);
  Choice c{TaggedPrompt(0, 10), 6};
  c.temperature = 1.0f;
  c.seed = 7;
  std::vector<RequestSpec> specs;
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (int32_t i = 0; i < 3; ++i) {
    specs.push_back(MakeSpec(c, i));
    sinks.push_back(std::static_pointer_cast<CollectingSink>(specs[i].sink));
  }
  const absl::StatusOr<std::vector<RequestId>> ids =
      loop->SubmitGroup(std::move(specs));
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_EQ(ids->size(), 3u);
  EXPECT_EQ((*ids)[1], (*ids)[0] + 1);
  EXPECT_EQ((*ids)[2], (*ids)[0] + 2);
  loop->Cancel((*ids)[1]);  // held by the parent when it applies
  loop->RunUntilIdle();
  for (int32_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(sinks[i]->finished());
    EXPECT_EQ(sinks[i]->id(), (*ids)[i]);
  }
  EXPECT_EQ(sinks[1]->finish().reason, FinishReason::kCancelled);
  EXPECT_EQ(sinks[0]->tokens(), Alone(c, 0));
  EXPECT_EQ(sinks[2]->tokens(), Alone(c, 2));
  EXPECT_EQ(loop->Load().kv.used_blocks, 0);

  // Refused synchronously: a malformed group, one that can never fit.
  EXPECT_EQ(loop->SubmitGroup(Specs(17)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(loop->SubmitGroup(Specs(9)).status().code(),
            absl::StatusCode::kInvalidArgument);
  loop->RunUntilIdle();
  EXPECT_EQ(loop->scheduler().counters().rejected, 17 + 9);
}

// A group that would overfill its tenant's queue is refused whole, on the
// submitting thread (intake_gate.h), before any member is accepted.
TEST(RequestGroupLoopTest, FullQueueRefusesTheWholeGroupAtSubmit) {
  const auto tokenizer = ByteTokenizer(2048);
  const std::unique_ptr<ServingLoop> loop = MakeLoop(
      tokenizer.get(), Opts(8, 8, {Tenant("t", 1.0, 0, /*max_queued=*/3)}));
  ASSERT_NE(loop, nullptr);
  std::vector<RequestSpec> singles = Specs(2);
  for (RequestSpec& s : singles) ASSERT_TRUE(loop->Submit(std::move(s)).ok());
  std::vector<RequestSpec> group = Specs(2);
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (const RequestSpec& s : group) {
    sinks.push_back(std::static_pointer_cast<CollectingSink>(s.sink));
  }
  const absl::StatusOr<std::vector<RequestId>> ids =
      loop->SubmitGroup(std::move(group));  // 2 in the inbox + 2 > 3
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(RetryAfter(ids.status()).has_value()) << ids.status();
  for (const auto& sink : sinks) {
    EXPECT_FALSE(sink->finished());
    EXPECT_FALSE(sink->accepted());
  }
  loop->RunUntilIdle();
  EXPECT_EQ(loop->scheduler().counters().rejected, 2);
  EXPECT_EQ(loop->Load().kv.used_blocks, 0);
}

}  // namespace
}  // namespace paceline::scheduler::testing
