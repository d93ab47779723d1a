#include "tests/testing/paceline_cli.h"

namespace paceline::testing {

std::string PacelineCliPath() { return PACELINE_CLI; }

CommandResult RunPaceline(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {PacelineCliPath()};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv);
}

}  // namespace paceline::testing
