#ifndef PACELINE_TESTS_TESTING_PACELINE_CLI_H_
#define PACELINE_TESTS_TESTING_PACELINE_CLI_H_

// The build's `paceline` command-line tool, run as a real process.

#include <string>
#include <vector>

#include "tests/testing/run_command.h"

namespace paceline::testing {

// The path of the build's `paceline` binary.
std::string PacelineCliPath();

// RunCommand of PacelineCliPath() with `args`.
CommandResult RunPaceline(const std::vector<std::string>& args);

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_PACELINE_CLI_H_
