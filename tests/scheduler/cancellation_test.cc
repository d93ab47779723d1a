// Cancellation in each state — queued, mid-prefill, decoding — takes effect
// at once: the lease is gone, the sink hears CANCELLED, counters move, and
// the request is in no later batch. Queued entries are skipped when popped
// and counted by reason.

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "scheduler/scheduler.h"
#include "tests/testing/scheduler_test_util.h"

namespace paceline::scheduler::testing {
namespace {

constexpr int kCancelled = static_cast<int>(FinishReason::kCancelled);
constexpr int kClient = static_cast<int>(CancelReason::kClient);

FakeEngineOptions Engine() {
  FakeEngineOptions o;
  o.n_vocab = 2048;
  o.block_size = 4;
  o.num_blocks = 64;
  return o;
}

void ExpectCancelled(const Submitted& s) {
  ASSERT_TRUE(s.sink->finished());
  EXPECT_EQ(s.sink->finish().reason, FinishReason::kCancelled);
  EXPECT_EQ(s.sink->finish().status.code(), absl::StatusCode::kCancelled);
}

bool InStep(const RecordedStep& step, int32_t tag) {
  for (const RecordedSlice& s : step.slices) {
    if (TagOf(s) == tag) return true;
  }
  return false;
}

TEST(CancellationTest, QueuedRequestIsFinishedAtOnceAndSkippedWhenPopped) {
  Harness h(Engine(), Opts(64, 1));
  const Submitted running = h.Submit(TaggedPrompt(0, 4), 3);
  const Submitted queued = h.Submit(TaggedPrompt(1, 4), 3);
  h.Step();
  EXPECT_EQ(h.scheduler().num_waiting(), 1);

  ASSERT_TRUE(h.scheduler().Cancel(queued.id).ok());
  ExpectCancelled(queued);
  EXPECT_TRUE(queued.sink->tokens().empty());
  EXPECT_EQ(h.scheduler().num_waiting(), 0);
  EXPECT_EQ(h.scheduler().counters().finished[kCancelled], 1);
  EXPECT_EQ(h.scheduler().queues().stats(0).skipped[kClient], 0);  // not popped yet

  const Submitted later = h.Submit(TaggedPrompt(2, 4), 3);
  h.Step();
  h.Step();  // `running` finishes; the dead entry is popped, then `later`
  EXPECT_TRUE(running.sink->finished());
  h.Step();
  EXPECT_EQ(h.scheduler().queues().stats(0).skipped[kClient], 1);
  EXPECT_TRUE(InStep(h.steps().back(), 2));
  for (const RecordedStep& step : h.steps()) EXPECT_FALSE(InStep(step, 1));
  h.RunUntilIdle();
  EXPECT_EQ(later.sink->finish().reason, FinishReason::kLength);
  // Cancelling a finished or unknown request: NotFound.
  EXPECT_EQ(h.scheduler().Cancel(queued.id).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(h.scheduler().Cancel(999).code(), absl::StatusCode::kNotFound);
}

TEST(CancellationTest, MidPrefillReleasesTheLeaseAtOnce) {
  Harness h(Engine(), Opts(16, 4));
  const Submitted s = h.Submit(TaggedPrompt(0, 40), 5);
  h.Step();  // 16 of 40 prompt tokens computed
  EXPECT_EQ(h.steps().back().slices[0].token_count, 16);
  EXPECT_EQ(h.steps().back().slices[0].num_logits, 0);
  EXPECT_EQ(h.scheduler().pager().Stats().used_blocks, 10);

  ASSERT_TRUE(h.scheduler().Cancel(s.id).ok());
  ExpectCancelled(s);
  EXPECT_TRUE(s.sink->tokens().empty());
  EXPECT_EQ(h.scheduler().num_running(), 0);
  const kvpager::PagerStats stats = h.scheduler().pager().Stats();
  EXPECT_EQ(stats.used_blocks, 0);
  EXPECT_EQ(stats.cached_blocks, 4);  // the 16 computed tokens stay cached
  EXPECT_FALSE(h.scheduler().HasRunnable());
  EXPECT_TRUE(h.Step().empty());
  EXPECT_EQ(h.steps().size(), 1u);
  EXPECT_EQ(s.sink->finish().usage.completion_tokens, 0);
}

TEST(CancellationTest, DecodingRequestStopsBeforeTheNextStep) {
  Harness h(Engine(), Opts(64, 4));
  const Submitted a = h.Submit(TaggedPrompt(0, 4), 20);
  const Submitted b = h.Submit(TaggedPrompt(1, 4), 20);
  h.Step();
  h.Step();
  h.Step();
  ASSERT_EQ(a.sink->tokens().size(), 3u);
  ASSERT_TRUE(h.scheduler().Cancel(a.id).ok());
  ExpectCancelled(a);
  EXPECT_EQ(a.sink->tokens().size(), 3u);
  EXPECT_EQ(a.sink->finish().usage.completion_tokens, 3);
  EXPECT_EQ(h.scheduler().num_running(), 1);
  h.Step();
  EXPECT_FALSE(InStep(h.steps().back(), 0));
  EXPECT_TRUE(InStep(h.steps().back(), 1));
  EXPECT_EQ(a.sink->tokens().size(), 3u);
  EXPECT_EQ(h.scheduler().counters().finished[kCancelled], 1);
  h.RunUntilIdle();
  EXPECT_EQ(b.sink->finish().reason, FinishReason::kLength);
  EXPECT_EQ(h.scheduler().pager().Stats().used_blocks, 0);
}

TEST(CancellationTest, CancelBetweenScheduleAndUpdateIsRefused) {
  Harness h(Engine(), Opts(64, 4));
  const Submitted a = h.Submit(TaggedPrompt(0, 4), 5);
  h.scheduler().Schedule();
  EXPECT_EQ(h.scheduler().Cancel(a.id).code(),
            absl::StatusCode::kFailedPrecondition);
  StepTokens failed;
  failed.status = absl::UnavailableError("not run");
  h.scheduler().Update(failed);
  EXPECT_EQ(a.sink->finish().reason, FinishReason::kError);
}

TEST(CancellationTest, ManyCancelledEntriesAreCompacted) {
  Harness h(Engine(), Opts(64, 1));
  h.Submit(TaggedPrompt(0, 4), 50);
  h.Step();
  std::vector<Submitted> queued;
  for (int32_t tag = 1; tag <= 100; ++tag) queued.push_back(h.Submit(TaggedPrompt(tag, 4), 2));
  for (const Submitted& s : queued) ASSERT_TRUE(h.scheduler().Cancel(s.id).ok());
  // More than max(64, live) dead entries: compacted on the 65th.
  EXPECT_EQ(h.scheduler().queues().stats(0).skipped[kClient], 65);
  EXPECT_EQ(h.scheduler().counters().finished[kCancelled], 100);
  EXPECT_EQ(h.scheduler().num_waiting(), 0);
}

TEST(CancellationTest, DestroyingTheSchedulerCancelsWhatIsLeft) {
  auto sink_running = std::make_shared<CollectingSink>();
  auto sink_queued = std::make_shared<CollectingSink>();
  {
    Harness h(Engine(), Opts(64, 1));
    RequestSpec a = h.Spec(TaggedPrompt(0, 4), 5);
    a.sink = sink_running;
    RequestSpec b = h.Spec(TaggedPrompt(1, 4), 5);
    b.sink = sink_queued;
    h.Submit(std::move(a));
    h.Submit(std::move(b));
    h.Step();
  }
  for (const auto& sink : {sink_running, sink_queued}) {
    ASSERT_TRUE(sink->finished());
    EXPECT_EQ(sink->finish().reason, FinishReason::kCancelled);
    EXPECT_EQ(sink->finish().status.code(), absl::StatusCode::kUnavailable);
  }
}

}  // namespace
}  // namespace paceline::scheduler::testing
