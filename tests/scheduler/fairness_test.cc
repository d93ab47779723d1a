// Weighted fair share across tenants (VTC): service in proportion to the
// weights while both are backlogged, no starvation under a flood, no credit
// banked while idle, and priority class then FIFO within a tenant.

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "scheduler/scheduler.h"
#include "tests/testing/scheduler_test_util.h"

namespace paceline::scheduler::testing {
namespace {

FakeEngineOptions Engine() {
  FakeEngineOptions o;
  o.n_vocab = 2048;
  o.block_size = 16;
  o.num_blocks = 1024;
  o.record = false;
  return o;
}

std::vector<int32_t> Prompt(int32_t first, int32_t n) {
  std::vector<int32_t> p(n);
  for (int32_t i = 0; i < n; ++i) p[i] = first + i;
  return p;
}

TEST(FairnessTest, BackloggedTenantsAreServedInProportionToTheirWeights) {
  SchedulerOptions options = Opts(64, 8);
  options.tenants = {Tenant("a", 1), Tenant("b", 3)};
  Harness h(Engine(), options);
  // About one admission per step (8 slots, 8 steps per request): enough
  // backlog for 2,000 steps on both sides.
  for (int i = 0; i < 800; ++i) h.Submit(Prompt(100, 8), 8, "a");
  for (int i = 0; i < 1800; ++i) h.Submit(Prompt(200, 8), 8, "b");
  for (int step = 0; step < 2000; ++step) h.Step();
  const TenantStats a = h.scheduler().queues().stats(0);
  const TenantStats b = h.scheduler().queues().stats(1);
  EXPECT_GT(a.waiting, 0);  // still backlogged
  EXPECT_GT(b.waiting, 0);
  ASSERT_GT(a.service, 0);
  const double ratio = b.service / a.service;
  EXPECT_NEAR(ratio, 3.0, 0.15) << "a " << a.service << " b " << b.service;
  // The counters stay within one request's weighted service of each other.
  EXPECT_NEAR(a.counter, b.counter, 24.0);
}

// A floods 1,000 short requests; B submits one after `warmup` steps. B waits
// only for the next free slot, however long A's queue.
int32_t StepsUntilFirstToken(int warmup) {
  SchedulerOptions options = Opts(64, 8);
  options.tenants = {Tenant("a"), Tenant("b")};
  Harness h(Engine(), options);
  for (int i = 0; i < 1000; ++i) h.Submit(Prompt(100, 4), 4, "a");
  for (int step = 0; step < warmup; ++step) h.Step();
  const Submitted b = h.Submit(Prompt(300, 4), 4, "b");
  for (int32_t steps = 1; steps <= 1000; ++steps) {
    h.Step();
    if (!b.sink->tokens().empty()) return steps;
  }
  return -1;
}

TEST(FairnessTest, AFloodDoesNotDelayAnotherTenantsRequest) {
  // A's requests run 4 steps; its 8 slots free together every 4th step
  // (after steps 4, 8, ..., 20, 24). Submitted after step 20, B is admitted
  // in step 21; after step 21, in step 25.
  EXPECT_EQ(StepsUntilFirstToken(20), 1);
  EXPECT_EQ(StepsUntilFirstToken(21), 4);
  EXPECT_EQ(StepsUntilFirstToken(22), 3);
  EXPECT_EQ(StepsUntilFirstToken(23), 2);
}

TEST(FairnessTest, ATenantReturningFromIdleBanksNoCredit) {
  SchedulerOptions options = Opts(64, 4);
  options.tenants = {Tenant("a"), Tenant("b")};
  Harness h(Engine(), options);
  for (int i = 0; i < 50; ++i) h.Submit(Prompt(100, 8), 8, "a");
  // B was active once, long ago, and idle since.
  h.Submit(Prompt(300, 8), 1, "b");
  h.Step();
  EXPECT_EQ(h.scheduler().queues().stats(1).running, 0);
  for (int step = 0; step < 40; ++step) h.Step();
  const double a_counter = h.scheduler().queues().stats(0).counter;
  EXPECT_GT(a_counter, 100);
  EXPECT_EQ(h.scheduler().queues().stats(1).counter, 8.0 + 2.0);
  h.Submit(Prompt(300, 8), 8, "b");
  // Lifted to A's counter: B's idle time earned it nothing.
  EXPECT_EQ(h.scheduler().queues().stats(1).counter, a_counter);
  // Still active (queued or running), B is not lifted again.
  h.Step();
  const double b_counter = h.scheduler().queues().stats(1).counter;
  h.Submit(Prompt(300, 8), 8, "b");
  EXPECT_EQ(h.scheduler().queues().stats(1).counter, b_counter);
}

TEST(FairnessTest, WithinATenantPriorityClassThenFifo) {
  FakeEngineOptions eo = Engine();
  eo.record = true;
  Harness h(eo, Opts(64, 1));
  const PriorityClass classes[] = {PriorityClass::kBatch, PriorityClass::kStandard,
                                   PriorityClass::kInteractive,
                                   PriorityClass::kStandard};
  for (int32_t tag = 0; tag < 4; ++tag) {
    RequestSpec spec = h.Spec(TaggedPrompt(tag, 4), 2);
    spec.priority = classes[tag];
    h.Submit(std::move(spec));
  }
  h.RunUntilIdle();
  std::vector<int32_t> order;
  for (const RecordedStep& step : h.steps()) {
    if (step.slices[0].position_begin == 0) order.push_back(TagOf(step.slices[0]));
  }
  EXPECT_EQ(order, (std::vector<int32_t>{2, 1, 3, 0}));
}

}  // namespace
}  // namespace paceline::scheduler::testing
