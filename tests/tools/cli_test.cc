// The top-level `paceline` dispatch: help, usage errors, unknown commands.

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/paceline_cli.h"

namespace paceline::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

TEST(PacelineCliTest, HelpListsCommandsOnStdout) {
  for (const std::string flag : {"--help", "-h", "help"}) {
    SCOPED_TRACE(flag);
    CommandResult r = RunPaceline({flag});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("usage: paceline COMMAND"));
    EXPECT_THAT(r.out, HasSubstr("inspect"));
    EXPECT_THAT(r.out, HasSubstr("tokenize"));
    EXPECT_THAT(r.out, HasSubstr("plan"));
    EXPECT_THAT(r.err, IsEmpty());
  }
}

TEST(PacelineCliTest, NoArgumentsIsUsageError) {
  CommandResult r = RunPaceline({});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.out, IsEmpty());
  EXPECT_THAT(r.err, HasSubstr("usage: paceline COMMAND"));
}

TEST(PacelineCliTest, UnknownCommandIsUsageError) {
  CommandResult r = RunPaceline({"frobnicate", "--model", "x"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.out, IsEmpty());
  EXPECT_THAT(r.err, HasSubstr("unknown command 'frobnicate'"));
  EXPECT_THAT(r.err, HasSubstr("usage: paceline COMMAND"));
}

TEST(PacelineCliTest, CommandHelpExitsZero) {
  CommandResult r = RunPaceline({"plan", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("usage: paceline plan"));
}

}  // namespace
}  // namespace paceline::testing
