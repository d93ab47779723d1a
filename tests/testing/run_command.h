#ifndef PACELINE_TESTS_TESTING_RUN_COMMAND_H_
#define PACELINE_TESTS_TESTING_RUN_COMMAND_H_

// Runs a program the way a shell would (without a shell) and captures what
// it printed: the helper behind the `paceline` CLI tests (paceline_cli.h).

#include <string>
#include <vector>

namespace paceline::testing {

struct CommandResult {
  // The exit status, or 128 + the signal number when a signal ended it, or
  // -1 when the program could not be started (`err` then says why).
  int exit_code = -1;
  std::string out;  // everything written to stdout
  std::string err;  // everything written to stderr
};

// Runs argv[0] (a path; PATH is not searched) with arguments argv[1..],
// stdin from /dev/null, stdout and stderr each into its own temporary file,
// and waits for it. Safe for output of any size.
CommandResult RunCommand(const std::vector<std::string>& argv);

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_RUN_COMMAND_H_
