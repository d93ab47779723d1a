// RunCommand against /bin/sh: both streams, the exit code, signals, and a
// program that does not exist.

#include "tests/testing/run_command.h"

#include "gtest/gtest.h"

namespace paceline::testing {
namespace {

TEST(RunCommandTest, CapturesBothStreamsAndExitCode) {
  CommandResult r =
      RunCommand({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
}

TEST(RunCommandTest, ReportsSignalsAndMissingPrograms) {
  EXPECT_EQ(RunCommand({"/bin/sh", "-c", "kill -9 $$"}).exit_code, 128 + 9);
  CommandResult missing = RunCommand({"/nonexistent/program"});
  EXPECT_NE(missing.exit_code, 0);
}

}  // namespace
}  // namespace paceline::testing
