// The engine thread's time per step with the server's own sinks: N
// sequences running, each delivered through a StreamBuffer (server/delivery)
// with two stop strings and a chat output parser (Hermes tool calls and
// <think> reasoning), over the fake engine, whose Forward is not timed.
// What is timed is what the engine thread does: Schedule, then sampling and
// Update, which hands each request's ids to its sink. The pacer's thread
// runs beside it (the delivery side), and every write completes at once.
// Issue 34 moved detokenizing, stop strings and chat parsing from the
// engine thread to delivery: this is the figure it must lower. Results go
// to bench/RESULTS.md.

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/types/span.h"
#include "benchmark/benchmark.h"
#include "chat/output_parser.h"
#include "engine/tokenizer/byte_level.h"
#include "scheduler/clock.h"
#include "scheduler/scheduler.h"
#include "scheduler/step.h"
#include "scheduler/step_sampler.h"
#include "server/delivery/pacer.h"
#include "server/delivery/stream_buffer.h"
#include "tests/testing/fake_engine.h"

namespace paceline::server {
namespace {

constexpr int32_t kVocab = 512;
constexpr int32_t kBlockSize = 16;
constexpr int32_t kPromptTokens = 32;
constexpr int32_t kMinGenerated = 128;  // requests generate 128..383 tokens

// A client that reads at once: every write completes inside Send.
class InstantWriter final : public StreamWriter {
 public:
  void Send(const Outgoing& out) override {
    if (out.kind == Outgoing::Kind::kFinished) return;
    if (auto buffer = buffer_.lock()) buffer->OnWriteDone(true);
  }
  void set_buffer(std::weak_ptr<StreamBuffer> buffer) { buffer_ = buffer; }

 private:
  std::weak_ptr<StreamBuffer> buffer_;
};

struct Stream {
  InstantWriter writer;
  std::shared_ptr<StreamBuffer> buffer;
};

void BM_EngineThreadStep(benchmark::State& state) {
  const int32_t n = static_cast<int32_t>(state.range(0));
  testing::FakeEngineOptions eo;
  eo.n_vocab = kVocab;
  eo.block_size = kBlockSize;
  eo.num_blocks = n * ((kPromptTokens + kMinGenerated + 256) / kBlockSize + 2);
  eo.max_tokens_per_step = 8192;
  eo.record = false;
  // Letters and spaces, and now and then a tag the chat parser must look
  // at ("<" opens a possible marker).
  eo.script = [](absl::Span<const int32_t> context) {
    const size_t i = context.size();
    if (i % 17 == 0) return static_cast<int32_t>('<');
    if (i % 5 == 0) return static_cast<int32_t>(' ');
    return static_cast<int32_t>('a' + i % 26);
  };
  testing::FakeEngine engine(eo);
  auto tokenizer = std::move(*engine::MakeByteLevelTokenizer(kVocab));
  scheduler::SchedulerOptions options;
  options.max_running = n;
  options.tenants = {scheduler::TenantConfig{"bench", 1.0, 0, 0, 0}};
  scheduler::Clock* clock = scheduler::SystemClock::Get();
  auto scheduler = std::move(
      *scheduler::Scheduler::Create(options, engine, tokenizer.get(), clock));
  scheduler::StepSampler sampler(engine, scheduler::EngineSampling::kAuto);
  Pacer pacer(clock);
  pacer.Start();
  const chat::ChatOutputFormat chat_format = chat::DetectChatOutputFormat(
      "{{ '<think>' }}{{ '</think>' }}{{ '<tool_call>' }}");

  std::vector<std::unique_ptr<Stream>> streams;
  scheduler::RequestId next_id = 1;
  auto submit = [&] {
    scheduler::RequestSpec spec;
    spec.tenant = "bench";
    spec.prompt.resize(kPromptTokens);
    for (int32_t i = 0; i < kPromptTokens; ++i) {
      spec.prompt[i] = static_cast<int32_t>((next_id * 7 + i) % 256);
    }
    spec.sampling.temperature = 0;
    spec.stop.max_tokens = kMinGenerated + static_cast<int32_t>(next_id % 256);
    DeliveryOptions delivery;
    delivery.tokenizer = tokenizer.get();
    delivery.stop.strings = {"never!", "zz top"};
    delivery.control_token_text = true;
    delivery.chat_output = chat_format;
    auto stream = std::make_unique<Stream>();
    stream->buffer = std::make_shared<StreamBuffer>(delivery, &stream->writer,
                                                    clock, &pacer);
    stream->writer.set_buffer(stream->buffer);
    spec.sink = stream->buffer;
    streams.push_back(std::move(stream));
    (void)scheduler->Submit(next_id++, std::move(spec));
  };
  std::vector<float> logits;
  auto forward = [&](const scheduler::StepPlan& plan) {
    logits.resize(static_cast<size_t>(plan.num_logit_rows) * kVocab);
    (void)engine.Forward(plan.batch, absl::MakeSpan(logits));
  };
  for (int32_t i = 0; i < n; ++i) submit();
  // Warm up past the first prefill and the first wave of finishes.
  for (int step = 0; step < kMinGenerated + 300; ++step) {
    const scheduler::StepPlan& plan = scheduler->Schedule();
    forward(plan);
    scheduler->Update(sampler.Sample(
        plan, scheduler::EngineOutput{absl::MakeConstSpan(logits), {}}));
    while (scheduler->num_running() + scheduler->num_waiting() < n) submit();
  }

  using Clock = std::chrono::steady_clock;
  double update_s = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    const scheduler::StepPlan& plan = scheduler->Schedule();
    const auto t1 = Clock::now();
    forward(plan);
    const auto t2 = Clock::now();
    scheduler->Update(sampler.Sample(
        plan, scheduler::EngineOutput{absl::MakeConstSpan(logits), {}}));
    const auto t3 = Clock::now();
    update_s += std::chrono::duration<double>(t3 - t2).count();
    state.SetIterationTime(
        std::chrono::duration<double>((t1 - t0) + (t3 - t2)).count());
    while (scheduler->num_running() + scheduler->num_waiting() < n) submit();
  }
  state.counters["update_us"] =
      update_s / static_cast<double>(state.iterations()) * 1e6;
  pacer.Stop();
  for (const std::unique_ptr<Stream>& s : streams) s->buffer->Detach();
}
BENCHMARK(BM_EngineThreadStep)
    ->ArgName("running")
    ->Arg(256)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace paceline::server

BENCHMARK_MAIN();
