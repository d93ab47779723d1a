// The admission reserve (issue 18 scenario 8): a long prefill chunk, running
// or being admitted, leaves part of the step's budget to the prefills after
// it — other tenants' short prompts waiting, or running behind it — so
// those prompts are admitted and sampled in the next step instead of after
// the whole long prompt; and a long prefill with nothing else wanting
// tokens still takes the whole budget. Exact slices over the fake engine.

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/scheduler_test_util.h"

namespace paceline::scheduler::testing {
namespace {

constexpr int32_t kBudget = 512;
constexpr int32_t kLongPrompt = 8000;  // 15 chunks of 512, then 320

FakeEngineOptions Engine() {
  FakeEngineOptions o;
  o.n_vocab = 2048;
  o.block_size = 16;
  o.num_blocks = 1024;
  o.max_tokens_per_step = kBudget;
  return o;
}

SchedulerOptions TwoTenants(double admission_reserve = 0.5,
                            int32_t max_running = 16) {
  SchedulerOptions o = Opts(0, max_running, {Tenant("a"), Tenant("b")});
  o.admission_reserve = admission_reserve;
  return o;
}

// (tag, token_count) of each slice of a step.
std::vector<std::pair<int32_t, int32_t>> Slices(const RecordedStep& step) {
  std::vector<std::pair<int32_t, int32_t>> out;
  for (const RecordedSlice& s : step.slices) {
    out.push_back({TagOf(s), s.token_count});
  }
  return out;
}

using Slice = std::pair<int32_t, int32_t>;

TEST(AdmissionReserveTest, ShortPromptOfAnotherTenantIsSampledInTheNextStep) {
  Harness h(Engine(), TwoTenants());
  const Submitted a = h.Submit(TaggedPrompt(0, kLongPrompt), 4, "a");
  h.Step();  // nothing else wants tokens: the whole budget
  EXPECT_EQ(Slices(h.steps()[0]), (std::vector<Slice>{{0, 512}}));
  const Submitted b = h.Submit(TaggedPrompt(1, 32), 4, "b");
  h.Step();  // the chunk leaves b's 32 tokens: b is admitted and sampled
  EXPECT_EQ(Slices(h.steps()[1]), (std::vector<Slice>{{0, 480}, {1, 32}}));
  EXPECT_EQ(b.sink->tokens().size(), 1u);
  for (int k = 2; k < 5; ++k) {
    h.Step();  // b decodes: the chunk keeps one token for it
    EXPECT_EQ(Slices(h.steps()[k]), (std::vector<Slice>{{0, 511}, {1, 1}}));
  }
  ASSERT_TRUE(b.sink->finished());
  EXPECT_EQ(b.sink->tokens().size(), 4u);
  // No budget was lost: a's first token comes in step 16 as it does alone
  // (512 + 480 + 3 × 511 + 10 × 512 + 355 = 8000).
  int64_t steps = 5;
  while (a.sink->tokens().empty()) {
    h.Step();
    ++steps;
  }
  EXPECT_EQ(steps, 16);
  EXPECT_EQ(h.steps()[15].tokens.size(), 355u);
  for (int k = 5; k < 15; ++k) EXPECT_EQ(h.steps()[k].tokens.size(), 512u);
}

// Without the reserve (the behavior before it), b waits for a's whole
// prompt: its first token comes in step 16.
TEST(AdmissionReserveTest, WithoutTheReserveTheShortPromptWaitsForTheLongOne) {
  Harness h(Engine(), TwoTenants(/*admission_reserve=*/0));
  const Submitted a = h.Submit(TaggedPrompt(0, kLongPrompt), 4, "a");
  h.Step();
  const Submitted b = h.Submit(TaggedPrompt(1, 32), 4, "b");
  int64_t steps = 1;
  while (b.sink->tokens().empty()) {
    h.Step();
    ++steps;
  }
  EXPECT_EQ(steps, 16);
  EXPECT_EQ(Slices(h.steps()[15]), (std::vector<Slice>{{0, 320}, {1, 32}}));
  EXPECT_EQ(a.sink->tokens().size(), 1u);
}

// A prompt longer than the reserve gets the reserve (half the budget) in
// its first step, then, running behind the long one, the rest.
TEST(AdmissionReserveTest, PromptLongerThanTheReserveFinishesInTwoSteps) {
  Harness h(Engine(), TwoTenants());
  h.Submit(TaggedPrompt(0, kLongPrompt), 4, "a");
  h.Step();
  const Submitted b = h.Submit(TaggedPrompt(1, 300), 4, "b");
  h.Step();
  EXPECT_EQ(Slices(h.steps()[1]), (std::vector<Slice>{{0, 256}, {1, 256}}));
  EXPECT_TRUE(b.sink->tokens().empty());
  h.Step();  // the long chunk keeps 1 token for b and leaves its other 43
  EXPECT_EQ(Slices(h.steps()[2]), (std::vector<Slice>{{0, 468}, {1, 44}}));
  EXPECT_EQ(b.sink->tokens().size(), 1u);
}

// A waiting request that cannot be admitted (max_running) takes nothing
// from the long prefill.
TEST(AdmissionReserveTest, LongPrefillTakesTheWholeBudgetWhenNothingCanJoin) {
  Harness h(Engine(), TwoTenants(0.5, /*max_running=*/1));
  const Submitted a = h.Submit(TaggedPrompt(0, kLongPrompt), 1, "a");
  const Submitted b = h.Submit(TaggedPrompt(1, 32), 1, "b");
  for (int k = 0; k < 15; ++k) {
    h.Step();
    EXPECT_EQ(Slices(h.steps()[k]), (std::vector<Slice>{{0, 512}}));
  }
  h.Step();
  EXPECT_EQ(Slices(h.steps()[15]), (std::vector<Slice>{{0, 320}}));
  ASSERT_TRUE(a.sink->finished());
  h.Step();
  EXPECT_EQ(Slices(h.steps()[16]), (std::vector<Slice>{{1, 32}}));
  EXPECT_TRUE(b.sink->finished());
}

// A tenant's own next prompt takes nothing from its running prefill: its
// prompts prefill one after another, the next one beside the last one's
// decodes.
TEST(AdmissionReserveTest, SameTenantsPromptsPrefillOneAfterAnother) {
  Harness h(Engine(), TwoTenants());
  const Submitted first = h.Submit(TaggedPrompt(0, 1000), 4, "a");
  const Submitted second = h.Submit(TaggedPrompt(1, 32), 4, "a");
  h.Step();
  EXPECT_EQ(Slices(h.steps()[0]), (std::vector<Slice>{{0, 512}}));
  h.Step();  // the first prompt's last 488; the second takes the leftover
  EXPECT_EQ(Slices(h.steps()[1]), (std::vector<Slice>{{0, 488}, {1, 24}}));
  EXPECT_EQ(first.sink->tokens().size(), 1u);
  EXPECT_TRUE(second.sink->tokens().empty());
}

// Every waiting prompt of the other tenant counts, up to the reserve, not
// only the one fair share would admit next: two short prompts arriving
// together are both sampled in the next step.
TEST(AdmissionReserveTest, EveryShortPromptWaitingShareTheReserve) {
  Harness h(Engine(), TwoTenants());
  h.Submit(TaggedPrompt(0, kLongPrompt), 4, "a");
  h.Step();
  const Submitted b1 = h.Submit(TaggedPrompt(1, 32), 4, "b");
  const Submitted b2 = h.Submit(TaggedPrompt(2, 32), 4, "b");
  h.Step();
  EXPECT_EQ(Slices(h.steps()[1]),
            (std::vector<Slice>{{0, 448}, {1, 32}, {2, 32}}));
  EXPECT_EQ(b1.sink->tokens().size(), 1u);
  EXPECT_EQ(b2.sink->tokens().size(), 1u);
}

// A long prompt admitted first by fair share (a tie goes to the tenant
// configured first) leaves room for the other tenant's short prompt
// waiting behind it: both start in the first step.
TEST(AdmissionReserveTest, LongPromptAdmittedFirstLeavesRoomForAShortOne) {
  Harness h(Engine(), TwoTenants());
  h.Submit(TaggedPrompt(0, kLongPrompt), 4, "a");
  const Submitted b = h.Submit(TaggedPrompt(1, 32), 4, "b");
  h.Step();
  EXPECT_EQ(Slices(h.steps()[0]), (std::vector<Slice>{{0, 480}, {1, 32}}));
  EXPECT_EQ(b.sink->tokens().size(), 1u);
}

// Two tenants' long prompts waiting when only the reserve is left: the
// first in fair-share order gives way to the other's demand, which then
// takes the budget instead of giving way in turn (nothing admitted).
TEST(AdmissionReserveTest, LongPromptsOfTwoTenantsNeverWaitForEachOther) {
  Harness h(Engine(), TwoTenants());
  h.Submit(TaggedPrompt(0, kLongPrompt), 4, "a");
  h.Step();
  h.Submit(TaggedPrompt(1, kLongPrompt), 4, "a");
  h.Submit(TaggedPrompt(2, kLongPrompt), 4, "b");
  h.Step();  // a's running chunk leaves b's reserve; a's second gives way
  EXPECT_EQ(Slices(h.steps()[1]), (std::vector<Slice>{{0, 256}, {2, 256}}));
}

TEST(AdmissionReserveTest, ReserveOutsideZeroToOneIsRefused) {
  FakeEngine engine(Engine());
  const std::unique_ptr<engine::Tokenizer> tokenizer = ByteTokenizer(2048);
  ManualClock clock;
  for (double reserve : {-0.1, 1.0, 2.0}) {
    EXPECT_FALSE(
        Scheduler::Create(TwoTenants(reserve), engine, tokenizer.get(), &clock)
            .ok())
        << reserve;
  }
}

}  // namespace
}  // namespace paceline::scheduler::testing
