// Preemption thrash (issue 18 scenario 7): a pool far too small for the
// requests growing in it forces preemption over and over; every request
// still finishes with its unpressured output, and each is preempted at
// most once with at most its computed tokens recomputed (scheduler.cc,
// "Preemption is bounded"). Exact counters over the fake engine.

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/scheduler_test_util.h"

namespace paceline::scheduler::testing {
namespace {

struct Outcome {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<Usage> usage;
  SchedulerCounters counters;
  int64_t steps = 0;
};

struct Workload {
  int32_t num_requests = 8;
  int32_t prompt_tokens = 6;
  int32_t max_tokens = 30;
  std::vector<PriorityClass> priorities;  // per request; empty = standard
};

// The workload over a pool of `num_blocks` blocks of 4 tokens, 64-token
// steps, up to 8 running.
Outcome RunWorkload(const Workload& w, int32_t num_blocks) {
  FakeEngineOptions eo;
  eo.n_vocab = 2048;
  eo.block_size = 4;
  eo.num_blocks = num_blocks;
  Harness h(eo, Opts(64, 8));
  std::vector<Submitted> r;
  for (int32_t i = 0; i < w.num_requests; ++i) {
    RequestSpec spec = h.Spec(TaggedPrompt(i, w.prompt_tokens), w.max_tokens);
    if (!w.priorities.empty()) spec.priority = w.priorities[i];
    r.push_back(h.Submit(std::move(spec)));
  }
  Outcome run;
  run.steps = h.RunUntilIdle();
  for (const Submitted& s : r) {
    EXPECT_TRUE(s.sink->finished());
    run.tokens.push_back(s.sink->tokens());
    run.usage.push_back(s.sink->finish().usage);
  }
  run.counters = h.scheduler().counters();
  EXPECT_EQ(h.scheduler().pager().Stats().used_blocks, 0);
  EXPECT_TRUE(h.scheduler().pager().CheckConsistency().ok());
  return run;
}

// The bound of scheduler.cc ("Preemption is bounded"), request by request.
void ExpectBounded(const Workload& w, const Outcome& run) {
  int64_t preemptions = 0;
  int64_t recomputed = 0;
  for (size_t i = 0; i < run.usage.size(); ++i) {
    const Usage& u = run.usage[i];
    EXPECT_LE(u.preemptions, 1) << "request " << i;
    // At most what it had computed: prompt + max_tokens - 2 tokens.
    EXPECT_LE(u.recomputed_tokens, w.prompt_tokens + w.max_tokens - 2)
        << "request " << i;
    EXPECT_EQ(u.completion_tokens, w.max_tokens) << "request " << i;
    preemptions += u.preemptions;
    recomputed += u.recomputed_tokens;
  }
  EXPECT_EQ(preemptions, run.counters.preemptions);
  EXPECT_EQ(recomputed, run.counters.recomputed_tokens);
  EXPECT_EQ(run.counters.finished[static_cast<int>(FinishReason::kLength)],
            w.num_requests);
}

// Eight requests of 6 + 60 - 1 = 65 positions (17 blocks of 4) in a pool
// of 20. Before the bound the same workload took 18 preemptions (up to 4
// of one request) and recomputed 316 tokens (up to 56 of one request) in
// 283 steps; now 7 and 116 (at most 1 and 28) in 387 steps: a readmission
// waits for room to finish.
TEST(PreemptionThrashTest, EachRequestIsPreemptedAtMostOnce) {
  Workload w;
  w.max_tokens = 60;
  const Outcome roomy = RunWorkload(w, 256);
  EXPECT_EQ(roomy.counters.preemptions, 0);
  const Outcome tight = RunWorkload(w, 20);
  EXPECT_EQ(tight.tokens, roomy.tokens);
  ExpectBounded(w, tight);
  EXPECT_EQ(tight.counters.preemptions, 7);
  EXPECT_EQ(tight.counters.recomputed_tokens, 116);
  for (size_t i = 1; i < tight.usage.size(); ++i) {
    EXPECT_EQ(tight.usage[i].preemptions, 1) << "request " << i;
  }
  EXPECT_EQ(tight.usage[0].preemptions, 0);  // the first never is
  EXPECT_EQ(tight.steps, 387);
}

// The same with the three priority classes mixed over sixteen requests: a
// readmitted request is never a victim, whatever the class of the request
// that needs its blocks.
TEST(PreemptionThrashTest, TheBoundHoldsAcrossPriorityClasses) {
  Workload w;
  w.num_requests = 16;
  w.max_tokens = 30;
  for (int32_t i = 0; i < w.num_requests; ++i) {
    w.priorities.push_back(static_cast<PriorityClass>(i * 2 % 3));
  }
  const Outcome roomy = RunWorkload(w, 256);
  EXPECT_EQ(roomy.counters.preemptions, 0);
  const Outcome tight = RunWorkload(w, 16);
  EXPECT_EQ(tight.tokens, roomy.tokens);
  ExpectBounded(w, tight);
  EXPECT_GT(tight.counters.preemptions, 0);
}

}  // namespace
}  // namespace paceline::scheduler::testing
