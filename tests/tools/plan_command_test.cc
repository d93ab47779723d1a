// `paceline plan`, run as a real process: its table, its JSON, its exit
// codes (0 ok, 1 failure, 2 usage).

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tools/run_command.h"

namespace paceline::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr absl::string_view kStories260k =
    PACELINE_SHARED_DIR "/models/stories260K.gguf";

// The raw text of `"key": VALUE` in the command's one-object JSON output
// (the value up to the next ',' or newline); "<missing>" when absent.
std::string JsonField(const std::string& json, absl::string_view key) {
  const std::string needle = absl::StrCat("\"", key, "\": ");
  const size_t start = json.find(needle);
  if (start == std::string::npos) return "<missing>";
  const size_t begin = start + needle.size();
  const size_t end = json.find_first_of(",\n", begin);
  return json.substr(begin, end - begin);
}

uint64_t JsonUint(const std::string& json, absl::string_view key) {
  uint64_t value = 0;
  EXPECT_TRUE(absl::SimpleAtoi(JsonField(json, key), &value)) << key << " in\n"
                                                              << json;
  return value;
}

CommandResult Plan(std::vector<std::string> args) {
  args.insert(args.begin(), "plan");
  return RunPaceline(args);
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
  CommandResult r =
      Plan({"--model", "dummy:llama-7b", "--context", "4096", "--sequences",
            "8", "--weights-dtype", "f16", "--memory", "24GiB", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string& j = r.out;
  EXPECT_EQ(j.front(), '{');
  EXPECT_EQ(j.substr(j.size() - 2), "}\n");
  EXPECT_EQ(JsonField(j, "model"), "\"dummy:llama-7b\"");
  EXPECT_EQ(JsonField(j, "architecture"), "\"llama\"");
  EXPECT_EQ(JsonUint(j, "parameters"), 6'738'415'616u);
  EXPECT_EQ(JsonField(j, "weights_dtype"), "\"f16\"");
  EXPECT_EQ(JsonUint(j, "weights_bytes"), 13'476'831'232u);
  EXPECT_EQ(JsonField(j, "kv_dtype"), "\"f16\"");
  EXPECT_EQ(JsonUint(j, "kv_bytes_per_token"), 524'288u);
  EXPECT_EQ(JsonUint(j, "context"), 4096u);
  EXPECT_EQ(JsonUint(j, "sequences"), 8u);
  EXPECT_EQ(JsonUint(j, "kv_bytes"), 17'179'869'184u);
  EXPECT_EQ(JsonUint(j, "total_bytes"), 30'656'700'416u);
  EXPECT_EQ(JsonUint(j, "rule_of_thumb_bytes"), 17'519'880'601u);
  EXPECT_EQ(JsonUint(j, "memory_bytes"), 25'769'803'776u);
  EXPECT_EQ(JsonField(j, "fits"), "false");
  EXPECT_EQ(JsonUint(j, "sequences_that_fit"), 5u);
  EXPECT_EQ(JsonUint(j, "shortfall_bytes"), 4'886'896'640u);
  EXPECT_EQ(JsonField(j, "weights_fit"), "true");
  EXPECT_EQ(JsonUint(j, "weights_shortfall_bytes"), 0u);
}

TEST(PlanCommandTest, JsonWithoutBudgetHasNulls) {
  CommandResult r = Plan({"--model=dummy:llama-3-8b", "--context=8192",
                          "--sequences=1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(JsonField(r.out, "weights_dtype"), "\"f16\"");  // the default
  EXPECT_EQ(JsonUint(r.out, "parameters"), 8'030'261'248u);
  EXPECT_EQ(JsonUint(r.out, "kv_bytes_per_token"), 131'072u);
  EXPECT_EQ(JsonField(r.out, "memory_bytes"), "null");
  EXPECT_EQ(JsonField(r.out, "fits"), "null");
  EXPECT_EQ(JsonField(r.out, "sequences_that_fit"), "null");
}

TEST(PlanCommandTest, WeightsAloneDoNotFit) {
  std::vector<std::string> args = {
      "--model", "dummy:llama-7b", "--context", "4096", "--sequences",
      "1",       "--memory",       "8GB"};
  CommandResult table = Plan(args);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("no: the weights alone do not fit"));
  EXPECT_THAT(table.out, HasSubstr("5,476,831,232 bytes"));

  args.push_back("--json");
  CommandResult json = Plan(args);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_EQ(JsonField(json.out, "weights_fit"), "false");
  EXPECT_EQ(JsonUint(json.out, "weights_shortfall_bytes"), 5'476'831'232u);
  EXPECT_EQ(JsonUint(json.out, "sequences_that_fit"), 0u);
  EXPECT_EQ(JsonField(json.out, "fits"), "false");
}

TEST(PlanCommandTest, DtypeFromSpecAndFlags) {
  CommandResult spec = Plan({"--model", "dummy:llama-7b:q4_0", "--context", "1",
                             "--sequences", "1", "--json"});
  ASSERT_EQ(spec.exit_code, 0) << spec.err;
  EXPECT_EQ(JsonField(spec.out, "weights_dtype"), "\"q4_0\"");
  EXPECT_EQ(JsonUint(spec.out, "weights_bytes"), 3'790'358'784u);

  CommandResult flag = Plan({"--model", "dummy:llama-7b:q4_0",
                             "--weights-dtype", "q8_0", "--kv-dtype", "f32",
                             "--context", "1", "--sequences", "1", "--json"});
  ASSERT_EQ(flag.exit_code, 0) << flag.err;
  EXPECT_EQ(JsonField(flag.out, "weights_dtype"), "\"q8_0\"");
  EXPECT_EQ(JsonUint(flag.out, "weights_bytes"), 7'159'566'592u);
  EXPECT_EQ(JsonField(flag.out, "kv_dtype"), "\"f32\"");
  EXPECT_EQ(JsonUint(flag.out, "kv_bytes_per_token"), 1'048'576u);
}

TEST(PlanCommandTest, MemorySuffixes) {
  for (auto [text, bytes] :
       std::vector<std::pair<std::string, uint64_t>>{{"16GB", 16'000'000'000},
                                                     {"512MiB", 512u << 20},
                                                     {"1e9", 1'000'000'000},
                                                     {"123456", 123456}}) {
    CommandResult r = Plan({"--model", "dummy:stories110m", "--context", "1024",
                            "--sequences", "1", "--memory", text, "--json"});
    ASSERT_EQ(r.exit_code, 0) << text << ": " << r.err;
    EXPECT_EQ(JsonUint(r.out, "memory_bytes"), bytes) << text;
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
        "--weights-dtype", "q4_k"},
       "--weights-dtype"},
      {{"--model", "dummy:llama-7b", "--context", "1", "--sequences", "1",
        "--kv-dtype", "q8_0"},
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
  const std::string path = ::testing::TempDir() + "/plan_corrupt.gguf";
  {
    std::ofstream f(path, std::ios::binary);
    f << "GGUF\x03\x00\x00\x00 this is not a GGUF header at all";
  }
  CommandResult r =
      Plan({"--model", path, "--context", "1", "--sequences", "1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("paceline plan: error: "));
  EXPECT_THAT(r.out, IsEmpty());
}

// A real GGUF: the file's own tensor bytes are the weights (stories260K is
// all F32), and KV per token = 2 × 5 layers × 4 KV heads × 8 × 2 bytes.
TEST(PlanCommandTest, GgufFileUsesItsTensorBytes) {
  CommandResult r = Plan({"--model", std::string(kStories260k), "--context",
                          "512", "--sequences", "4", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(JsonField(r.out, "weights_dtype"), "\"file\"");
  const uint64_t params = JsonUint(r.out, "parameters");
  EXPECT_GT(params, 200'000u);
  EXPECT_LT(params, 300'000u);
  EXPECT_EQ(JsonUint(r.out, "weights_bytes"), params * 4);
  EXPECT_EQ(JsonUint(r.out, "kv_bytes_per_token"), 640u);
  EXPECT_EQ(JsonUint(r.out, "kv_bytes"), 640u * 512 * 4);
  EXPECT_EQ(JsonUint(r.out, "model_context_length"), 512u);

  CommandResult f16 =
      Plan({"--model", std::string(kStories260k), "--context", "512",
            "--sequences", "4", "--weights-dtype", "f16", "--json"});
  ASSERT_EQ(f16.exit_code, 0) << f16.err;
  EXPECT_EQ(JsonUint(f16.out, "weights_bytes"), params * 2);
}

}  // namespace
}  // namespace paceline::testing
