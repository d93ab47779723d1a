// pacelined: the Paceline serving daemon. See server/daemon.h.

#include <string>
#include <vector>

#include "server/daemon.h"
#include "server/library_logs.h"

int main(int argc, char** argv) {
  paceline::server::InstallLibraryLogLimits();
  std::vector<std::string> args(argv + 1, argv + argc);
  return paceline::server::RunDaemon(args);
}
