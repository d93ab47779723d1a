#include <span>
#include <string>

#include "tools/paceline/commands.h"

namespace paceline::tools {
// Placeholder until the memory planner lands (issue 2, in progress).
int RunTokenize(std::span<const std::string>) { return 1; }
}  // namespace paceline::tools
