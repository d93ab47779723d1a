// A hybrid linear-attention model (Gated DeltaNet layers beside attention
// layers) served through the scheduler on the CPU engine: oracle-next's
// qwen35 (F32, Q8_0), qwen35moe (Q8_0) and qwen3next (F32) files
// (../shared/oracle-next: 4 layers, random weights, the stories260K
// vocabulary; skipped without them). Every running request
// holds a recurrent-state slot (kvpager/kv_pager.h), so: two requests
// batched together give the greedy tokens each gives alone; a group of
// n = 2 forks the parent's state and both members give the request's
// tokens; requests preempted in a pool too small for them together finish
// with the tokens they get alone (the recompute from position 0 rebuilds
// the state); greedy output with n-gram drafts equals greedy output
// without (a rejected draft's state is rolled back); after each run no
// slot or block is left held; and MakeBackend sizes the slots from
// max_running.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/model_loader.h"
#include "gtest/gtest.h"
#include "kvpager/pager_stats.h"
#include "scheduler/serving_loop.h"
#include "scheduler/token_sink.h"
#include "tests/testing/oracle_logits.h"

namespace paceline::scheduler {
namespace {

constexpr int32_t kBlockSize = 16;

struct Outcome {
  std::vector<std::vector<int32_t>> tokens;  // by request, groups flattened
  // Each sampled token's result (logprobs where the spec asked for them).
  std::vector<std::vector<engine::SampleResult>> samples;
  std::vector<FinishInfo> finish;
  SchedulerCounters counters;
  kvpager::PagerStats kv;
  absl::Status consistency;
};

struct RunSetup {
  int32_t num_blocks = 64;
  int32_t slots = 8;
  int32_t max_batched_tokens = 64;
  int32_t max_running = 8;
  int32_t speculation_max_step_tokens = 4;  // SchedulerOptions'
  // SchedulerOptions'; off unless a test is about the prefix cache (the
  // snapshots' copies and slots would blur the counts of the others).
  int32_t state_snapshots = 0;
};

class HybridCpuTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::filesystem::path file =
        ::paceline::testing::OracleNextDir() / "models" / GetParam();
    if (!std::filesystem::exists(file)) GTEST_SKIP() << "no " << file;
    absl::StatusOr<engine::LoadedModel> model =
        engine::OpenModel(file.string());
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    ASSERT_GT(model_.weights->config().NumRecurrentLayers(), 0);
  }

  std::unique_ptr<engine::cpu::CpuEngine> MakeEngine(const RunSetup& setup) {
    engine::cpu::CpuEngineOptions options;
    options.block_size = kBlockSize;
    options.num_blocks = setup.num_blocks;
    options.max_tokens_per_step = 64;
    options.num_threads = 1;
    options.num_state_slots = setup.slots;
    auto engine = engine::cpu::CpuEngine::Create(model_.weights, options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    if (!engine.ok()) return nullptr;
    EXPECT_EQ((*engine)->num_state_slots(), setup.slots);
    return *std::move(engine);
  }

  std::vector<int32_t> Prompt(const std::string& text) const {
    return model_.tokenizer->Encode(text, /*add_bos=*/true);
  }

  static RequestSpec Spec(std::vector<int32_t> prompt, int32_t max_tokens,
                          int32_t drafts = 0) {
    RequestSpec spec;
    spec.tenant = "t";
    spec.prompt = std::move(prompt);
    spec.sampling.temperature = 0;
    spec.stop.max_tokens = max_tokens;
    spec.stop.ignore_eos = true;
    spec.max_draft_tokens = drafts;
    spec.sink = std::make_shared<CollectingSink>();
    return spec;
  }

  // Runs `groups` (each submitted with SubmitGroup, in order) to the end
  // through a serving loop.
  Outcome Run(std::vector<std::vector<RequestSpec>> groups,
              const RunSetup& setup) {
    ServingLoopOptions options;
    options.scheduler.max_batched_tokens = setup.max_batched_tokens;
    options.scheduler.max_running = setup.max_running;
    options.scheduler.speculation_max_step_tokens =
        setup.speculation_max_step_tokens;
    options.scheduler.state_snapshots = setup.state_snapshots;
    TenantConfig tenant;
    tenant.name = "t";
    options.scheduler.tenants = {tenant};
    auto loop =
        ServingLoop::Create(MakeEngine(setup), model_.tokenizer.get(), options);
    EXPECT_TRUE(loop.ok()) << loop.status();
    Outcome out;
    if (!loop.ok()) return out;
    std::vector<std::shared_ptr<CollectingSink>> sinks;
    for (std::vector<RequestSpec>& group : groups) {
      for (const RequestSpec& spec : group) {
        sinks.push_back(std::static_pointer_cast<CollectingSink>(spec.sink));
      }
      const auto ids = (*loop)->SubmitGroup(std::move(group));
      EXPECT_TRUE(ids.ok()) << ids.status();
    }
    (*loop)->RunUntilIdle();
    for (const auto& sink : sinks) {
      EXPECT_TRUE(sink->finished());
      out.finish.push_back(sink->finished() ? sink->finish() : FinishInfo());
      EXPECT_EQ(out.finish.back().reason, FinishReason::kLength)
          << out.finish.back().status;
      out.tokens.push_back(sink->tokens());
      out.samples.push_back(sink->samples());
    }
    const Scheduler& scheduler = (*loop)->scheduler();
    out.counters = scheduler.counters();
    out.kv = scheduler.pager().Stats();
    out.consistency = scheduler.pager().CheckConsistency();
    // No slot and no block left held.
    EXPECT_TRUE(out.consistency.ok()) << out.consistency;
    EXPECT_EQ(out.kv.total_state_slots, setup.slots);
    // Slots left held keep cached prefixes' state (snapshots).
    EXPECT_EQ(out.kv.free_state_slots + out.kv.state_snapshots,
              out.kv.total_state_slots);
    EXPECT_EQ(out.kv.used_blocks, 0);
    return out;
  }

  static std::vector<std::vector<RequestSpec>> Singles(
      std::vector<RequestSpec> specs) {
    std::vector<std::vector<RequestSpec>> groups;
    for (RequestSpec& spec : specs) {
      groups.emplace_back();
      groups.back().push_back(std::move(spec));
    }
    return groups;
  }

  // Each request alone, in a pool that holds it.
  std::vector<std::vector<int32_t>> Alone(
      const std::vector<std::pair<std::vector<int32_t>, int32_t>>& requests,
      int32_t drafts = 0) {
    std::vector<std::vector<int32_t>> tokens;
    for (const auto& [prompt, max_tokens] : requests) {
      const Outcome out =
          Run(Singles({Spec(prompt, max_tokens, drafts)}), RunSetup());
      tokens.push_back(out.tokens.empty() ? std::vector<int32_t>{}
                                          : out.tokens[0]);
    }
    return tokens;
  }

  std::vector<std::pair<std::vector<int32_t>, int32_t>> FourRequests() const {
    return {{Prompt("Once upon a time"), 40},
            {Prompt("Lily and Tom were best friends"), 30},
            {Prompt("The little dog"), 36},
            {Prompt("One day, a big bear came to the park"), 24}};
  }

  static std::vector<RequestSpec> Specs(
      const std::vector<std::pair<std::vector<int32_t>, int32_t>>& requests,
      int32_t drafts = 0) {
    std::vector<RequestSpec> specs;
    for (const auto& [prompt, max_tokens] : requests) {
      specs.push_back(Spec(prompt, max_tokens, drafts));
    }
    return specs;
  }

  engine::LoadedModel model_;
};

// A chat's second turn: the first turn's prompt and answer, then a new
// message. The second request starts from the first's state snapshot at
// its last block boundary (a prefix-cache hit), and its logits are those
// of a cold run, bit for bit: every token's logprob and top 5.
TEST_P(HybridCpuTest, ASecondTurnReusesTheFirstsStateWithTheSameLogits) {
  RunSetup setup;
  setup.max_running = 1;
  setup.state_snapshots = -1;
  const std::vector<int32_t> first =
      Prompt("Once upon a time, there was a little girl named Lily.");
  const auto answer = Alone({{first, 24}});
  std::vector<int32_t> second = first;
  second.insert(second.end(), answer[0].begin(), answer[0].end());
  for (int32_t t : Prompt(" She liked to play outside.")) second.push_back(t);
  const auto with_logprobs = [](std::vector<int32_t> prompt, int32_t n) {
    RequestSpec spec = Spec(std::move(prompt), n);
    spec.sampling.logprobs = true;
    spec.sampling.top_logprobs = 5;
    return spec;
  };
  std::vector<RequestSpec> cold_spec;
  cold_spec.push_back(with_logprobs(second, 12));
  const Outcome cold = Run(Singles(std::move(cold_spec)), setup);
  std::vector<RequestSpec> specs;
  specs.push_back(Spec(first, 24));
  specs.push_back(with_logprobs(second, 12));
  const Outcome chat = Run(Singles(std::move(specs)), setup);
  ASSERT_EQ(chat.tokens.size(), 2u);
  EXPECT_EQ(chat.tokens[0], answer[0]);
  // Where the first turn's generation last crossed a block boundary.
  const int32_t computed =
      static_cast<int32_t>(first.size() + answer[0].size()) - 1;
  EXPECT_EQ(chat.finish[1].usage.cached_prompt_tokens,
            computed / kBlockSize * kBlockSize);
  EXPECT_GT(chat.finish[1].usage.cached_prompt_tokens, 0);
  EXPECT_EQ(chat.kv.state_snapshot_hits, 1);
  EXPECT_EQ(cold.finish[0].usage.cached_prompt_tokens, 0);
  EXPECT_EQ(chat.tokens[1], cold.tokens[0]);
  ASSERT_EQ(chat.samples[1].size(), cold.samples[0].size());
  for (size_t i = 0; i < cold.samples[0].size(); ++i) {
    const engine::SampleResult& a = chat.samples[1][i];
    const engine::SampleResult& b = cold.samples[0][i];
    EXPECT_EQ(a.logprob, b.logprob) << i;
    ASSERT_EQ(a.top_logprobs.size(), 5u);
    ASSERT_EQ(b.top_logprobs.size(), 5u);
    for (size_t j = 0; j < 5; ++j) {
      EXPECT_EQ(a.top_logprobs[j].token, b.top_logprobs[j].token) << i;
      EXPECT_EQ(a.top_logprobs[j].logprob, b.top_logprobs[j].logprob) << i;
    }
  }
}

TEST_P(HybridCpuTest, TwoBatchedTogetherGiveWhatEachGivesAlone) {
  const std::vector<std::pair<std::vector<int32_t>, int32_t>> requests = {
      {Prompt("Once upon a time"), 32},
      {Prompt("The little dog went to the park"), 32}};
  const auto alone = Alone(requests);
  const Outcome together = Run(Singles(Specs(requests)), RunSetup());
  EXPECT_EQ(together.tokens, alone);
  // Both ran in every step: one prompt step, then one decode step per
  // token after the first.
  EXPECT_EQ(together.counters.steps, 32);
}

TEST_P(HybridCpuTest, AForkedGroupGivesTheSameTokensOnBoth) {
  // A prompt longer than a block: the fork shares its first block and
  // copies the parent's state after the prompt but its last token.
  const std::vector<int32_t> prompt = Prompt(
      "Once upon a time, there was a little girl named Lily. She "
      "liked to play");
  ASSERT_GT(prompt.size(), size_t{kBlockSize});
  const auto alone = Alone({{prompt, 30}});
  std::vector<std::vector<RequestSpec>> groups(1);
  groups[0].push_back(Spec(prompt, 30));
  groups[0].push_back(Spec(prompt, 30));
  const Outcome out = Run(std::move(groups), RunSetup());
  ASSERT_EQ(out.tokens.size(), 2u);
  EXPECT_EQ(out.tokens[0], alone[0]);
  EXPECT_EQ(out.tokens[1], alone[0]);
  EXPECT_EQ(out.kv.state_copies, 1);  // the fork's
}

TEST_P(HybridCpuTest, PreemptedRequestsFinishWithTheirTokensAlone) {
  // The four need 4 + 3 + 3 + 3 = 13 blocks together; 5 hold the longest
  // alone. 8-token steps chunk the prompts.
  const auto requests = FourRequests();
  const auto alone = Alone(requests);
  RunSetup setup;
  setup.num_blocks = 5;
  setup.max_batched_tokens = 8;
  const Outcome together = Run(Singles(Specs(requests)), setup);
  EXPECT_GT(together.counters.preemptions, 0);
  EXPECT_EQ(together.tokens, alone);
}

TEST_P(HybridCpuTest, GreedyWithDraftsEqualsGreedyWithout) {
  // Long enough for the random model's output to repeat a little: some
  // n-gram drafts are accepted, most are rejected and rolled back.
  const std::vector<std::pair<std::vector<int32_t>, int32_t>> requests = {
      {Prompt("Once upon a time"), 300},
      {Prompt("the cat the cat the cat the cat the cat"), 300},
      {Prompt("The little dog"), 300}};
  const auto plain = Alone(requests, 0);
  int64_t drafted = 0, accepted = 0;
  const auto count = [&](const Outcome& out) {
    for (const FinishInfo& f : out.finish) {
      drafted += f.usage.draft_tokens;
      accepted += f.usage.accepted_draft_tokens;
    }
  };
  // Alone (each step small enough to draft), then together in steps that
  // let all three draft.
  for (size_t i = 0; i < requests.size(); ++i) {
    const Outcome out = Run(
        Singles({Spec(requests[i].first, requests[i].second, 4)}), RunSetup());
    ASSERT_EQ(out.tokens.size(), 1u);
    EXPECT_EQ(out.tokens[0], plain[i]) << "request " << i;
    count(out);
  }
  RunSetup setup;
  setup.num_blocks = 96;
  setup.speculation_max_step_tokens = 32;
  const Outcome together = Run(Singles(Specs(requests, 4)), setup);
  EXPECT_EQ(together.tokens, plain);
  count(together);
  EXPECT_GT(accepted, 0);
  EXPECT_GT(drafted, accepted);  // rejected drafts, their state rolled back
  // A snapshot per drafting step: state copies with no fork.
  EXPECT_GT(together.kv.state_copies, 0);
  RecordProperty("drafted", std::to_string(drafted));
  RecordProperty("accepted", std::to_string(accepted));
}

TEST_P(HybridCpuTest, MakeBackendSizesTheSlotsFromMaxRunning) {
  engine::BackendOptions backend_options;
  backend_options.backend = "cpu";
  backend_options.threads = 1;
  backend_options.kv_blocks = 64;
  backend_options.max_running = 3;
  auto backend = engine::MakeBackend(backend_options, model_.weights);
  ASSERT_TRUE(backend.ok()) << backend.status();
  const int32_t slots = 3 + engine::kSpeculationStateSlots;
  EXPECT_EQ(engine::StateSlots(backend_options), slots);
  EXPECT_EQ(backend->engine->num_state_slots(), slots);
  bool logged = false;
  for (const std::string& line : backend->log_lines) {
    logged = logged || line.rfind("recurrent state: 7 slots of ", 0) == 0;
  }
  EXPECT_TRUE(logged);
  // K/V only in the attention layers (F16: 2 bytes an element).
  const engine::ModelConfig& c = model_.weights->config();
  EXPECT_EQ(backend->plan.kv_bytes_per_token,
            static_cast<uint64_t>(2 * (c.n_layers - c.NumRecurrentLayers()) *
                                  c.n_kv_heads * c.head_dim * 2));
  // The scheduler's pager holds as many, and no more requests run.
  ServingLoopOptions options;
  options.scheduler.max_running = 256;
  TenantConfig tenant;
  tenant.name = "t";
  options.scheduler.tenants = {tenant};
  auto loop = ServingLoop::Create(std::move(backend->engine),
                                  model_.tokenizer.get(), options);
  ASSERT_TRUE(loop.ok()) << loop.status();
  EXPECT_EQ((*loop)->scheduler().max_running(), slots);
  EXPECT_EQ((*loop)->scheduler().pager().num_state_slots(), slots);
  RequestSpec spec = Spec(Prompt("Once upon a time"), 8);
  auto sink = std::static_pointer_cast<CollectingSink>(spec.sink);
  ASSERT_TRUE((*loop)->Submit(std::move(spec)).ok());
  (*loop)->RunUntilIdle();
  ASSERT_TRUE(sink->finished());
  EXPECT_EQ(sink->tokens(), Alone({{Prompt("Once upon a time"), 8}})[0]);
}

INSTANTIATE_TEST_SUITE_P(Hybrid, HybridCpuTest,
                         ::testing::Values("qwen35-base-f32.gguf",
                                           "qwen35-base-q8_0.gguf",
                                           "qwen35moe-base-q8_0.gguf",
                                           "qwen3next-base-f32.gguf"));

}  // namespace
}  // namespace paceline::scheduler
