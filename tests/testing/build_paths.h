#ifndef PACELINE_TESTS_TESTING_BUILD_PATHS_H_
#define PACELINE_TESTS_TESTING_BUILD_PATHS_H_

// Where this build's folders are: the source tree, the build folder and
// the read-only shared/ folder (PACELINE_SHARED_DIR at configure time).
// CMake writes them into one generated file (build_paths.cc in the build
// folder), not onto each test's compile line: a compile line with an
// absolute path differs between clones, and ccache could not share the
// compiled tests between a developer's clone and CI's.

#include <string>

#include "absl/strings/string_view.h"

namespace paceline::testing {

const char* SourceDir();
const char* BinaryDir();
const char* SharedDir();

// `relative` under each (no leading slash).
std::string SourcePath(absl::string_view relative);
std::string BinaryPath(absl::string_view relative);
std::string SharedPath(absl::string_view relative);

}  // namespace paceline::testing

#endif  // PACELINE_TESTS_TESTING_BUILD_PATHS_H_
