// `paceline plan`, run as a real process: its table, its JSON, its exit
// codes (0 ok, 1 failure, 2 usage).

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "engine/model/memory_plan.h"
#include "engine/model/model_shapes.h"
#include "engine/model/weight_recipe.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "paceline/v1/model.pb.h"
#include "tests/testing/build_paths.h"
#include "tests/testing/files.h"
#include "tests/testing/paceline_cli.h"
#include "tests/testing/stories260k_oracle.h"
#include "tools/paceline/json_reports.pb.h"

namespace paceline::testing {
namespace {

using ::paceline::tools::PlanReport;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

CommandResult Plan(std::vector<std::string> args) {
  args.insert(args.begin(), "plan");
  return RunPaceline(args);
}

// `paceline plan args... --json`, parsed (an empty report on failure).
PlanReport PlanJson(std::vector<std::string> args) {
  args.push_back("--json");
  const CommandResult r = Plan(std::move(args));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, IsEmpty());
  PlanReport report;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(r.out, &report).ok())
      << r.out;
  return report;
}

TEST(PlanCommandTest, HelpPrintsUsage) {
  CommandResult r = Plan({"--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("usage: paceline plan --model MODEL"));
  EXPECT_THAT(r.out, HasSubstr("--memory"));
  EXPECT_THAT(r.err, IsEmpty());
}

TEST(PlanCommandTest, Llama7bF16Table) {
  CommandResult r =
      Plan({"--model", "dummy:llama-7b", "--context", "4096", "--sequences",
            "8", "--weights-dtype", "f16", "--memory", "24GiB"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, IsEmpty());
  EXPECT_THAT(r.out, HasSubstr("dummy:llama-7b (llama)"));
  EXPECT_THAT(r.out, HasSubstr("6,738,415,616 (6.74 billion)"));
  EXPECT_THAT(r.out, HasSubstr("13.48 GB"));
  EXPECT_THAT(r.out, HasSubstr("12.55 GiB"));
  EXPECT_THAT(r.out, HasSubstr("13,476,831,232 bytes"));
  EXPECT_THAT(r.out, HasSubstr("524,288 bytes"));
  EXPECT_THAT(r.out, HasSubstr("512.00 KiB"));
  EXPECT_THAT(r.out, HasSubstr("17,179,869,184 bytes"));  // KV: 16 GiB
  EXPECT_THAT(r.out, HasSubstr("30,656,700,416 bytes"));  // total
  EXPECT_THAT(r.out, HasSubstr("17,519,880,601 bytes"));  // × 1.3
  EXPECT_THAT(r.out, HasSubstr("25,769,803,776 bytes"));  // 24 GiB
  EXPECT_THAT(r.out, HasSubstr("no: room for 5 sequences of 4096 tokens"));
  EXPECT_THAT(r.out, HasSubstr("4,886,896,640 bytes"));  // over budget by
}

// Gemma 3's oracle file (../shared/oracle-next: 4 layers, window 32 on 3
// of them, 2 KV heads of 64, F16 cache): the sliding layers' windows are
// released, so a decoding sequence holds the global layer's every
// position (512 bytes per token) and 3 blocks of 16 positions per sliding
// layer (the window's 2 and one more when unaligned).
TEST(PlanCommandTest, SlidingWindowsCountWhatTheyKeep) {
  const std::string file = SharedPath("oracle-next/models/gemma3-base-f32.gguf");
  if (!std::filesystem::exists(file)) GTEST_SKIP() << "no " << file;
  CommandResult r = Plan({"--model", file, "--context", "4096", "--sequences",
                          "2", "--memory", "100MiB"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("4 of 1 layers; sliding layers keep their "
                               "last 32 positions"));
  const uint64_t per_sequence = 512 * 4096 + 3 * 512 * 48;
  EXPECT_EQ(per_sequence, 2'170'880u);
  EXPECT_THAT(r.out, HasSubstr("2,170,880 bytes"));  // per sequence
  EXPECT_THAT(r.out, HasSubstr("8,388,608 bytes"));  // full history
  EXPECT_THAT(r.out, HasSubstr("4,341,760 bytes"));  // 2 sequences
  const PlanReport report = PlanJson({"--model", file, "--context", "4096",
                                      "--sequences", "2"});
  EXPECT_EQ(report.memory_plan().kv_bytes(), 2 * per_sequence);
}

TEST(PlanCommandTest, Llama7bQ4_0Fits) {
  CommandResult r =
      Plan({"--model", "dummy:llama-7b", "--context", "4096", "--sequences",
            "8", "--weights-dtype", "q4_0", "--memory", "24GiB"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("weights (q4_0)"));
  EXPECT_THAT(r.out, HasSubstr("3.79 GB"));
  EXPECT_THAT(r.out, HasSubstr("3,790,358,784 bytes"));
  EXPECT_THAT(r.out, HasSubstr("yes: room for 10 sequences of 4096 tokens"));
  EXPECT_THAT(r.out, Not(HasSubstr("over budget")));
}

TEST(PlanCommandTest, Llama7bJson) {
  const CommandResult r =
      Plan({"--model", "dummy:llama-7b", "--context", "4096", "--sequences",
            "8", "--weights-dtype", "f16", "--memory", "24GiB", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // protobuf's JSON form: proto field names, 64-bit integers as strings.
  EXPECT_EQ(r.out.front(), '{');
  EXPECT_EQ(r.out.substr(r.out.size() - 2), "}\n");
  EXPECT_THAT(r.out, HasSubstr("\"model\": \"dummy:llama-7b\""));
  EXPECT_THAT(r.out, HasSubstr("\"weights_bytes\": \"13476831232\""));
  EXPECT_THAT(r.out, HasSubstr("\"fits\": false"));

  PlanReport report;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(r.out, &report).ok())
      << r.out;
  EXPECT_EQ(report.model(), "dummy:llama-7b");
  EXPECT_EQ(report.info().architecture(), "llama");
  EXPECT_EQ(report.info().layers(), 32);
  EXPECT_EQ(report.info().kv_heads(), 32);
  EXPECT_EQ(report.info().head_dim(), 128);
  EXPECT_EQ(report.info().parameters(), 6'738'415'616);
  const v1::MemoryPlan& plan = report.memory_plan();
  EXPECT_EQ(plan.weights_dtype(), "f16");
  EXPECT_EQ(plan.weights_bytes(), 13'476'831'232u);
  EXPECT_EQ(plan.kv_dtype(), "f16");
  EXPECT_EQ(plan.kv_bytes_per_token(), 524'288u);
  EXPECT_EQ(plan.context(), 4096);
  EXPECT_EQ(plan.sequences(), 8);
  EXPECT_EQ(plan.kv_bytes(), 17'179'869'184u);
  EXPECT_EQ(plan.total_bytes(), 30'656'700'416u);
  EXPECT_EQ(plan.rule_of_thumb_bytes(), 17'519'880'601u);
  EXPECT_EQ(plan.memory_bytes(), 25'769'803'776u);
  EXPECT_EQ(plan.sequences_that_fit(), 5);
  ASSERT_TRUE(report.has_fit());
  EXPECT_FALSE(report.fit().fits());
  EXPECT_EQ(report.fit().shortfall_bytes(), 4'886'896'640u);
  EXPECT_TRUE(report.fit().weights_fit());
  EXPECT_EQ(report.fit().weights_shortfall_bytes(), 0u);
}

TEST(PlanCommandTest, JsonWithoutBudgetHasNoFit) {
  const CommandResult r = Plan({"--model", "dummy:llama-3-8b", "--context=8192",
                                "--sequences=1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr("memory_bytes")));
  EXPECT_THAT(r.out, Not(HasSubstr("sequences_that_fit")));
  EXPECT_THAT(r.out, Not(HasSubstr("\"fit\"")));

  const PlanReport report = PlanJson(
      {"--model", "dummy:llama-3-8b", "--context=8192", "--sequences=1"});
  EXPECT_EQ(report.memory_plan().weights_dtype(), "f16");  // the default
  EXPECT_EQ(report.info().parameters(), 8'030'261'248);
  EXPECT_EQ(report.memory_plan().kv_bytes_per_token(), 131'072u);
  EXPECT_FALSE(report.memory_plan().has_memory_bytes());
  EXPECT_FALSE(report.memory_plan().has_sequences_that_fit());
  EXPECT_FALSE(report.has_fit());
}

TEST(PlanCommandTest, WeightsAloneDoNotFit) {
  std::vector<std::string> args = {
      "--model", "dummy:llama-7b", "--context", "4096", "--sequences",
      "1",       "--memory",       "8GB"};
  CommandResult table = Plan(args);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("no: the weights alone do not fit"));
  EXPECT_THAT(table.out, HasSubstr("5,476,831,232 bytes"));

  const PlanReport json = PlanJson(args);
  EXPECT_FALSE(json.fit().weights_fit());
  EXPECT_EQ(json.fit().weights_shortfall_bytes(), 5'476'831'232u);
  EXPECT_EQ(json.memory_plan().sequences_that_fit(), 0);
  EXPECT_TRUE(json.memory_plan().has_sequences_that_fit());
  EXPECT_FALSE(json.fit().fits());
}

TEST(PlanCommandTest, DtypeFromSpecAndFlags) {
  const PlanReport spec = PlanJson(
      {"--model", "dummy:llama-7b:q4_0", "--context", "1", "--sequences", "1"});
  EXPECT_EQ(spec.memory_plan().weights_dtype(), "q4_0");
  EXPECT_EQ(spec.memory_plan().weights_bytes(), 3'790'358'784u);

  const PlanReport flag =
      PlanJson({"--model", "dummy:llama-7b:q4_0", "--weights-dtype", "q8_0",
                "--kv-dtype", "f32", "--context", "1", "--sequences", "1"});
  EXPECT_EQ(flag.memory_plan().weights_dtype(), "q8_0");
  EXPECT_EQ(flag.memory_plan().weights_bytes(), 7'159'566'592u);
  EXPECT_EQ(flag.memory_plan().kv_dtype(), "f32");
  EXPECT_EQ(flag.memory_plan().kv_bytes_per_token(), 1'048'576u);
}

// K-quant types and llama.cpp's mixes, sized as the library's planner sizes
// them (engine/memory_plan_test.cc derives Q4_K_M's 4.89 bits per weight on
// this shape from its recipe; weight_recipe_test.cc checks the recipe
// against llama-quantize's files).
TEST(PlanCommandTest, KQuantTypesAndMixes) {
  absl::StatusOr<engine::ModelConfig> shape =
      engine::FindModelShape("llama-3-8b");
  ASSERT_TRUE(shape.ok());
  for (const char* dtype :
       {"q4_k_m", "q5_k_m", "q3_k_m", "q2_k", "q6_k", "q5_k", "q4_k", "q3_k"}) {
    SCOPED_TRACE(dtype);
    engine::MemoryPlanRequest request;
    request.weights_recipe = *engine::ParseWeightsDtype(dtype);
    request.context = 1;
    request.sequences = 1;
    const absl::StatusOr<engine::MemoryPlan> want =
        engine::PlanMemory(*shape, request);
    ASSERT_TRUE(want.ok()) << want.status();

    const PlanReport json =
        PlanJson({"--model", "dummy:llama-3-8b", "--weights-dtype", dtype,
                  "--context", "1", "--sequences", "1"});
    EXPECT_EQ(json.memory_plan().weights_dtype(), dtype);
    EXPECT_EQ(json.memory_plan().weights_bytes(), want->weights_bytes);

    const CommandResult table =
        Plan({"--model", absl::StrCat("dummy:llama-3-8b:", dtype), "--context",
              "1", "--sequences", "1"});
    ASSERT_EQ(table.exit_code, 0) << table.err;
    EXPECT_THAT(table.out, HasSubstr(absl::StrCat("weights (", dtype, ")")));
    EXPECT_THAT(table.out,
                ::testing::ContainsRegex(absl::StrFormat(
                    "bits per weight +%.3f\n", want->weights_bits_per_weight)));
  }
}

TEST(PlanCommandTest, MemorySuffixes) {
  for (auto [text, bytes] :
       std::vector<std::pair<std::string, uint64_t>>{{"16GB", 16'000'000'000},
                                                     {"512MiB", 512u << 20},
                                                     {"1e9", 1'000'000'000},
                                                     {"123456", 123456}}) {
    SCOPED_TRACE(text);
    const PlanReport r =
        PlanJson({"--model", "dummy:stories110m", "--context", "1024",
                  "--sequences", "1", "--memory", text});
    EXPECT_EQ(r.memory_plan().memory_bytes(), bytes);
  }
}

TEST(PlanCommandTest, UsageErrorsExitTwo) {
  struct Case {
    std::vector<std::string> args;
    const char* message;
  };
  const std::vector<Case> cases = {
      {{"--context", "1", "--sequences", "1"}, "--model"},
      {{"--model", "dummy:llama-7b", "--sequences", "1"}, "--context"},
      {{"--model", "dummy:llama-7b", "--context", "1"}, "--sequences"},
      {{"--model", "dummy:llama-7b", "--context", "4k", "--sequences", "1"},
       "--context"},
      {{"--model", "dummy:llama-7b", "--context", "0", "--sequences", "1"},
       "--context"},
      {{"--model", "dummy:llama-7b", "--context", "1", "--sequences", "-2"},
       "--sequences"},
      {{"--model", "dummy:llama-7b", "--context", "1", "--sequences", "1",
        "--memory", "24XB"},
       "--memory"},
      {{"--model", "dummy:llama-7b", "--context", "1", "--sequences", "1",
        "--memory", "-1GB"},
       "--memory"},
      {{"--model", "dummy:llama-7b", "--context", "1", "--sequences", "1",
        "--weights-dtype", "q4_k_s"},
       "--weights-dtype"},
      {{"--model", "dummy:llama-7b", "--context", "1", "--sequences", "1",
        "--kv-dtype", "q4_0"},
       "--kv-dtype"},
      {{"--model", "dummy:llama-7b", "--context", "1", "--sequences", "1",
        "--bogus"},
       "--bogus"},
      {{"--model", "dummy:llama-7b", "--context", "1", "--sequences", "1",
        "extra"},
       "extra"},
  };
  for (const Case& c : cases) {
    CommandResult r = Plan(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.message << "\n" << r.err;
    EXPECT_THAT(r.err, HasSubstr(c.message));
    EXPECT_THAT(r.err, HasSubstr("usage: paceline plan"));
    EXPECT_THAT(r.out, IsEmpty());
  }
}

TEST(PlanCommandTest, UnknownShapeListsKnownShapes) {
  CommandResult r = Plan(
      {"--model", "dummy:llama-70b", "--context", "1", "--sequences", "1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("llama-70b"));
  for (const char* known :
       {"stories110m", "llama-1b", "llama-7b", "llama-3-8b", "qwen3-0.6b"}) {
    EXPECT_THAT(r.err, HasSubstr(known));
  }
  EXPECT_THAT(r.out, IsEmpty());
}

TEST(PlanCommandTest, MissingFileFails) {
  CommandResult r = Plan({"--model", "/nonexistent/model.gguf", "--context",
                          "1", "--sequences", "1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("paceline plan: error: "));
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/model.gguf"));
  EXPECT_THAT(r.out, IsEmpty());
}

TEST(PlanCommandTest, CorruptFileFails) {
  // Every byte, the NULs included.
  constexpr char kBytes[] =
      "GGUF\x03\x00\x00\x00 this is not a GGUF header at all";
  const std::string path =
      WriteFile("plan_corrupt.gguf", std::string(kBytes, sizeof(kBytes) - 1));
  CommandResult r =
      Plan({"--model", path, "--context", "1", "--sequences", "1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("paceline plan: error: "));
  EXPECT_THAT(r.out, IsEmpty());
}

// A real GGUF: the file's own tensor bytes are the weights (stories260K is
// all F32), and KV per token = 2 × 5 layers × 4 KV heads × 8 × 2 bytes.
TEST(PlanCommandTest, GgufFileUsesItsTensorBytes) {
  const PlanReport r = PlanJson(
      {"--model", kStories260KPath, "--context", "512", "--sequences", "4"});
  const v1::MemoryPlan& plan = r.memory_plan();
  EXPECT_EQ(plan.weights_dtype(), "file");
  const int64_t params = r.info().parameters();
  EXPECT_GT(params, 200'000);
  EXPECT_LT(params, 300'000);
  EXPECT_EQ(plan.weights_bytes(), static_cast<uint64_t>(params) * 4);
  EXPECT_EQ(plan.kv_bytes_per_token(), 640u);
  EXPECT_EQ(plan.kv_bytes(), 640u * 512 * 4);
  EXPECT_EQ(r.info().context_length(), 512);

  const PlanReport f16 =
      PlanJson({"--model", kStories260KPath, "--context", "512", "--sequences",
                "4", "--weights-dtype", "f16"});
  EXPECT_EQ(f16.memory_plan().weights_bytes(),
            static_cast<uint64_t>(params) * 2);
}

// A MoE file keeps every expert resident but a decode step of one sequence
// reads only the 2 of 8 experts a token runs. The oracle's qwen3moe F32
// file (counts as in inspect_command_test): 3,806,720 weights, 4 bytes
// each; read per token: all but the embedding and 6 of 8 experts.
TEST(PlanCommandTest, MoeFileCountsAllExpertsAndReadsTheActiveOnes) {
  const std::string path =
      ::paceline::testing::SharedPath("oracle/models/qwen3moe-base-f32.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
  const PlanReport r =
      PlanJson({"--model", path, "--context=256", "--sequences=1"});
  EXPECT_EQ(r.info().parameters(), 3'806'720);
  EXPECT_EQ(r.active_parameters(), 1'447'424);
  EXPECT_EQ(r.experts(), 8);
  EXPECT_EQ(r.experts_used(), 2);
  EXPECT_EQ(r.memory_plan().weights_dtype(), "file");
  EXPECT_EQ(r.memory_plan().weights_bytes(), 4u * 3'806'720);
  EXPECT_EQ(r.weights_read_bytes_per_token(),
            4u * (3'806'720 - 131'072 - 2 * 6 * 3 * 65'536));

  const CommandResult t =
      Plan({"--model", path, "--context=256", "--sequences=1"});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_THAT(t.out, HasSubstr("2 used per token"));
  EXPECT_THAT(t.out, HasSubstr("1,447,424"));
  EXPECT_THAT(t.out, HasSubstr("weights read per token"));
}

// The benchmark shape: stories110m's layers with 8 experts, 2 used, in
// Q8_0 (34 bytes per 32 weights): every expert resident, and per token the
// active weights but the embedding.
TEST(PlanCommandTest, MoeDummyShapeReadsTheActiveWeights) {
  const PlanReport r = PlanJson({"--model", "dummy:stories110m-moe:q8_0",
                                 "--context=1024", "--sequences=1"});
  const int64_t ffn = 3 * 768 * 2048;
  const int64_t dense = 134'105'856;  // stories110m, one FFN per layer
  const int64_t extra = 12 * (8 * 768 + 2 * 64);  // routers, Q/K norms
  EXPECT_EQ(r.info().parameters(), dense + 12 * 7 * ffn + extra);
  EXPECT_EQ(r.active_parameters(), dense + 12 * ffn + extra);
  EXPECT_EQ(r.memory_plan().weights_bytes(),
            static_cast<uint64_t>((r.info().parameters() + 31) / 32 * 34));
  EXPECT_EQ(r.weights_read_bytes_per_token(),
            static_cast<uint64_t>((r.active_parameters() - 32000 * 768 + 31) /
                                  32 * 34));
}

}  // namespace
}  // namespace paceline::testing
