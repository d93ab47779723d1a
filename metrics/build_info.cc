#include "metrics/build_info.h"

#ifndef PACELINE_BUILD_VERSION
#define PACELINE_BUILD_VERSION "unknown"
#endif
#ifndef PACELINE_BUILD_COMMIT
#define PACELINE_BUILD_COMMIT "unknown"
#endif

namespace paceline::metrics {

const char* BuildVersion() { return PACELINE_BUILD_VERSION; }
const char* BuildCommit() { return PACELINE_BUILD_COMMIT; }

}  // namespace paceline::metrics
