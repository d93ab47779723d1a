// Frontend::Embed over a serving loop driven on the test thread (CPU
// engine, the oracle qwen3 F32 file given mean pooling): the vectors in
// input order as llama.cpp computes them, one live call until `done`;
// refusals returned without `done` (bad inputs, a tenant's prompt limit,
// the drain); an abort ends the call through `done` with its status.

#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/model_loader.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "scheduler/clock.h"
#include "scheduler/serving_loop.h"
#include "server/delivery/pacer.h"
#include "server/frontend/auth.h"
#include "server/frontend/frontend.h"
#include "tests/testing/build_paths.h"
#include "tests/testing/files.h"
#include "tests/testing/gguf_edit.h"

namespace paceline::server {
namespace {

// What `done` got, waited for across threads (it runs on the intake pool).
class Outcome {
 public:
  EmbeddingsDone Callback() {
    return [this](absl::StatusOr<EmbeddingsResult> r) {
      absl::MutexLock lock(&mu_);
      ++calls_;
      result_ = std::move(r);
    };
  }
  // Waits up to 10 s for `done`; returns what it got.
  absl::StatusOr<EmbeddingsResult> Wait() {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](int* calls) { return *calls > 0; }, &calls_),
                         absl::Seconds(10));
    if (!result_.has_value()) return absl::DeadlineExceededError("no done");
    return *result_;
  }
  int calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  absl::Mutex mu_;
  int calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<absl::StatusOr<EmbeddingsResult>> result_ ABSL_GUARDED_BY(mu_);
};

class EmbedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string bytes = ::paceline::testing::ReadFile(
        ::paceline::testing::SharedPath("oracle/models/qwen3-base-f32.gguf"));
    if (bytes.empty()) GTEST_SKIP() << "no oracle qwen3 file";
    absl::StatusOr<std::string> edited =
        ::paceline::testing::AddUint32Metadata(bytes, "qwen3.pooling_type", 1);
    ASSERT_TRUE(edited.ok()) << edited.status();
    auto model = engine::OpenModel(
        ::paceline::testing::WriteFile("qwen3-mean.gguf", *edited));
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    engine::cpu::CpuEngineOptions engine_options;
    engine_options.num_blocks = 32;
    engine_options.max_tokens_per_step = 64;
    engine_options.num_threads = 2;
    auto engine =
        engine::cpu::CpuEngine::Create(model_.weights, engine_options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    scheduler::ServingLoopOptions loop_options;
    scheduler::TenantConfig t, small;
    t.name = "t";
    small.name = "small";
    loop_options.scheduler.tenants = {t, small};
    auto loop = scheduler::ServingLoop::Create(
        *std::move(engine), model_.tokenizer.get(), loop_options);
    ASSERT_TRUE(loop.ok()) << loop.status();
    loop_ = *std::move(loop);
    auto auth = TenantAuthenticator::Create({});
    ASSERT_TRUE(auth.ok()) << auth.status();
    auth_.emplace(*std::move(auth));
    pacer_ = std::make_unique<Pacer>(scheduler::SystemClock::Get());
    FrontendOptions options;
    tenant_.name = "t";
    small_.name = "small";
    small_.max_prompt_tokens = 50;
    options.tenants = {tenant_, small_};
    frontend_ = std::make_unique<Frontend>(
        options, &*auth_, &model_.weights->config(), model_.tokenizer.get(),
        loop_.get(), pacer_.get(), scheduler::SystemClock::Get());
  }

  void TearDown() override {
    frontend_.reset();
    if (loop_ != nullptr) loop_->Stop();
  }

  engine::LoadedModel model_;
  std::unique_ptr<scheduler::ServingLoop> loop_;
  std::optional<TenantAuthenticator> auth_;
  std::unique_ptr<Pacer> pacer_;
  TenantPolicy tenant_, small_;
  std::unique_ptr<Frontend> frontend_;
};

TEST_F(EmbedTest, VectorsInInputOrderAsLlamaCppComputesThem) {
  std::ifstream in(::paceline::testing::SourcePath(
      "tests/engine/cpu/data/embedding_reference.json"));
  const nlohmann::json ref = nlohmann::json::parse(in);
  std::vector<std::vector<int32_t>> inputs;
  for (const auto& p : ref["prompts"]) {
    inputs.push_back(p.get<std::vector<int32_t>>());
  }
  Outcome outcome;
  ASSERT_TRUE(frontend_->Embed(tenant_, inputs, outcome.Callback()).ok());
  EXPECT_EQ(frontend_->live_calls(), 1);
  loop_->RunUntilIdle();
  absl::StatusOr<EmbeddingsResult> r = outcome.Wait();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->prompt_tokens, inputs[0].size() + inputs[1].size());
  ASSERT_EQ(r->vectors.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const auto want = ref["mean"][i].get<std::vector<float>>();
    ASSERT_EQ(r->vectors[i].size(), want.size());
    double dot = 0;
    for (size_t k = 0; k < want.size(); ++k) dot += r->vectors[i][k] * want[k];
    EXPECT_GT(dot, 0.9999) << "input " << i;
  }
  EXPECT_EQ(outcome.calls(), 1);
  EXPECT_EQ(frontend_->live_calls(), 0);
}

TEST_F(EmbedTest, RefusalsAreReturnedWithoutDone) {
  Outcome outcome;
  const auto code = [&](const TenantPolicy& tenant,
                        std::vector<std::vector<int32_t>> inputs) {
    return frontend_->Embed(tenant, std::move(inputs), outcome.Callback())
        .code();
  };
  EXPECT_EQ(code(tenant_, {}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(tenant_, {{1, 2}, {}}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(tenant_, {{1, 512}}), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(small_, {std::vector<int32_t>(51, 7)}),
            absl::StatusCode::kInvalidArgument);
  frontend_->BeginDrain();
  EXPECT_EQ(code(tenant_, {{1, 2}}), absl::StatusCode::kUnavailable);
  EXPECT_EQ(outcome.calls(), 0);
  EXPECT_EQ(frontend_->live_calls(), 0);
}

TEST_F(EmbedTest, AnAbortEndsTheCallWithItsStatus) {
  Outcome outcome;
  ASSERT_TRUE(
      frontend_->Embed(tenant_, {{1, 2, 3}, {4, 5}}, outcome.Callback()).ok());
  frontend_->AbortAll(absl::AbortedError("drain deadline"));
  absl::StatusOr<EmbeddingsResult> r = outcome.Wait();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted);
  loop_->RunUntilIdle();  // the cancels, which must not call `done` again
  EXPECT_EQ(outcome.calls(), 1);
  EXPECT_EQ(frontend_->live_calls(), 0);
}

}  // namespace
}  // namespace paceline::server
