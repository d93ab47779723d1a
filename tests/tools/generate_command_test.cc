// `paceline generate` on the real test model and on a dummy model.

#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/paceline_cli.h"
#include "tests/testing/stories260k_oracle.h"

namespace paceline::testing {
namespace {

const std::string& kModel = kStories260KPath;
constexpr const char* kGreedy64 = kGreedy64Text;
constexpr const char* kGreedy252 = kGreedy252Text;

// The last line of stderr.
std::string LastLine(const std::string& err) {
  std::string s = err;
  if (!s.empty() && s.back() == '\n') s.pop_back();
  const size_t nl = s.rfind('\n');
  return nl == std::string::npos ? s : s.substr(nl + 1);
}

void ExpectTimingLine(const std::string& err, int prompt, int generated) {
  const std::regex re(
      "prompt: " + std::to_string(prompt) +
      " tokens, [0-9]+\\.[0-9] tok/s; generated: " + std::to_string(generated) +
      " tokens, [0-9]+\\.[0-9] tok/s");
  EXPECT_TRUE(std::regex_match(LastLine(err), re)) << err;
}

class GenerateCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kModel)) {
      GTEST_SKIP() << kModel << " is absent (the shared/ test data)";
    }
  }
};

TEST_F(GenerateCommandTest, Greedy64MatchesLlamaCpp) {
  const CommandResult r =
      RunPaceline({"generate", "--model", kModel, "--prompt",
                   "Once upon a time", "--max-tokens", "64", "--threads", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, std::string(kGreedy64) + "\n");
  ExpectTimingLine(r.err, 5, 64);
}

TEST_F(GenerateCommandTest, Greedy252MatchesRunC) {
  const CommandResult r = RunPaceline(
      {"generate", "--model", kModel, "--prompt", "Once upon a time",
       "--max-tokens", "252", "--temperature", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, std::string(kGreedy252) + "\n");
  ExpectTimingLine(r.err, 5, 252);
}

TEST_F(GenerateCommandTest, DraftsLeaveRunCsOutputAndSayWhatTheyDid) {
  const CommandResult r = RunPaceline(
      {"generate", "--model", kModel, "--prompt", "Once upon a time",
       "--max-tokens", "252", "--max-draft-tokens", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, std::string(kGreedy252) + "\n");
  ExpectTimingLine(r.err, 5, 252);
  // "speculation: D draft tokens, A accepted (P%); S engine steps": one
  // token at a time takes 252 steps (the prompt's, then 251); each
  // accepted draft saves one.
  int drafted = 0, accepted = 0, steps = 0;
  const size_t at = r.err.find("speculation: ");
  ASSERT_NE(at, std::string::npos) << r.err;
  ASSERT_EQ(std::sscanf(r.err.c_str() + at,
                        "speculation: %d draft tokens, %d accepted (%*f%%); "
                        "%d engine steps",
                        &drafted, &accepted, &steps),
            3)
      << r.err;
  EXPECT_GT(accepted, 0);
  EXPECT_LE(accepted, drafted);
  EXPECT_EQ(steps, 252 - accepted);
  EXPECT_EQ(RunPaceline({"generate", "--model", kModel, "--prompt", "x",
                         "--max-draft-tokens", "17"})
                .exit_code,
            2);
}

TEST_F(GenerateCommandTest, SamplingIsReproducibleWithASeed) {
  const std::vector<std::string> args = {"generate",
                                         "--model",
                                         kModel,
                                         "--prompt",
                                         "Once upon a time",
                                         "--max-tokens",
                                         "40",
                                         "--temperature",
                                         "0.9",
                                         "--top-k",
                                         "40",
                                         "--top-p",
                                         "0.95",
                                         "--seed",
                                         "1234"};
  const CommandResult a = RunPaceline(args);
  const CommandResult b = RunPaceline(args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_FALSE(a.out.empty());
}

// Several prompts run together through the serving loop; each continuation
// is labelled and equals that prompt's solo run.
TEST_F(GenerateCommandTest, SeveralPromptsEqualTheirSoloRuns) {
  const std::vector<std::string> prompts = {"Once upon a time", "The cat",
                                            "Tom and Lily went to the"};
  std::vector<std::string> args = {"generate", "--model", kModel,
                                   "--max-tokens", "48"};
  std::string want;
  for (size_t i = 0; i < prompts.size(); ++i) {
    args.push_back("--prompt");
    args.push_back(prompts[i]);
    const CommandResult solo =
        RunPaceline({"generate", "--model", kModel, "--max-tokens", "48",
                     "--prompt", prompts[i]});
    ASSERT_EQ(solo.exit_code, 0) << solo.err;
    want +=
        "--- [" + std::to_string(i + 1) + "] " + prompts[i] + "\n" + solo.out;
  }
  const CommandResult together = RunPaceline(args);
  ASSERT_EQ(together.exit_code, 0) << together.err;
  EXPECT_EQ(together.out, want);
  ExpectTimingLine(together.err, 5 + 4 + 9, 3 * 48);
}

TEST_F(GenerateCommandTest, ZeroTokensPrintsAnEmptyLine) {
  const CommandResult r =
      RunPaceline({"generate", "--model", kModel, "--prompt",
                   "Once upon a time", "--max-tokens", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "\n");
  ExpectTimingLine(r.err, 5, 0);
}

// An explicit CPU backend gives the same greedy tokens and says so.
TEST_F(GenerateCommandTest, BackendCpuMatchesLlamaCpp) {
  const CommandResult r = RunPaceline(
      {"generate", "--model", kModel, "--prompt", "Once upon a time",
       "--max-tokens", "64", "--backend", "cpu", "--threads", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, std::string(kGreedy64) + "\n");
  EXPECT_NE(r.err.find("paceline generate: backend cpu: 2 engine threads"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("using the CPU"), std::string::npos) << r.err;
  ExpectTimingLine(r.err, 5, 64);
}

TEST_F(GenerateCommandTest, UsageErrors) {
  const auto code = [](std::vector<std::string> args) {
    args.insert(args.begin(), "generate");
    return RunPaceline(args).exit_code;
  };
  EXPECT_EQ(code({"--prompt", "x"}), 2);    // no --model
  EXPECT_EQ(code({"--model", kModel}), 2);  // no --prompt
  EXPECT_EQ(code({"--model", kModel, "--prompt", "x", "extra"}), 2);
  EXPECT_EQ(code({"--model", kModel, "--prompt", "x", "--max-tokens", "-1"}),
            2);
  EXPECT_EQ(code({"--model", kModel, "--prompt", "x", "--top-p", "0"}), 2);
  EXPECT_EQ(code({"--model", kModel, "--prompt", "x", "--temperature", "hot"}),
            2);
  EXPECT_EQ(code({"--model", kModel, "--prompt", "x", "--bogus"}), 2);
  EXPECT_EQ(code({"--model", kModel, "--prompt", "x", "--backend", "tpu"}), 2);
  EXPECT_EQ(code({"--model", kModel, "--prompt", "x", "--kv-dtype", "q4_0"}),
            2);
  EXPECT_EQ(code({"--help"}), 0);
}

TEST(GenerateCommandErrorsTest, MissingModelFails) {
  const CommandResult r = RunPaceline(
      {"generate", "--model", "/nonexistent.gguf", "--prompt", "hi"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nonexistent.gguf"), std::string::npos) << r.err;
}

// A dummy model runs through the same path; its byte-level tokenizer makes
// "hi" BOS + 2 byte tokens.
TEST(GenerateCommandDummyTest, RunsADummyModel) {
  const CommandResult r =
      RunPaceline({"generate", "--model", "dummy:stories15m:q8_0", "--prompt",
                   "hi", "--max-tokens", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ExpectTimingLine(r.err, 3, 3);
}

// --kv-dtype f16 on the CPU: the memory line says f16 at half the bytes
// per token of f32 (dummy:stories15m: 2 × 6 layers × 6 KV heads × 48).
TEST(GenerateCommandDummyTest, KvDtypeF16HalvesTheBytesPerToken) {
  for (const char* dtype : {"f32", "f16"}) {
    SCOPED_TRACE(dtype);
    const CommandResult r = RunPaceline(
        {"generate", "--model", "dummy:stories15m:q8_0", "--prompt", "hi",
         "--max-tokens", "3", "--backend", "cpu", "--kv-dtype", dtype});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const int bytes = std::string(dtype) == "f16" ? 2 : 4;
    EXPECT_NE(r.err.find(absl::StrCat("KV ", 2 * 6 * 6 * 48 * bytes,
                                      " bytes per token (", dtype, ")")),
              std::string::npos)
        << r.err;
    ExpectTimingLine(r.err, 3, 3);
  }
}

// Models with sliding windows (oracle-next's Gemma 3 and gpt-oss files:
// windows of 32) get a pool sized for their KV groups, every group's blocks
// for the request (a pool of one group's blocks could never run it), and
// generate past the window.
TEST(GenerateCommandWindowsTest, RunsModelsWithSlidingWindows) {
  for (const char* name : {"gemma3-base-q8_0", "gpt-oss-base-mxfp4"}) {
    SCOPED_TRACE(name);
    const std::string path = ::paceline::testing::SharedPath(
        absl::StrCat("oracle-next/models/", name, ".gguf"));
    if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent";
    const CommandResult r = RunPaceline(
        {"generate", "--model", path, "--prompt", "Once upon a time",
         "--max-tokens", "40", "--backend", "cpu"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("sliding windows released"), std::string::npos)
        << r.err;
    ExpectTimingLine(r.err, 5, 40);
  }
}

// Unset, the backend is CUDA when there is a device, else the CPU, said on
// stderr; an explicit cuda without a device fails with the reason.
TEST(GenerateCommandBackendTest, CudaWithoutADeviceIsAnError) {
  const std::vector<std::string> args = {
      "generate",     "--model", "dummy:stories15m:q8_0", "--prompt", "hi",
      "--max-tokens", "1"};
  const CommandResult chosen = RunPaceline(args);
  ASSERT_EQ(chosen.exit_code, 0) << chosen.err;
  if (chosen.err.find("paceline generate: backend cuda:") !=
      std::string::npos) {
    GTEST_SKIP() << "this machine has a CUDA device";
  }
  EXPECT_NE(chosen.err.find("paceline generate: backend cpu:"),
            std::string::npos)
      << chosen.err;
  EXPECT_TRUE(
      chosen.err.find("no CUDA device found: using the CPU backend") !=
          std::string::npos ||
      chosen.err.find("this build has no CUDA backend: using the CPU") !=
          std::string::npos)
      << chosen.err;

  std::vector<std::string> cuda = args;
  cuda.insert(cuda.end(), {"--backend", "cuda"});
  const CommandResult r = RunPaceline(cuda);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("paceline generate: error: --backend is cuda but "),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace paceline::testing
