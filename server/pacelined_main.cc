// pacelined: the Paceline serving daemon. See server/daemon.h.

#include <string>
#include <vector>

#include "server/daemon.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return paceline::server::RunDaemon(args);
}
