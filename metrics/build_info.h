#ifndef PACELINE_METRICS_BUILD_INFO_H_
#define PACELINE_METRICS_BUILD_INFO_H_

// What paceline_build_info reports, fixed when CMake configured the build.

namespace paceline::metrics {

// The project version (CMake's project(VERSION)).
const char* BuildVersion();
// `git describe --always --dirty` of the source tree at configure time;
// "unknown" outside a git checkout.
const char* BuildCommit();

}  // namespace paceline::metrics

#endif  // PACELINE_METRICS_BUILD_INFO_H_
