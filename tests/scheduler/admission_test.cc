// Submission checks (infeasible requests are refused up front, never left
// to hang) and per-tenant limits: max_queued with a retry hint, max_running,
// tokens per minute on an injected clock.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "scheduler/retry_hint.h"
#include "scheduler/scheduler.h"
#include "tests/testing/scheduler_test_util.h"

namespace paceline::scheduler::testing {
namespace {

FakeEngineOptions Engine(int32_t num_blocks, int64_t context) {
  FakeEngineOptions o;
  o.n_vocab = 2048;
  o.block_size = 4;
  o.num_blocks = num_blocks;
  o.context_length = context;
  return o;
}

TEST(AdmissionTest, InfeasibleAndMalformedRequestsAreRejectedAtSubmission) {
  Harness h(Engine(/*num_blocks=*/4, /*context=*/64), Opts(0, 4));
  Scheduler& s = h.scheduler();

  RequestSpec too_long = h.Spec(TaggedPrompt(0, 60), 10);  // 69 > 64
  auto sink = too_long.sink;
  absl::Status status = s.Submit(1, std::move(too_long));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "context is 64")) << status;
  EXPECT_FALSE(std::static_pointer_cast<CollectingSink>(sink)->accepted());
  EXPECT_FALSE(std::static_pointer_cast<CollectingSink>(sink)->finished());

  // More than the whole pool: a status of its own, not the retryable
  // RESOURCE_EXHAUSTED of a full queue.
  status = s.Submit(2, h.Spec(TaggedPrompt(0, 10), 8));  // 17 > 16 slots
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(status.message(), "never run")) << status;
  EXPECT_FALSE(RetryAfter(status).has_value());

  EXPECT_EQ(s.Submit(3, h.Spec(TaggedPrompt(0, 4), 2, "nobody")).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Submit(4, h.Spec({}, 2)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Submit(5, h.Spec({5000}, 2)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Submit(6, h.Spec({1}, 0)).code(), absl::StatusCode::kInvalidArgument);
  RequestSpec bad_sampling = h.Spec({1}, 2);
  bad_sampling.sampling.top_p = 0;
  EXPECT_EQ(s.Submit(7, std::move(bad_sampling)).code(),
            absl::StatusCode::kInvalidArgument);
  RequestSpec bad_stop = h.Spec({1}, 2);
  bad_stop.stop.stop_token_ids = {5000};  // outside the vocabulary
  EXPECT_EQ(s.Submit(8, std::move(bad_stop)).code(),
            absl::StatusCode::kInvalidArgument);
  RequestSpec no_sink = h.Spec({1}, 2);
  no_sink.sink = nullptr;
  EXPECT_EQ(s.Submit(9, std::move(no_sink)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.counters().rejected, 9);
  EXPECT_EQ(s.num_waiting(), 0);

  // Exactly the pool: 10 + 7 - 1 = 16 positions. It runs to the end alone.
  const Submitted fits = h.Submit(TaggedPrompt(0, 10), 7);
  EXPECT_TRUE(fits.sink->accepted());
  EXPECT_EQ(s.Submit(fits.id, h.Spec({1}, 2)).code(),
            absl::StatusCode::kAlreadyExists);
  h.RunUntilIdle();
  EXPECT_EQ(fits.sink->finish().reason, FinishReason::kLength);
  EXPECT_EQ(fits.sink->tokens().size(), 7u);
}

TEST(AdmissionTest, FullQueueIsRefusedWithARetryHint) {
  SchedulerOptions options = Opts(64, 1);
  options.tenants = {Tenant("t", 1, 0, 2), Tenant("u")};
  Harness h(Engine(64, 1024), options);
  h.Submit(TaggedPrompt(0, 4), 2);
  h.Submit(TaggedPrompt(1, 4), 2);
  const absl::Status full = h.scheduler().Submit(50, h.Spec(TaggedPrompt(2, 4), 2));
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(RetryAfter(full), std::optional<absl::Duration>(absl::Seconds(1)));
  EXPECT_TRUE(absl::StrContains(full.message(), "retry after 1000 ms")) << full;
  h.Submit(TaggedPrompt(3, 4), 2, "u");  // another tenant is not affected
  h.Step();  // admits one of t's: a place frees in t's queue
  h.Submit(TaggedPrompt(2, 4), 2);
  EXPECT_EQ(h.scheduler().counters().rejected, 1);
}

TEST(AdmissionTest, TenantMaxRunningHoldsItsOtherRequestsBack) {
  SchedulerOptions options = Opts(64, 8);
  options.tenants = {Tenant("a", 1, 1), Tenant("b")};
  Harness h(Engine(64, 1024), options);
  h.Submit(TaggedPrompt(0, 4), 3, "a");
  h.Submit(TaggedPrompt(1, 4), 3, "a");
  h.Submit(TaggedPrompt(2, 4), 3, "b");
  h.Submit(TaggedPrompt(3, 4), 3, "b");
  h.Step();
  std::vector<int32_t> tags;
  for (const RecordedSlice& s : h.steps().back().slices) tags.push_back(TagOf(s));
  EXPECT_EQ(tags.size(), 3u);
  EXPECT_EQ(std::count(tags.begin(), tags.end(), 1), 0);
  EXPECT_EQ(h.scheduler().queues().stats(0).running, 1);
  EXPECT_EQ(h.scheduler().queues().stats(0).waiting, 1);
  h.Step();
  h.Step();  // a's first request finishes (3 tokens)
  h.Step();
  EXPECT_EQ(TagOf(h.steps().back().slices.back()), 1);
  EXPECT_EQ(h.steps().back().slices.back().position_begin, 0);
}

TEST(AdmissionTest, TokensPerMinuteBucketHoldsAdmissionUntilItRefills) {
  SchedulerOptions options = Opts(64, 8);
  // 60 tokens per minute: 1 token/s, a burst of 60.
  options.tenants = {Tenant("t", 1, 0, 0, 60)};
  Harness h(Engine(64, 1024), options);
  // Each reserves its prompt and max_tokens: 40 + 3.
  const Submitted first = h.Submit(TaggedPrompt(0, 40), 3);
  const Submitted second = h.Submit(TaggedPrompt(1, 40), 3);
  h.Step();  // first admitted: 60 - 43 = 17, so second is not
  EXPECT_EQ(h.steps().back().slices.size(), 1u);
  h.Step();
  EXPECT_EQ(h.steps().back().slices.size(), 1u);
  h.Step();  // first finishes, having used all it reserved
  EXPECT_TRUE(first.sink->finished());
  EXPECT_FALSE(h.scheduler().HasRunnable());
  // 43 are back after 26 s.
  EXPECT_EQ(h.scheduler().NextAdmissibleTime() - h.clock().Now(),
            absl::Seconds(26));
  h.clock().Advance(absl::Seconds(26) - absl::Milliseconds(1));
  EXPECT_FALSE(h.scheduler().HasRunnable());
  h.clock().Advance(absl::Milliseconds(1));
  ASSERT_TRUE(h.scheduler().HasRunnable());
  h.Step();
  EXPECT_EQ(TagOf(h.steps().back().slices[0]), 1);
  h.RunUntilIdle();
  EXPECT_EQ(second.sink->finish().reason, FinishReason::kLength);
  EXPECT_EQ(h.scheduler().queues().stats(0).prompt_tokens, 80);
  EXPECT_EQ(h.scheduler().queues().stats(0).generated_tokens, 6);
  EXPECT_EQ(h.scheduler().queues().stats(0).budget_tokens, 86);
}

}  // namespace
}  // namespace paceline::scheduler::testing
