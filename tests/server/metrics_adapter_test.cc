// MetricsAdapter: the scheduler's metrics interface driven by a real
// serving loop over the fake engine (exact counts), the finish-reason
// mapping, and a StreamBuffer's delivery events, all read back from
// metrics::Metrics' text exposition.

#include "server/metrics_adapter.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "metrics/metrics.h"
#include "scheduler/serving_loop.h"
#include "server/delivery/pacer.h"
#include "server/delivery/stream_buffer.h"
#include "tests/testing/exposition.h"
#include "tests/testing/scheduler_test_util.h"

namespace paceline::server {
namespace {

using ::paceline::scheduler::testing::ByteTokenizer;
using ::paceline::scheduler::testing::kEos;
using ::paceline::scheduler::testing::kFirstTag;
using ::paceline::scheduler::testing::TaggedPrompt;
using ::paceline::testing::Exposition;
using ::paceline::testing::FakeEngine;
using ::paceline::testing::FakeEngineOptions;
using ::paceline::testing::ParseExposition;

constexpr int32_t kBlocks = 64;

metrics::MetricsOptions Options() {
  metrics::MetricsOptions o;
  o.model = "m";
  o.tenants = {"a", "b"};
  return o;
}

std::string Series(const std::string& name, const std::string& labels = "") {
  return labels.empty() ? absl::StrCat(name, "{model=\"m\"}")
                        : absl::StrCat(name, "{", labels, "}");
}

bool IsEos(int32_t token) { return token == kEos; }

TEST(MetricsAdapterTest, AServingLoopRunIsCountedExactly) {
  metrics::Metrics metrics(Options());
  scheduler::ManualClock clock;
  MetricsAdapter adapter(&metrics, IsEos, &clock);

  FakeEngineOptions engine;
  engine.n_vocab = 2048;
  engine.block_size = 4;
  engine.num_blocks = kBlocks;
  // Tag 0 ends with EOS once its sequence holds 8 tokens; the rest say 'x'.
  engine.script = [](absl::Span<const int32_t> context) {
    return context[0] == kFirstTag && context.size() >= 8 ? kEos : 'x';
  };
  scheduler::ServingLoopOptions options;
  options.scheduler.max_batched_tokens = 64;
  options.scheduler.max_running = 8;
  options.scheduler.tenants = {scheduler::testing::Tenant("a"),
                               scheduler::testing::Tenant("b")};
  options.clock = &clock;
  options.metrics = &adapter;
  std::unique_ptr<engine::Tokenizer> tokenizer = ByteTokenizer(engine.n_vocab);
  auto loop = scheduler::ServingLoop::Create(
      std::make_unique<FakeEngine>(engine), tokenizer.get(), options);
  ASSERT_TRUE(loop.ok()) << loop.status();
  adapter.AttachSources(loop->get(), nullptr);

  auto submit = [&](const std::string& tenant, int32_t tag, int32_t n,
                    int32_t max_tokens,
                    std::vector<int32_t> stop_ids = {}) {
    scheduler::RequestSpec spec;
    spec.tenant = tenant;
    spec.prompt = TaggedPrompt(tag, n);
    spec.sampling.temperature = 0;
    spec.stop.max_tokens = max_tokens;
    spec.stop.stop_token_ids = std::move(stop_ids);
    spec.sink = std::make_shared<scheduler::CollectingSink>();
    return (*loop)->Submit(std::move(spec));
  };
  ASSERT_TRUE(submit("a", 0, 5, 10).ok());         // x x x EOS: eos, 4 tokens
  ASSERT_TRUE(submit("b", 1, 6, 3).ok());          // x x x: length, 3
  ASSERT_TRUE(submit("b", 2, 4, 10, {'x'}).ok());  // x: a stop id, 1
  const absl::StatusOr<scheduler::RequestId> refused = submit("z", 3, 4, 10);
  ASSERT_FALSE(refused.ok());
  const int64_t steps = (*loop)->RunUntilIdle();

  const Exposition e = ParseExposition(metrics.Serialize());
  EXPECT_EQ(e.Get(Series("paceline_requests_total",
                         "finish_reason=\"eos\",model=\"m\",tenant=\"a\"")),
            1);
  EXPECT_EQ(e.Get(Series("paceline_requests_total",
                         "finish_reason=\"length\",model=\"m\",tenant=\"b\"")),
            1);
  EXPECT_EQ(e.Get(Series("paceline_requests_total",
                         "finish_reason=\"stop\",model=\"m\",tenant=\"b\"")),
            1);
  EXPECT_EQ(e.Get(Series("paceline_generation_tokens_total",
                         "model=\"m\",tenant=\"a\"")),
            4);
  EXPECT_EQ(e.Get(Series("paceline_generation_tokens_total",
                         "model=\"m\",tenant=\"b\"")),
            4);
  EXPECT_EQ(
      e.Get(Series("paceline_prompt_tokens_total", "model=\"m\",tenant=\"a\"")),
      5);
  EXPECT_EQ(
      e.Get(Series("paceline_prompt_tokens_total", "model=\"m\",tenant=\"b\"")),
      10);
  EXPECT_EQ(e.Get(Series("paceline_time_to_first_token_seconds_count")), 3);
  // Inter-token gaps: 3 + 2 + 0.
  EXPECT_EQ(e.Get(Series("paceline_inter_token_latency_seconds_count")), 5);
  EXPECT_EQ(e.Get(Series("paceline_request_queue_time_seconds_count")), 3);
  EXPECT_EQ(e.Get(Series("paceline_e2e_request_latency_seconds_count")), 3);
  EXPECT_EQ(e.Get(Series("paceline_engine_step_duration_seconds_count")),
            steps);
  EXPECT_EQ(e.Get(Series(
                "paceline_rejections_total",
                absl::StrCat("model=\"m\",reason=\"",
                             metrics::RejectionReason(refused.status().code()),
                             "\",tenant=\"other\""))),
            1);
  // The scrape read the loop's load: idle, every block free or cached.
  EXPECT_EQ(e.Get(Series("paceline_num_requests_running")), 0);
  EXPECT_EQ(e.Get(Series("paceline_num_requests_waiting")), 0);
  EXPECT_EQ(
      e.Get(Series("paceline_requests_running", "model=\"m\",tenant=\"b\"")),
      0);
  EXPECT_EQ(e.Get(Series("paceline_kv_cache_capacity_blocks")), kBlocks);
  EXPECT_EQ(e.Get(Series("paceline_kv_cache_usage_ratio")), 0);
  EXPECT_EQ(
      e.Get(Series("paceline_kv_cache_blocks", "model=\"m\",state=\"used\"")),
      0);
  EXPECT_EQ(e.Get(Series("paceline_kv_cache_blocks",
                         "model=\"m\",state=\"cached\"")) +
                e.Get(Series("paceline_kv_cache_blocks",
                             "model=\"m\",state=\"free\"")),
            kBlocks);
  const kvpager::PagerStats kv = (*loop)->Load().kv;
  EXPECT_GT(kv.prefix_query_tokens, 0);
  EXPECT_EQ(e.Get(Series("paceline_prefix_cache_queried_tokens_total")),
            kv.prefix_query_tokens);
  EXPECT_EQ(e.Get(Series("paceline_prefix_cache_hit_tokens_total")),
            kv.prefix_hit_tokens);
}

TEST(MetricsAdapterTest, FinishReasons) {
  scheduler::FinishInfo info;
  info.reason = scheduler::FinishReason::kStop;
  info.stop_token = kEos;
  EXPECT_TRUE(MetricsAdapter::EndedByEos(info, IsEos));
  EXPECT_EQ(MetricsAdapter::FinishLabel(info, IsEos), "eos");
  EXPECT_EQ(MetricsAdapter::FinishLabel(info, nullptr), "stop");
  info.stop_token = 'q';  // a stop token id that is not end-of-sequence
  EXPECT_FALSE(MetricsAdapter::EndedByEos(info, IsEos));
  EXPECT_EQ(MetricsAdapter::FinishLabel(info, IsEos), "stop");
  info.stop_token = -1;
  info.stop_string = "The end";
  EXPECT_EQ(MetricsAdapter::FinishLabel(info, IsEos), "stop");
  // Only kStop is refined by the stop token.
  info.stop_string.clear();
  info.stop_token = kEos;
  info.reason = scheduler::FinishReason::kLength;
  EXPECT_FALSE(MetricsAdapter::EndedByEos(info, IsEos));
  EXPECT_EQ(MetricsAdapter::FinishLabel(info, IsEos), "length");
  info.reason = scheduler::FinishReason::kCancelled;
  EXPECT_EQ(MetricsAdapter::FinishLabel(info, IsEos), "cancelled");
  info.reason = scheduler::FinishReason::kError;
  EXPECT_EQ(MetricsAdapter::FinishLabel(info, IsEos), "error");
}

TEST(MetricsAdapterTest, StepsPreemptionsAndUnadmittedFinishes) {
  metrics::Metrics metrics(Options());
  scheduler::ManualClock clock;
  MetricsAdapter adapter(&metrics, IsEos, &clock);
  scheduler::StepStats step;
  step.schedule_time = absl::Milliseconds(1);
  step.forward_time = absl::Milliseconds(8);
  step.update_time = absl::Milliseconds(1);
  step.num_tokens = 20;
  step.num_running = 3;
  step.num_waiting = 2;
  adapter.OnStep(step);
  adapter.OnTenantLoad("a", 3, 2);
  adapter.OnPreempted("a");
  // Cancelled while queued: counted, but its prompt was never prefilled.
  scheduler::FinishInfo cancelled;
  cancelled.reason = scheduler::FinishReason::kCancelled;
  cancelled.usage.prompt_tokens = 9;
  cancelled.timings.arrival = clock.Now();
  cancelled.timings.finished = clock.Now() + absl::Seconds(1);
  adapter.OnFinished("a", cancelled);
  // Finished after speculative decoding: its drafts are counted.
  scheduler::FinishInfo drafted;
  drafted.reason = scheduler::FinishReason::kLength;
  drafted.usage.draft_tokens = 12;
  drafted.usage.accepted_draft_tokens = 5;
  adapter.OnFinished("a", drafted);
  adapter.OnFinished("a", drafted);
  const Exposition e = ParseExposition(metrics.Serialize());
  EXPECT_EQ(e.Get(Series("paceline_spec_decode_draft_tokens_total")), 24);
  EXPECT_EQ(e.Get(Series("paceline_spec_decode_accepted_tokens_total")), 10);
  EXPECT_DOUBLE_EQ(e.Get(Series("paceline_engine_busy_seconds_total")), 0.01);
  EXPECT_DOUBLE_EQ(e.Get(Series("paceline_engine_step_tokens_sum")), 20);
  EXPECT_EQ(e.Get(Series("paceline_num_requests_running")), 3);
  EXPECT_EQ(e.Get(Series("paceline_num_requests_waiting")), 2);
  EXPECT_EQ(
      e.Get(Series("paceline_requests_waiting", "model=\"m\",tenant=\"a\"")),
      2);
  EXPECT_EQ(e.Get(Series("paceline_preemptions_total")), 1);
  EXPECT_EQ(
      e.Get(Series("paceline_requests_total",
                   "finish_reason=\"cancelled\",model=\"m\",tenant=\"a\"")),
      1);
  EXPECT_EQ(
      e.Get(Series("paceline_prompt_tokens_total", "model=\"m\",tenant=\"a\"")),
      0);
}

// Completes every write at once; the buffer's clock advances per write.
class ImmediateWriter : public StreamWriter {
 public:
  explicit ImmediateWriter(scheduler::ManualClock* clock) : clock_(clock) {}
  void Bind(StreamBuffer* buffer) { buffer_ = buffer; }
  void Send(const Outgoing& out) override {
    if (out.kind == Outgoing::Kind::kFinished) return;
    clock_->Advance(absl::Milliseconds(5));
    buffer_->OnWriteDone(true);
  }

 private:
  scheduler::ManualClock* clock_;
  StreamBuffer* buffer_ = nullptr;
};

TEST(MetricsAdapterTest, StreamBufferReportsDeliveries) {
  metrics::Metrics metrics(Options());
  scheduler::ManualClock clock;
  MetricsAdapter adapter(&metrics, IsEos, &clock);
  Pacer pacer(&clock);
  adapter.AttachSources(nullptr, &pacer);
  ImmediateWriter writer(&clock);
  {
    auto buffer = std::make_shared<StreamBuffer>(DeliveryOptions{}, &writer,
                                                 &clock, &pacer, &adapter, "a");
    writer.Bind(buffer.get());
    EXPECT_EQ(ParseExposition(metrics.Serialize())
                  .Get(Series("paceline_pacer_streams")),
              1);
    scheduler::AcceptInfo accepted;
    accepted.id = 1;
    buffer->OnAccepted(accepted);  // the pacer writes it: done at +5 ms
    pacer.RunDue();
    const int32_t one[] = {'a'};
    const int32_t two[] = {'b', 'c'};
    scheduler::TokenDelta delta;
    delta.ids = one;
    buffer->OnTokens(delta);  // delivered at +10 ms: first, 10 ms
    pacer.RunDue();
    delta.ids = two;
    buffer->OnTokens(delta);  // delivered at +15 ms: 5 ms, then 0
    pacer.RunDue();
    scheduler::FinishInfo finish;
    finish.reason = scheduler::FinishReason::kLength;
    buffer->OnFinished(finish);
    pacer.RunDue();
    EXPECT_TRUE(buffer->done());
    buffer->Detach();  // the call ends: not counted twice
  }
  const Exposition e = ParseExposition(metrics.Serialize());
  EXPECT_EQ(e.Get(Series("paceline_pacer_streams")), 0);
  EXPECT_EQ(e.Get(Series("paceline_pacer_buffered_tokens")), 0);
  EXPECT_EQ(
      e.Get(Series("paceline_time_to_first_token_delivered_seconds_count")), 1);
  EXPECT_DOUBLE_EQ(
      e.Get(Series("paceline_time_to_first_token_delivered_seconds_sum")),
      0.01);
  EXPECT_EQ(
      e.Get(Series("paceline_inter_token_latency_delivered_seconds_count")), 2);
  EXPECT_DOUBLE_EQ(
      e.Get(Series("paceline_inter_token_latency_delivered_seconds_sum")),
      0.005);
}

}  // namespace
}  // namespace paceline::server
