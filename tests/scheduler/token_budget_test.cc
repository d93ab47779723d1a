// A tenant's tokens-per-minute budget (tenant_queues.h, "Token budget"):
// each admission reserves prompt + max_tokens, and only once the bucket
// holds it, so a burst never overshoots; what a request leaves unused
// (an early stop, a cancel) goes back when it finishes; a readmitted or
// forked request is not charged again. Exact levels on a manual clock.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "scheduler/scheduler.h"
#include "tests/testing/scheduler_test_util.h"

namespace paceline::scheduler::testing {
namespace {

FakeEngineOptions Engine(int32_t block_size = 16, int32_t num_blocks = 1024) {
  FakeEngineOptions o;
  o.n_vocab = 2048;
  o.block_size = block_size;
  o.num_blocks = num_blocks;
  return o;
}

SchedulerOptions Budget(int64_t tokens_per_minute, int32_t max_batched = 512,
                        int32_t max_running = 16) {
  return Opts(max_batched, max_running,
              {Tenant("t", 1, 0, 0, tokens_per_minute)});
}

int Finished(const std::vector<Submitted>& r) {
  return static_cast<int>(
      std::count_if(r.begin(), r.end(),
                    [](const Submitted& s) { return s.sink->finished(); }));
}

TEST(TokenBudgetTest, BurstIsAdmittedOnlyAsItsReservationsFit) {
  // 3000 tokens a minute (50/s); each request reserves 100 + 400 = 500.
  Harness h(Engine(), Budget(3000));
  const absl::Time t0 = h.clock().Now();
  std::vector<Submitted> r;
  for (int32_t i = 0; i < 8; ++i) {
    r.push_back(h.Submit(TaggedPrompt(i, 100), 400));
  }
  h.RunUntilIdle();  // the clock stands still: 6 × 500 = 3000 run
  EXPECT_EQ(Finished(r), 6);
  EXPECT_EQ(h.scheduler().num_waiting(), 2);
  // They used all they reserved: the next 500 take 10 s to refill.
  EXPECT_EQ(h.scheduler().NextAdmissibleTime(), t0 + absl::Seconds(10));
  h.clock().Advance(absl::Seconds(10) - absl::Milliseconds(1));
  EXPECT_FALSE(h.scheduler().HasRunnable());
  h.clock().Advance(absl::Milliseconds(1));
  h.RunUntilIdle();
  EXPECT_EQ(Finished(r), 7);
  EXPECT_EQ(h.scheduler().NextAdmissibleTime(), t0 + absl::Seconds(20));
  h.clock().Advance(absl::Seconds(10));
  h.RunUntilIdle();
  ASSERT_EQ(Finished(r), 8);
  // Admitted by time t: never more than the burst plus the refill.
  std::vector<absl::Time> admitted;
  for (const Submitted& s : r) {
    admitted.push_back(s.sink->finish().timings.first_scheduled);
  }
  std::sort(admitted.begin(), admitted.end());
  for (size_t i = 0; i < admitted.size(); ++i) {
    const double t = absl::ToDoubleSeconds(admitted[i] - t0);
    EXPECT_LE(500.0 * (i + 1), 3000 + 50 * t) << "admission " << i;
  }
  EXPECT_EQ(admitted[5], t0);
  EXPECT_EQ(admitted[6], t0 + absl::Seconds(10));
  EXPECT_EQ(admitted[7], t0 + absl::Seconds(20));
  // Charged exactly what was served, all of it used: the bucket is empty.
  const TenantStats stats = h.scheduler().queues().stats(0);
  EXPECT_EQ(stats.prompt_tokens + stats.generated_tokens, 8 * 500);
  EXPECT_EQ(stats.budget_tokens, 8 * 500);
  // (Refilled in two pieces, 9.999 s and 1 ms: a rounding error off zero.)
  EXPECT_NEAR(h.scheduler().BudgetLevel(0), 0, 1e-9);
}

// Tag 0's request ends with EOS as its 10th token; the others never do.
int32_t EosAsTenthOfTagZero(absl::Span<const int32_t> context) {
  if (context[0] == kFirstTag && context.size() == 100 + 9) return kEos;
  return paceline::testing::LetterScript(context);
}

TEST(TokenBudgetTest, EarlyStopReturnsWhatItDidNotUse) {
  // 600 tokens a minute (10/s); each request reserves 100 + 400 = 500.
  FakeEngineOptions engine = Engine();
  engine.script = EosAsTenthOfTagZero;
  Harness h(engine, Budget(600));
  const absl::Time t0 = h.clock().Now();
  const TenantQueues& queues = h.scheduler().queues();
  const Submitted a = h.Submit(TaggedPrompt(0, 100), 400);
  const Submitted b = h.Submit(TaggedPrompt(1, 100), 400);
  h.Step();
  EXPECT_EQ(h.scheduler().BudgetLevel(0), 100);
  EXPECT_EQ(h.scheduler().NextAdmissibleTime(), t0 + absl::Seconds(40));
  h.RunUntilIdle();  // a stops at its 10th token: 390 come back
  ASSERT_TRUE(a.sink->finished());
  EXPECT_EQ(a.sink->finish().reason, FinishReason::kStop);
  EXPECT_EQ(a.sink->finish().usage.completion_tokens, 10);
  EXPECT_EQ(h.scheduler().BudgetLevel(0), 490);
  EXPECT_EQ(queues.stats(0).budget_tokens, 110);
  // b lacks 10: 1 s instead of 40.
  EXPECT_EQ(h.scheduler().NextAdmissibleTime(), t0 + absl::Seconds(1));
  EXPECT_EQ(h.scheduler().QueueFullRetryHint(0, t0), absl::Seconds(1));
  h.clock().Advance(absl::Seconds(1));
  h.RunUntilIdle();
  ASSERT_TRUE(b.sink->finished());
  EXPECT_EQ(b.sink->finish().reason, FinishReason::kLength);
  EXPECT_EQ(b.sink->finish().timings.first_scheduled, t0 + absl::Seconds(1));
  EXPECT_EQ(h.scheduler().BudgetLevel(0), 0);
  const TenantStats stats = queues.stats(0);
  EXPECT_EQ(stats.budget_tokens, 100 + 10 + 100 + 400);
  EXPECT_EQ(stats.budget_tokens, stats.prompt_tokens + stats.generated_tokens);
}

TEST(TokenBudgetTest,
     CancelReturnsWhatWasNotGeneratedAndQueuedReservedNothing) {
  Harness h(Engine(), Budget(600));
  const TenantQueues& queues = h.scheduler().queues();
  const Submitted a = h.Submit(TaggedPrompt(0, 100), 400);
  const Submitted b = h.Submit(TaggedPrompt(1, 100), 400);
  for (int i = 0; i < 5; ++i) h.Step();
  ASSERT_EQ(a.sink->tokens().size(), 5u);
  ASSERT_EQ(h.scheduler().num_waiting(), 1);
  EXPECT_TRUE(h.scheduler().Cancel(b.id).ok());  // queued: nothing reserved
  EXPECT_EQ(h.scheduler().BudgetLevel(0), 100);
  EXPECT_EQ(queues.stats(0).budget_tokens, 500);
  EXPECT_TRUE(h.scheduler().Cancel(a.id).ok());  // 395 not generated
  EXPECT_EQ(h.scheduler().BudgetLevel(0), 495);
  const TenantStats stats = queues.stats(0);
  EXPECT_EQ(stats.budget_tokens, 105);
  EXPECT_EQ(stats.budget_tokens, stats.prompt_tokens + stats.generated_tokens);
}

TEST(TokenBudgetTest, PreemptedRequestIsReadmittedWithoutASecondCharge) {
  // Six requests of 6 + 20 over 10 blocks of 4 (room for one and a half):
  // they preempt each other. The budget holds exactly their six
  // reservations; a second charge at a readmission would stall one of
  // them, since the clock stands still.
  Harness h(Engine(/*block_size=*/4, /*num_blocks=*/10), Budget(6 * 26, 64, 8));
  std::vector<Submitted> r;
  for (int32_t i = 0; i < 6; ++i) r.push_back(h.Submit(TaggedPrompt(i, 6), 20));
  h.RunUntilIdle();
  EXPECT_GT(h.scheduler().counters().preemptions, 0);
  EXPECT_EQ(Finished(r), 6);
  const TenantQueues& queues = h.scheduler().queues();
  EXPECT_EQ(h.scheduler().BudgetLevel(0), 0);
  const TenantStats stats = queues.stats(0);
  EXPECT_EQ(stats.budget_tokens, 6 * 26);
  EXPECT_EQ(stats.budget_tokens, stats.prompt_tokens + stats.generated_tokens);
}

TEST(TokenBudgetTest, GroupReservesEveryChoiceAndEachReturnsItsOwn) {
  // 120 a minute (2/s). A group of 3 × (10 + 20) reserves 90 at once.
  Harness h(Engine(/*block_size=*/4), Budget(120, 64, 8));
  const absl::Time t0 = h.clock().Now();
  const TenantQueues& queues = h.scheduler().queues();
  const std::vector<RequestId> ids = {1, 2, 3};
  std::vector<RequestSpec> specs;
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (int i = 0; i < 3; ++i) {
    specs.push_back(h.Spec(TaggedPrompt(0, 10), 20));
    sinks.push_back(
        std::static_pointer_cast<CollectingSink>(specs.back().sink));
  }
  ASSERT_TRUE(h.scheduler().SubmitGroup(ids, std::move(specs)).ok());
  RequestSpec single = h.Spec(TaggedPrompt(1, 10), 30);  // reserves 40
  auto single_sink = std::static_pointer_cast<CollectingSink>(single.sink);
  ASSERT_TRUE(h.scheduler().Submit(4, std::move(single)).ok());
  h.Step();  // the parent's prefill; the children fork
  EXPECT_EQ(h.scheduler().num_running(), 3);
  EXPECT_EQ(h.scheduler().BudgetLevel(0), 30);
  EXPECT_EQ(queues.stats(0).budget_tokens, 90);
  EXPECT_EQ(h.scheduler().NextAdmissibleTime(), t0 + absl::Seconds(5));
  h.Step();
  h.Step();  // two tokens each
  ASSERT_EQ(sinks[2]->tokens().size(), 2u);
  EXPECT_TRUE(h.scheduler().Cancel(3).ok());  // 18 come back: 48 >= 40
  EXPECT_EQ(h.scheduler().BudgetLevel(0), 48);
  EXPECT_TRUE(h.scheduler().HasRunnable());
  h.RunUntilIdle();
  ASSERT_TRUE(single_sink->finished());
  EXPECT_EQ(single_sink->finish().timings.first_scheduled, t0);
  EXPECT_EQ(h.scheduler().BudgetLevel(0), 8);
  const TenantStats stats = queues.stats(0);
  EXPECT_EQ(stats.budget_tokens, 90 - 18 + 40);
  EXPECT_EQ(stats.budget_tokens, stats.prompt_tokens + stats.generated_tokens);
}

TEST(TokenBudgetTest, ReservationLargerThanTheBucketWaitsForAFullOne) {
  // 60 a minute (1/s). 40 + 30 = 70 is more than the bucket holds: it is
  // admitted when the bucket is full and leaves a debt of 10.
  Harness h(Engine(/*block_size=*/4), Budget(60, 64, 8));
  const absl::Time t0 = h.clock().Now();
  const TenantQueues& queues = h.scheduler().queues();
  std::vector<Submitted> r;
  r.push_back(h.Submit(TaggedPrompt(0, 40), 30));
  r.push_back(h.Submit(TaggedPrompt(1, 10), 5));   // reserves 15
  r.push_back(h.Submit(TaggedPrompt(2, 40), 30));  // 70 again
  h.RunUntilIdle();
  EXPECT_EQ(Finished(r), 1);
  EXPECT_EQ(h.scheduler().BudgetLevel(0), -10);
  EXPECT_EQ(h.scheduler().NextAdmissibleTime(), t0 + absl::Seconds(25));
  EXPECT_EQ(h.scheduler().QueueFullRetryHint(0, t0), absl::Seconds(25));
  h.clock().Advance(absl::Seconds(25));
  h.RunUntilIdle();
  EXPECT_EQ(Finished(r), 2);
  // The next 70 waits for a full bucket: 60 s more.
  EXPECT_EQ(h.scheduler().NextAdmissibleTime(), t0 + absl::Seconds(85));
  h.clock().Advance(absl::Seconds(60) - absl::Milliseconds(1));
  EXPECT_FALSE(h.scheduler().HasRunnable());
  h.clock().Advance(absl::Milliseconds(1));
  h.RunUntilIdle();
  ASSERT_EQ(Finished(r), 3);
  EXPECT_EQ(h.scheduler().BudgetLevel(0), -10);
  EXPECT_EQ(queues.stats(0).budget_tokens, 70 + 15 + 70);
}

// Period 7: every draft is right.
int32_t Periodic(absl::Span<const int32_t> context) {
  return context[context.size() - 7];
}

TEST(TokenBudgetTest, DraftsReserveNothingAndStopsReturnTheRest) {
  FakeEngineOptions engine = Engine(/*block_size=*/4);
  engine.script = Periodic;
  Harness h(engine, Budget(120, 64, 8));
  std::vector<int32_t> prompt;
  for (int i = 0; i < 3; ++i) {
    for (char c : std::string("abcdefg")) prompt.push_back(c);
  }
  RequestSpec full = h.Spec(prompt, 30);
  full.max_draft_tokens = 4;
  RequestSpec stopped = h.Spec(prompt, 30);
  stopped.max_draft_tokens = 4;
  stopped.stop.stop_token_ids = {'d'};  // its 4th token
  const Submitted a = h.Submit(std::move(full));
  const Submitted b = h.Submit(std::move(stopped));
  h.RunUntilIdle();
  ASSERT_EQ(a.sink->finish().reason, FinishReason::kLength);
  ASSERT_EQ(b.sink->finish().reason, FinishReason::kStop);
  EXPECT_GT(a.sink->finish().usage.accepted_draft_tokens, 0);
  EXPECT_EQ(b.sink->finish().usage.completion_tokens, 4);
  const TenantQueues& queues = h.scheduler().queues();
  const TenantStats stats = queues.stats(0);
  EXPECT_EQ(stats.budget_tokens, 21 + 30 + 21 + 4);
  EXPECT_EQ(stats.budget_tokens, stats.prompt_tokens + stats.generated_tokens);
  EXPECT_EQ(h.scheduler().BudgetLevel(0), 120 - 76);
}

}  // namespace
}  // namespace paceline::scheduler::testing
