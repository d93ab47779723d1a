// The serving loop: the inbox (Submit / Cancel from other threads), the
// engine thread that sleeps when idle and wakes on submission, stop modes,
// intake refusals, metrics, and the offline runner built on it.

#include "scheduler/serving_loop.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "scheduler/offline_runner.h"
#include "scheduler/retry_hint.h"
#include "tests/testing/scheduler_test_util.h"

namespace paceline::scheduler::testing {
namespace {

FakeEngineOptions Engine(int32_t num_blocks = 256) {
  FakeEngineOptions o;
  o.n_vocab = 2048;
  o.block_size = 4;
  o.num_blocks = num_blocks;
  return o;
}

ServingLoopOptions LoopOpts(int32_t max_batched_tokens, int32_t max_running) {
  ServingLoopOptions o;
  o.scheduler = Opts(max_batched_tokens, max_running);
  return o;
}

class RecordingMetrics : public SchedulerMetrics {
 public:
  void OnStep(const StepStats& stats) override {
    absl::MutexLock lock(&mu_);
    ++steps_;
    tokens_ += stats.num_tokens;
  }
  void OnFirstToken(absl::string_view, absl::Duration) override {
    absl::MutexLock lock(&mu_);
    ++first_tokens_;
  }
  void OnFinished(absl::string_view, const FinishInfo& info) override {
    absl::MutexLock lock(&mu_);
    ++finished_[static_cast<int>(info.reason)];
  }
  void OnRejected(absl::string_view tenant, absl::StatusCode code) override {
    absl::MutexLock lock(&mu_);
    ++rejected_;
    last_rejected_tenant_ = std::string(tenant);
    (void)code;
  }
  void OnTenantLoad(absl::string_view, int32_t, int32_t) override {
    absl::MutexLock lock(&mu_);
    ++loads_;
  }
  int64_t steps() const { absl::MutexLock l(&mu_); return steps_; }
  int64_t tokens() const { absl::MutexLock l(&mu_); return tokens_; }
  int64_t first_tokens() const { absl::MutexLock l(&mu_); return first_tokens_; }
  int64_t loads() const { absl::MutexLock l(&mu_); return loads_; }
  int64_t rejected() const { absl::MutexLock l(&mu_); return rejected_; }
  std::string last_rejected_tenant() const {
    absl::MutexLock l(&mu_);
    return last_rejected_tenant_;
  }
  int64_t finished(FinishReason r) const {
    absl::MutexLock l(&mu_);
    return finished_[static_cast<int>(r)];
  }

 private:
  mutable absl::Mutex mu_;
  int64_t steps_ = 0, tokens_ = 0, first_tokens_ = 0, loads_ = 0, rejected_ = 0;
  std::string last_rejected_tenant_;
  int64_t finished_[kNumFinishReasons] = {};
};

// A CollectingSink that holds the engine thread in OnTokens at its
// `hold_at`-th token until Release.
class GatedSink final : public TokenSink {
 public:
  explicit GatedSink(int32_t hold_at) : hold_at_(hold_at) {}
  void OnAccepted(const AcceptInfo& info) override { inner_.OnAccepted(info); }
  void OnTokens(const TokenDelta& delta) override {
    inner_.OnTokens(delta);
    if (static_cast<int32_t>(inner_.tokens().size()) != hold_at_) return;
    absl::MutexLock lock(&mu_);
    held_ = true;
    mu_.Await(absl::Condition(&released_));
  }
  void OnFinished(const FinishInfo& info) override { inner_.OnFinished(info); }

  bool WaitHeld(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&held_), timeout);
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    released_ = true;
  }
  std::vector<int32_t> tokens() const { return inner_.tokens(); }
  bool finished() const { return inner_.finished(); }
  FinishInfo finish() const { return inner_.finish(); }

 private:
  const int32_t hold_at_;
  CollectingSink inner_;
  absl::Mutex mu_;
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
};

struct Loop {
  std::unique_ptr<engine::Tokenizer> tokenizer = ByteTokenizer(2048);
  FakeEngine* engine = nullptr;
  std::unique_ptr<ServingLoop> loop;

  explicit Loop(ServingLoopOptions options, FakeEngineOptions eo = Engine()) {
    if (options.scheduler.tenants.empty()) options.scheduler.tenants = OneTenant();
    auto fake = std::make_unique<FakeEngine>(std::move(eo));
    engine = fake.get();
    auto created = ServingLoop::Create(std::move(fake), tokenizer.get(), options);
    EXPECT_TRUE(created.ok()) << created.status();
    loop = std::move(*created);
  }

  std::pair<RequestId, std::shared_ptr<CollectingSink>> Submit(int32_t tag,
                                                              int32_t max_tokens) {
    RequestSpec spec;
    spec.tenant = "t";
    spec.prompt = TaggedPrompt(tag, 4);
    spec.sampling.temperature = 0;
    spec.stop.max_tokens = max_tokens;
    auto sink = std::make_shared<CollectingSink>();
    spec.sink = sink;
    auto id = loop->Submit(std::move(spec));
    EXPECT_TRUE(id.ok()) << id.status();
    return {id.value_or(0), sink};
  }
};

// Load() reports what the engine thread last published: queued, then
// running with blocks held, then idle with the blocks back (the prefix
// cache may keep some as cached). AcceptInfo names the prompt and the
// cached prefix a repeat of the same prompt finds.
// A scheduler that cannot be made (no tenant) fails Create with its error;
// the half-made loop is destroyed without touching it.
TEST(ServingLoopTest, CreateReturnsTheSchedulersError) {
  std::unique_ptr<engine::Tokenizer> tokenizer = ByteTokenizer(2048);
  ServingLoopOptions options;  // no tenants
  auto created = ServingLoop::Create(std::make_unique<FakeEngine>(Engine()),
                                     tokenizer.get(), options);
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument)
      << created.status();
}

TEST(ServingLoopTest, LoadSnapshotAndAcceptInfoFollowTheRequests) {
  Loop l(LoopOpts(64, 8));
  LoadSnapshot load = l.loop->Load();
  ASSERT_EQ(load.tenants.size(), 1u);
  EXPECT_EQ(load.tenants[0].name, "t");
  EXPECT_EQ(load.kv.used_blocks, 0);
  EXPECT_EQ(load.kv.total_blocks, 256);

  RequestSpec spec;
  spec.tenant = "t";
  spec.prompt = TaggedPrompt(1, 13);  // three full blocks of 4, and one token
  spec.sampling.temperature = 0;
  spec.stop.max_tokens = 5;
  auto first = std::make_shared<CollectingSink>();
  spec.sink = first;
  RequestSpec again = spec;
  ASSERT_TRUE(l.loop->Submit(std::move(spec)).ok());
  ASSERT_TRUE(l.loop->RunOnce());
  load = l.loop->Load();
  EXPECT_EQ(load.running, 1);
  EXPECT_EQ(load.tenants[0].running, 1);
  EXPECT_GT(load.kv.used_blocks, 0);
  EXPECT_EQ(load.steps, 1);
  ASSERT_TRUE(first->accepted());
  EXPECT_EQ(first->accept_info().prompt_tokens, 13);
  EXPECT_EQ(first->accept_info().cached_prompt_tokens, 0);
  l.loop->RunUntilIdle();
  load = l.loop->Load();
  EXPECT_EQ(load.running, 0);
  EXPECT_EQ(load.kv.used_blocks, 0);
  EXPECT_EQ(load.kv.free_blocks + load.kv.cached_blocks, load.kv.total_blocks);

  auto second = std::make_shared<CollectingSink>();
  again.sink = second;
  ASSERT_TRUE(l.loop->Submit(std::move(again)).ok());
  l.loop->RunUntilIdle();
  ASSERT_TRUE(second->accepted());
  EXPECT_EQ(second->accept_info().cached_prompt_tokens, 12);
  EXPECT_EQ(second->finish().usage.cached_prompt_tokens, 12);
}

TEST(ServingLoopTest, ThreadServesSubmissionsFromOtherThreadsAndSleepsWhenIdle) {
  RecordingMetrics metrics;
  ServingLoopOptions options;
  options.scheduler = Opts(64, 8);
  options.metrics = &metrics;
  Loop l(options);
  l.loop->Start();
  std::vector<std::shared_ptr<CollectingSink>> sinks(6);
  std::vector<std::thread> clients;
  for (int32_t tag = 0; tag < 6; ++tag) {
    clients.emplace_back([&, tag] { sinks[tag] = l.Submit(tag, 12).second; });
  }
  for (std::thread& t : clients) t.join();
  for (const auto& sink : sinks) {
    ASSERT_TRUE(sink->WaitFinished(absl::Seconds(10)));
    EXPECT_TRUE(sink->accepted());
    EXPECT_EQ(sink->finish().reason, FinishReason::kLength);
    EXPECT_EQ(sink->tokens().size(), 12u);
  }
  // Idle: with nothing runnable the thread blocks (one that kept stepping
  // would never be idle), and no step ran since the last request's.
  const int64_t forwards = l.engine->num_forward_calls();
  ASSERT_TRUE(l.loop->AwaitIdle(absl::Seconds(10)));
  EXPECT_EQ(l.engine->num_forward_calls(), forwards);
  // And a new submission wakes it.
  auto [id, late] = l.Submit(20, 3);
  ASSERT_TRUE(late->WaitFinished(absl::Seconds(10)));
  EXPECT_EQ(late->tokens().size(), 3u);
  RequestSpec unknown;
  unknown.tenant = "nobody";
  unknown.prompt = {1};
  unknown.sink = std::make_shared<CollectingSink>();
  EXPECT_EQ(l.loop->Submit(std::move(unknown)).status().code(),
            absl::StatusCode::kInvalidArgument);
  l.loop->Stop();
  EXPECT_EQ(metrics.rejected(), 1);
  EXPECT_EQ(metrics.last_rejected_tenant(), "");  // not a configured name
  EXPECT_EQ(l.loop->scheduler().counters().rejected, 1);
  EXPECT_EQ(metrics.finished(FinishReason::kLength), 7);
  EXPECT_EQ(metrics.first_tokens(), 7);
  EXPECT_EQ(metrics.steps(), l.engine->num_forward_calls());
  EXPECT_EQ(metrics.loads(), metrics.steps());  // one tenant
  EXPECT_EQ(l.loop->Submit(RequestSpec()).status().code(),
            absl::StatusCode::kInvalidArgument);  // checked before stopping
  RequestSpec spec;
  spec.tenant = "t";
  spec.prompt = {1};
  spec.stop.max_tokens = 1;
  spec.sink = std::make_shared<CollectingSink>();
  EXPECT_EQ(l.loop->Submit(std::move(spec)).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(ServingLoopTest, OutputsMatchEachRequestRunAlone) {
  std::vector<std::vector<int32_t>> alone;
  for (int32_t tag = 0; tag < 4; ++tag) {
    Loop l(LoopOpts(64, 8));
    auto [id, sink] = l.Submit(tag, 10);
    l.loop->RunUntilIdle();
    alone.push_back(sink->tokens());
  }
  Loop l(LoopOpts(64, 8));
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (int32_t tag = 0; tag < 4; ++tag) sinks.push_back(l.Submit(tag, 10).second);
  EXPECT_EQ(l.loop->RunUntilIdle(), 10);  // together: 10 steps in all
  for (int32_t tag = 0; tag < 4; ++tag) EXPECT_EQ(sinks[tag]->tokens(), alone[tag]);
}

TEST(ServingLoopTest, CancelThroughTheInboxTakesEffectBeforeTheNextStep) {
  Loop l(LoopOpts(64, 8));
  auto [a, sink_a] = l.Submit(0, 20);
  auto [b, sink_b] = l.Submit(1, 20);
  auto [c, sink_c] = l.Submit(2, 20);
  l.loop->Cancel(c);  // still in the inbox behind its submission
  EXPECT_TRUE(l.loop->RunOnce());
  EXPECT_TRUE(sink_c->accepted());
  EXPECT_EQ(sink_c->finish().reason, FinishReason::kCancelled);
  EXPECT_EQ(l.engine->steps().back().slices.size(), 2u);
  EXPECT_TRUE(l.loop->RunOnce());
  l.loop->Cancel(a);
  EXPECT_TRUE(l.loop->RunOnce());
  ASSERT_EQ(l.engine->steps().back().slices.size(), 1u);
  EXPECT_EQ(TagOf(l.engine->steps().back().slices[0]), 1);
  EXPECT_EQ(sink_a->tokens().size(), 2u);
  EXPECT_EQ(sink_a->finish().status.code(), absl::StatusCode::kCancelled);
  l.loop->Cancel(a);  // finished already: nothing happens
  l.loop->RunUntilIdle();
  EXPECT_EQ(sink_b->finish().reason, FinishReason::kLength);
}

// A full queue is refused on the submitting thread, before any step
// (intake_gate.h): what is in the inbox counts as queued (the scheduler
// queues all it takes before admitting any), and so does what the engine
// thread last published as waiting.
TEST(ServingLoopTest, FullQueueIsRefusedOnTheSubmittingThread) {
  ServingLoopOptions options;
  options.scheduler = Opts(64, 8);
  options.scheduler.tenants = {
      Tenant("t", 1, /*max_running=*/1, /*max_queued=*/1)};
  Loop l(options);
  const auto refused = [&l](int32_t tag) {
    RequestSpec spec;
    spec.tenant = "t";
    spec.prompt = TaggedPrompt(tag, 4);
    spec.stop.max_tokens = 2;
    auto sink = std::make_shared<CollectingSink>();
    spec.sink = sink;
    const absl::StatusOr<RequestId> id = l.loop->Submit(std::move(spec));
    EXPECT_FALSE(id.ok()) << "tag " << tag;
    EXPECT_EQ(id.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_TRUE(RetryAfter(id.status()).has_value()) << id.status();
    EXPECT_TRUE(absl::StrContains(id.status().message(), "max_queued"))
        << id.status();
    EXPECT_FALSE(sink->finished());  // refused, never accepted
  };
  auto [a, first] = l.Submit(0, 3);
  refused(10);        // the first is in the inbox
  l.loop->RunOnce();  // the first runs
  auto [b, second] = l.Submit(1, 3);
  refused(11);        // the second is in the inbox
  l.loop->RunOnce();  // it waits behind the first (max_running 1)
  EXPECT_EQ(l.loop->Load().waiting, 1);
  refused(12);  // published: one waiting
  l.loop->RunUntilIdle();
  EXPECT_EQ(first->finish().reason, FinishReason::kLength);
  EXPECT_EQ(second->finish().reason, FinishReason::kLength);
  EXPECT_EQ(l.loop->scheduler().counters().rejected, 3);
  auto [c, third] = l.Submit(2, 2);  // room again
  l.loop->RunUntilIdle();
  EXPECT_EQ(third->finish().reason, FinishReason::kLength);
}

TEST(ServingLoopTest, StopCancelsAndDrainFinishes) {
  {
    // The running request's sink holds the engine thread at its third
    // token until Stop has begun, so the request is still running when the
    // loop stops, however fast or slow the machine.
    Loop l(LoopOpts(64, 1));
    auto running = std::make_shared<GatedSink>(3);
    RequestSpec spec;
    spec.tenant = "t";
    spec.prompt = TaggedPrompt(0, 4);
    spec.sampling.temperature = 0;
    spec.stop.max_tokens = 1000;
    spec.sink = running;
    ASSERT_TRUE(l.loop->Submit(std::move(spec)).ok());
    auto [b, queued] = l.Submit(1, 5);
    l.loop->Start();
    ASSERT_TRUE(running->WaitHeld(absl::Seconds(30)))
        << "the engine thread never reached the third token";
    std::thread stopper([&] { l.loop->Stop(StopMode::kCancel); });
    // Stop has begun once Submit refuses with UNAVAILABLE.
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    absl::StatusCode code = absl::StatusCode::kOk;
    while (code != absl::StatusCode::kUnavailable && absl::Now() < deadline) {
      RequestSpec probe;
      probe.tenant = "t";
      probe.prompt = {1};
      probe.sink = std::make_shared<CollectingSink>();
      code = l.loop->Submit(std::move(probe)).status().code();
    }
    running->Release();
    stopper.join();
    ASSERT_EQ(code, absl::StatusCode::kUnavailable)
        << "Submit never saw the loop stopping";
    EXPECT_LT(running->tokens().size(), 1000u);
    ASSERT_TRUE(running->finished());
    ASSERT_TRUE(queued->finished());
    for (const FinishInfo& finish : {running->finish(), queued->finish()}) {
      EXPECT_EQ(finish.reason, FinishReason::kCancelled);
      EXPECT_EQ(finish.status.code(), absl::StatusCode::kUnavailable);
    }
  }
  {
    Loop l(LoopOpts(64, 1));
    auto [a, first] = l.Submit(0, 30);
    auto [b, second] = l.Submit(1, 30);
    l.loop->Start();
    l.loop->Stop(StopMode::kDrain);
    EXPECT_EQ(first->finish().reason, FinishReason::kLength);
    EXPECT_EQ(second->finish().reason, FinishReason::kLength);
    EXPECT_EQ(second->tokens().size(), 30u);
  }
}

TEST(OfflineRunnerTest, RunsPromptsTogetherWithTheOutputsOfEachAlone) {
  auto tokenizer = ByteTokenizer(2048);
  std::vector<OfflineRequest> requests;
  for (int32_t tag = 0; tag < 5; ++tag) {
    OfflineRequest r;
    r.prompt = TaggedPrompt(tag, 3 + tag);
    r.sampling.temperature = 0;
    r.stop.max_tokens = 10 + tag;
    requests.push_back(r);
  }
  EXPECT_EQ(KvBlocksToRunTogether(requests, 4), 3 + 4 + 4 + 5 + 5);
  std::vector<std::vector<int32_t>> alone;
  for (const OfflineRequest& r : requests) {
    auto result = RunOffline(std::make_unique<FakeEngine>(Engine()), *tokenizer,
                             {r}, OfflineOptions());
    ASSERT_TRUE(result.ok()) << result.status();
    alone.push_back((*result)[0].tokens);
  }
  // A pool of 6 blocks: room for one request and a half.
  OfflineStats stats;
  auto together = RunOffline(std::make_unique<FakeEngine>(Engine(6)), *tokenizer,
                             requests, OfflineOptions{64, 256},
                             &stats);
  ASSERT_TRUE(together.ok()) << together.status();
  ASSERT_EQ(together->size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ((*together)[i].tokens, alone[i]);
    EXPECT_EQ((*together)[i].finish.reason, FinishReason::kLength);
  }
  EXPECT_GT(stats.preemptions, 0);
  EXPECT_EQ(stats.generated_tokens, 10 + 11 + 12 + 13 + 14);
  EXPECT_EQ(stats.prompt_tokens, 3 + 4 + 5 + 6 + 7);

  requests[2].stop.max_tokens = 100000;
  auto refused = RunOffline(std::make_unique<FakeEngine>(Engine(6)), *tokenizer,
                            requests, OfflineOptions());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(refused.status().message(), "request 2: "));
}

}  // namespace
}  // namespace paceline::scheduler::testing
