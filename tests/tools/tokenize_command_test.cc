// `paceline tokenize` on the real test model.

#include <string>

#include "gtest/gtest.h"
#include "tests/testing/paceline_cli.h"
#include "tests/testing/stories260k_oracle.h"

namespace paceline::testing {
namespace {

const std::string& kModel = kStories260KPath;

class TokenizeCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveStories260K()) {
      GTEST_SKIP() << kModel << " is absent (the shared/ test data)";
    }
  }
};

// shared/models/README.md: "Once upon a time" with BOS and the SPM
// leading-space prefix is [1, 403, 407, 261, 378].
TEST_F(TokenizeCommandTest, OnceUponATimeWithBos) {
  const CommandResult r =
      RunPaceline({"tokenize", "--model", kModel, "Once upon a time"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "1 403 407 261 378\n");
}

TEST_F(TokenizeCommandTest, NoBosDropsOnlyTheBos) {
  const CommandResult r = RunPaceline(
      {"tokenize", "--model=" + kModel, "--no-bos", "Once upon a time"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "403 407 261 378\n");
}

TEST_F(TokenizeCommandTest, UsageErrors) {
  EXPECT_EQ(RunPaceline({"tokenize", "Once"}).exit_code, 2);  // no --model
  EXPECT_EQ(RunPaceline({"tokenize", "--model", kModel}).exit_code, 2);
  EXPECT_EQ(RunPaceline({"tokenize", "--model"}).exit_code, 2);
  EXPECT_EQ(RunPaceline({"tokenize", "--help"}).exit_code, 0);
}

TEST(TokenizeCommandErrorsTest, MissingModelFails) {
  const CommandResult r =
      RunPaceline({"tokenize", "--model", "/nonexistent.gguf", "hi"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nonexistent.gguf"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace paceline::testing
