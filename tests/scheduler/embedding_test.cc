// Embedding requests (RequestSpec::embed) through the serving loop over
// the real CPU engine: the oracle qwen3 F32 file given a pooling type
// (`qwen3.pooling_type`, last and mean), prompts chunked over several steps
// beside a generation request, each finishing with llama.cpp's embedding
// (tests/engine/cpu/data/embedding_reference.json) and its blocks freed;
// mean pooling neither uses nor fills the prefix cache; a generation model
// refuses them.

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/cpu/cpu_engine.h"
#include "engine/model_loader.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "scheduler/serving_loop.h"
#include "scheduler/token_sink.h"
#include "tests/testing/build_paths.h"
#include "tests/testing/files.h"
#include "tests/testing/gguf_edit.h"
#include "tests/testing/stories260k_oracle.h"

namespace paceline::scheduler {
namespace {

nlohmann::json Reference() {
  std::ifstream in(::paceline::testing::SourcePath(
      "tests/engine/cpu/data/embedding_reference.json"));
  return nlohmann::json::parse(in);
}

// The oracle qwen3 file with `qwen3.pooling_type` = pooling, loaded.
absl::StatusOr<engine::LoadedModel> EmbeddingModel(uint32_t pooling) {
  const std::string bytes = ::paceline::testing::ReadFile(
      ::paceline::testing::SharedPath("oracle/models/qwen3-base-f32.gguf"));
  if (bytes.empty()) return absl::NotFoundError("no oracle qwen3 file");
  absl::StatusOr<std::string> edited = ::paceline::testing::AddUint32Metadata(
      bytes, "qwen3.pooling_type", pooling);
  if (!edited.ok()) return edited.status();
  return engine::OpenModel(::paceline::testing::WriteFile(
      "qwen3-pooling-" + std::to_string(pooling) + ".gguf", *edited));
}

std::unique_ptr<ServingLoop> MakeLoop(const engine::LoadedModel& model) {
  engine::cpu::CpuEngineOptions options;
  options.num_blocks = 32;
  options.max_tokens_per_step = 32;  // the 100-token prompt takes 4 steps
  options.num_threads = 2;
  auto engine = engine::cpu::CpuEngine::Create(model.weights, options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  ServingLoopOptions loop_options;
  TenantConfig tenant;
  tenant.name = "t";
  loop_options.scheduler.tenants = {tenant};
  auto loop = ServingLoop::Create(*std::move(engine), model.tokenizer.get(),
                                  loop_options);
  EXPECT_TRUE(loop.ok()) << loop.status();
  return loop.ok() ? *std::move(loop) : nullptr;
}

RequestSpec EmbedSpec(std::vector<int32_t> prompt) {
  RequestSpec spec;
  spec.tenant = "t";
  spec.prompt = std::move(prompt);
  spec.stop.max_tokens = 1;
  spec.embed = true;
  spec.sink = std::make_shared<CollectingSink>();
  return spec;
}

double Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double dot = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) dot += a[i] * b[i];
  return dot;
}

void ExpectLikeLlamaCpp(uint32_t pooling, const std::string& name,
                        int repeats) {
  absl::StatusOr<engine::LoadedModel> model = EmbeddingModel(pooling);
  if (!model.ok()) GTEST_SKIP() << model.status();
  std::unique_ptr<ServingLoop> loop = MakeLoop(*model);
  ASSERT_NE(loop, nullptr);
  const nlohmann::json ref = Reference();
  for (int round = 0; round < repeats; ++round) {
    // A generation request runs beside the embeddings.
    RequestSpec generate = EmbedSpec(ref["prompts"][0]);
    generate.embed = false;
    generate.stop.max_tokens = 8;
    generate.stop.ignore_eos = true;
    auto generated = std::static_pointer_cast<CollectingSink>(generate.sink);
    ASSERT_TRUE(loop->Submit(std::move(generate)).ok());
    std::vector<std::shared_ptr<CollectingSink>> sinks;
    for (const auto& prompt : ref["prompts"]) {
      RequestSpec spec = EmbedSpec(prompt.get<std::vector<int32_t>>());
      sinks.push_back(std::static_pointer_cast<CollectingSink>(spec.sink));
      ASSERT_TRUE(loop->Submit(std::move(spec)).ok());
    }
    loop->RunUntilIdle();
    for (size_t p = 0; p < sinks.size(); ++p) {
      ASSERT_TRUE(sinks[p]->finished());
      const FinishInfo info = sinks[p]->finish();
      EXPECT_TRUE(info.status.ok()) << info.status;
      EXPECT_EQ(info.reason, FinishReason::kStop);
      EXPECT_EQ(info.usage.prompt_tokens, ref["prompts"][p].size());
      EXPECT_EQ(info.usage.completion_tokens, 0);
      EXPECT_TRUE(sinks[p]->tokens().empty());
      const auto want = ref[name][p].get<std::vector<float>>();
      ASSERT_EQ(info.embedding.size(), want.size());
      EXPECT_GT(Cosine(info.embedding, want), 0.9999)
          << name << " prompt " << p << " round " << round;
    }
    ASSERT_TRUE(generated->finished());
    EXPECT_EQ(generated->tokens().size(), 8u);
    EXPECT_TRUE(generated->finish().embedding.empty());
    EXPECT_EQ(loop->Load().kv.used_blocks, 0);
  }
}

TEST(EmbeddingRequestTest, LastPoolingGivesLlamaCppsEmbeddings) {
  ExpectLikeLlamaCpp(3, "last", 2);
}

// Twice: the second round must compute the whole prompts again (their
// blocks never entered the prefix cache).
TEST(EmbeddingRequestTest, MeanPoolingGivesLlamaCppsEmbeddingsEveryTime) {
  ExpectLikeLlamaCpp(1, "mean", 2);
}

TEST(EmbeddingRequestTest, AGenerationModelRefusesThem) {
  auto model = engine::OpenModel(::paceline::testing::kStories260KPath);
  if (!model.ok()) GTEST_SKIP() << model.status();
  std::unique_ptr<ServingLoop> loop = MakeLoop(*model);
  ASSERT_NE(loop, nullptr);
  const absl::StatusOr<RequestId> id = loop->Submit(EmbedSpec({1, 2, 3}));
  EXPECT_EQ(id.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(id.status().message().find("no pooling type"), std::string::npos);
}

TEST(EmbeddingRequestTest, EmbeddingRequestsAreAloneWithMaxTokensOne) {
  absl::StatusOr<engine::LoadedModel> model = EmbeddingModel(3);
  if (!model.ok()) GTEST_SKIP() << model.status();
  std::unique_ptr<ServingLoop> loop = MakeLoop(*model);
  ASSERT_NE(loop, nullptr);
  RequestSpec long_one = EmbedSpec({1, 2, 3});
  long_one.stop.max_tokens = 4;
  EXPECT_EQ(loop->Submit(std::move(long_one)).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<RequestSpec> group;
  group.push_back(EmbedSpec({1, 2, 3}));
  group.push_back(EmbedSpec({1, 2, 3}));
  EXPECT_EQ(loop->SubmitGroup(std::move(group)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace paceline::scheduler
