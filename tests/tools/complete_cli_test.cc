// The real `paceline complete` binary against the real pacelined on
// stories260K: the oracle continuation, unary and streamed, a paced stream
// that takes its time, a wrong key, and structured output (--json-schema,
// --choice, a refused keyword). They skip when ../shared/models is
// absent. (tests/tools/complete_command_test.cc covers the flags and the
// output format against a scripted service.)

#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/files.h"
#include "tests/testing/paceline_cli.h"
#include "tests/testing/person_schema.h"
#include "tests/testing/stories260k_oracle.h"

namespace paceline::testing {
namespace {

using ::testing::AnyOf;
using ::testing::Eq;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

constexpr char kKey[] = "alice-test-key";

// The finish line for a greedy 64-token run of "Once upon a time": delivery
// is "-" for Complete, seconds for a stream. The prompt may be partly
// cached, and the seconds vary.
bool IsFinishLine(const std::string& err, bool stream, int generated) {
  const std::string pattern = absl::StrCat(
      R"(finish: length; prompt 5 tokens \(\d+ cached\), generated )",
      generated, R"( tokens; generation \d+\.\d\d s, delivery )",
      stream ? R"(\d+\.\d\d s)" : "-", "\n");
  return std::regex_match(err, std::regex(pattern));
}

class CompleteCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveStories260K()) {
      GTEST_SKIP() << "no " << kStories260KPath;
    }
    ASSERT_TRUE(
        daemon_
            .Start({"--model", kStories260KPath, "--listen", "127.0.0.1:0",
                    "--tenant", absl::StrCat("alice:", kKey), "--allow-root"})
            .ok())
        << daemon_.stderr_text();
  }

  // Every test ends with a drain: SIGTERM, exit 0.
  void TearDown() override {
    if (daemon_.pid() < 0) return;
    EXPECT_EQ(daemon_.Drain().value_or(-1), 0) << daemon_.stderr_text();
  }

  // `paceline complete --server ADDR --prompt "Once upon a time" args...`.
  CommandResult Complete(std::vector<std::string> args) {
    args.insert(args.begin(), {"complete", "--server", daemon_.address(),
                               "--prompt", kOnceUponATime, "--timeout", "60"});
    return RunPaceline(args);
  }

  DaemonProcess daemon_;
};

TEST_F(CompleteCliTest, UnaryPrintsTheOracleContinuation) {
  const CommandResult r =
      Complete({"--api-key", kKey, "--max-tokens", "64", "--temperature", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, std::string(kGreedy64Text) + "\n");
  EXPECT_TRUE(IsFinishLine(r.err, /*stream=*/false, 64)) << r.err;
}

TEST_F(CompleteCliTest, StreamPrintsTheOracleContinuation) {
  const CommandResult r = Complete({"--api-key", kKey, "--max-tokens", "64",
                                    "--temperature", "0", "--stream"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, std::string(kGreedy64Text) + "\n");
  EXPECT_TRUE(IsFinishLine(r.err, /*stream=*/true, 64)) << r.err;
}

// 20 tokens at 20 tokens/s, one at once (the default burst): the last is
// released no sooner than 0.95 s after the request was queued (the bound
// pacing guarantees; a loaded machine only makes it later).
TEST_F(CompleteCliTest, PacedStreamTakesItsTime) {
  const absl::Time start = absl::Now();
  const CommandResult r =
      Complete({"--api-key", kKey, "--max-tokens", "20", "--temperature", "0",
                "--stream", "--pace", "20"});
  const absl::Duration wall = absl::Now() - start;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GE(wall, absl::Milliseconds(950));
  // The oracle's first 20 tokens, and the newline.
  ASSERT_GT(r.out.size(), 40u);
  ASSERT_EQ(r.out.back(), '\n');
  EXPECT_THAT(kGreedy64Text, StartsWith(r.out.substr(0, r.out.size() - 1)));
  EXPECT_TRUE(IsFinishLine(r.err, /*stream=*/true, 20)) << r.err;
}

TEST_F(CompleteCliTest, WrongKeyIsUnauthenticated) {
  for (const bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "stream" : "unary");
    std::vector<std::string> args = {"--api-key", "not-a-key", "--max-tokens",
                                     "4"};
    if (stream) args.push_back("--stream");
    const CommandResult r = Complete(args);
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_THAT(r.err, HasSubstr("UNAUTHENTICATED"));
    EXPECT_THAT(r.out, IsEmpty());
  }
}

// Sampling freely (temperature 1) inside the schema, unary and streamed:
// every answer is valid, and ends on its own.
TEST_F(CompleteCliTest, JsonSchemaAnswersAreValid) {
  const std::string schema = WriteFile("person.json", kPersonSchema);
  for (const char* seed : {"1", "2", "3"}) {
    for (const bool stream : {false, true}) {
      SCOPED_TRACE(absl::StrCat("seed ", seed, stream ? " stream" : ""));
      std::vector<std::string> args = {
          "--api-key", kKey, "--max-tokens",  "200", "--temperature", "1",
          "--seed",    seed, "--json-schema", schema};
      if (stream) args.push_back("--stream");
      const CommandResult r = Complete(args);
      ASSERT_EQ(r.exit_code, 0) << r.err;
      ASSERT_FALSE(r.out.empty());
      EXPECT_EQ(PersonViolation(r.out.substr(0, r.out.size() - 1)), "")
          << r.out;
      EXPECT_THAT(r.err, StartsWith("finish: eos;"));
    }
  }
}

TEST_F(CompleteCliTest, ChoiceAnswersAreOneOfTheChoices) {
  for (const char* seed : {"1", "2", "3"}) {
    SCOPED_TRACE(seed);
    const CommandResult r =
        Complete({"--api-key", kKey, "--temperature", "1", "--seed", seed,
                  "--choice", "yes,no,not\\, sure"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, AnyOf(Eq("yes\n"), Eq("no\n"), Eq("not, sure\n")));
    EXPECT_THAT(r.err, StartsWith("finish: eos;"));
  }
}

TEST_F(CompleteCliTest, RefusedKeywordIsInvalidArgument) {
  const CommandResult r = Complete(
      {"--api-key", kKey, "--json-schema",
       WriteFile("unique.json", R"({"type": "array", "uniqueItems": true})")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, StartsWith("paceline complete: error: INVALID_ARGUMENT: "
                                "sampling.constraint.json_schema"));
  EXPECT_THAT(r.err, HasSubstr("uniqueItems"));
  EXPECT_THAT(r.out, IsEmpty());
}

}  // namespace
}  // namespace paceline::testing
